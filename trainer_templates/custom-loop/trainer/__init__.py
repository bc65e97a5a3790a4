"""A custom-training-loop trainer for vtrain: `python -m trainer.task --help`."""
