"""A Keras trainer for vtrain: `python -m trainer.task --help`."""
