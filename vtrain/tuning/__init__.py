"""Hyperparameter tuning's pure parts: the `tuning:` block's model and the search over it.

- :mod:`.model`    the block as frozen dataclasses (built from schema-checked data)
- :mod:`.search`   grid, seeded random and optuna-TPE suggestions; the median stopping rule
- :mod:`.table`    a study's trials as a table
- :mod:`.estimate` machine-hours and wall time of a whole study

The request body is built in :mod:`vtrain.request.tuning_job`, a study runs on this machine in
:mod:`vtrain.local.studies` and in the emulator in :mod:`vtrain.emulator.local_studies`.
Importing this package costs nothing: each module is imported where it is used.
"""
