"""A tensor-parallel (DTensor) trainer for vtrain: `python -m trainer.task --help`."""
