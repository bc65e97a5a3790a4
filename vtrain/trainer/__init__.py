"""The trainer: a directory of user code → the file selection → a content-hashed sdist → staged.

- :mod:`.select`      which files of the trainer directory ship (excludes, secret refusal)
- :mod:`.entrymodule` the one "will `python -m MODULE` run" check
- :mod:`.packaging`   the trainer's and vtrain runtime's sdists, named by their content hash
- :mod:`.staging`     uploads to Cloud Storage (or a local staging directory)
- :mod:`.artifacts`   the artifacts planner: a job file's sdist and image names, from the files

Below the job file: imports only the ground modules (errors, constants, userpaths, proctree, network);
the planner alone sits above the job file and the request (it reads a JobConfig and hands the request
its value), a stage of its own in the architecture test.
"""
