"""Hyperparameter tuning: the `tuning:` block of a job file, run on Vertex AI or on this machine.

- :mod:`.model`    the block as frozen dataclasses (built from schema-checked data)
- :mod:`.spec`     JobConfig → the `hyperparameterTuningJobs.create` body (pure)
- :mod:`.search`   grid, seeded random and optuna-TPE suggestions; the median stopping rule
- :mod:`.local`    `vtrain local` on a tuning job: each trial a local job, several at a time
- :mod:`.emulated` the emulator's `--run-jobs` for tuning jobs, through the local tuner
- :mod:`.estimate` machine-hours and wall time of a whole study

Importing this package costs nothing: each module is imported where it is used.
"""
