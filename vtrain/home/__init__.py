"""Bringing a job home: any CustomJob run here, a cloud failure replayed here.

- :mod:`.source`: a CustomJob from wherever it is (a request file, a proto or REST body, a job on Vertex by name)
  as the body the local runner starts;
- :mod:`.outcome`: how a job ended on Vertex and here, and whether the two agree (pure);
- :mod:`.replay`: `vtrain replay JOB`: read the job, its ending and its log, run the same request here (its
  checkpoints, the same outside fault), and say whether the ending was reproduced.

This stage reads the cloud (:mod:`vtrain.cloud`) and runs here (:mod:`vtrain.local`); neither of those knows it.
"""

from __future__ import annotations
