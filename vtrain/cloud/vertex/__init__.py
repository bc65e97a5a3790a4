"""The Vertex AI backend: the official `aiplatform_v1.JobServiceClient` behind a JobHandle.

- :mod:`.client`  VertexBackend (create, get, list, cancel) and VertexJob (the handle)
- :mod:`.retry`   which errors are transient, backoff, one-line explanations of refusals
- :mod:`.logs`    Cloud Logging `entries:list` for a job, with replica prefixes

Importing this package is cheap: Google libraries load on first use.
"""

from vtrain.cloud.vertex.client import SUBMIT_LABEL, VertexBackend, VertexJob
from vtrain.cloud.vertex.logs import replica_label, task_name

__all__ = ["SUBMIT_LABEL", "VertexBackend", "VertexJob", "replica_label", "task_name"]
