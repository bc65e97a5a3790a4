"""`python -m vtrain` runs the CLI, so tests and CI need no console script on PATH."""

from vtrain.cli import main

main()
