"""What a person watching a run sees, for local and Vertex jobs alike.

- :mod:`.lines`: the replicas' own lines told from TensorFlow's C++ logging; progress as plain lines.
- :mod:`.live`: the live view (a `rich` table on a terminal, plain lines elsewhere) over any rows.
- :mod:`.vertex_rows`: a Vertex job's rows, from its state and the step lines its replicas log.
- :mod:`.vertex`: following a Vertex job in that view (`submit --wait`, `status --watch`).
- :mod:`.timeline`: a finished run drawn as a timeline (HTML always, PNG with matplotlib).

The view sits above `local/` and `cloud/` (it reads their rows and handles) and below the commands.
"""
