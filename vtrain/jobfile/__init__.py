"""A job file → a checked :class:`~vtrain.jobfile.config.JobConfig`, every problem at once with its position.

- :mod:`.yamlpos`     YAML with positions (safe_load only, size/node/depth limits)
- :mod:`.nodes`       the schema's node types (each node carries its doc, default and examples)
- :mod:`.schema`      the job file's shape from those nodes: pools, the diloco/dtensor/tuning/model blocks, the top
                      level
- :mod:`.config`      the job config (frozen dataclasses), importing nothing that uses it; :mod:`.assemble`
                      builds it from checked data
- :mod:`.artifacts`   the artifacts planner: what the job's files name (sdists, image tags), from the files
- :mod:`.rules`       cross-field checks against Vertex's rules
- :mod:`.json_schema` the JSON Schema, generated from the nodes
- :mod:`.reference`   the manual's job-file reference table (`vtrain schema --markdown`), from the nodes
- :mod:`.load`        a file (and `--set` overrides) through all of them: `load_config`
"""
