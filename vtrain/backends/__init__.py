"""Where jobs run: Vertex AI (`vertex`) or this machine (`local`), behind one handle (`handle`).

Importing this package is cheap; `vertex` pulls in google-cloud-aiplatform only when used.

    from vtrain.backends.vertex import VertexBackend
    backend = VertexBackend.from_endpoint(project, region)   # or VertexBackend(client=..., ...)
    job = backend.create(custom_job)                          # -> VertexJob (a JobHandle)
    job.wait(); job.exit_code
"""

from vtrain.backends.handle import (
    EXIT_CODES,
    TERMINAL_STATES,
    JobHandle,
    WaitTimeout,
    exit_code,
    raise_for_state,
)

__all__ = ["EXIT_CODES", "TERMINAL_STATES", "JobHandle", "WaitTimeout", "exit_code", "raise_for_state"]
