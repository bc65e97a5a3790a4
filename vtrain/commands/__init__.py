"""CLI commands, one module per area; each imports heavy libraries only inside its functions."""
