"""Sample trainer package used by vtrain's packaging tests."""
