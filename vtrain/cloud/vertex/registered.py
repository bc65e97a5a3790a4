"""A model version a job's model was registered as in Vertex AI Model Registry: :class:`Registered`.

Plain data, below both :mod:`vtrain.cloud.model_registry` (which uploads and finds versions) and the job handle
(:attr:`VertexJob.registered <vtrain.cloud.vertex.client.VertexJob.registered>`, set when
``vtrain.submit(..., wait=True)`` registered the job's model).
"""

from __future__ import annotations

from dataclasses import dataclass

MODEL_CONSOLE = ("https://console.cloud.google.com/vertex-ai/models/locations/{region}/models/{id}/versions/"
                 "{version}?project={project}")  # fmt: skip


@dataclass(frozen=True)
class Registered:
    """A version of a model in Model Registry: ``MODEL@VERSION`` is its :attr:`name`."""

    model: str  # projects/P/locations/R/models/ID
    version_id: str
    uploaded: bool  # False: an earlier upload (a retry, or an identical run) made it
    why: str = ""  # for a version found: what it was found by

    @property
    def name(self) -> str:
        return f"{self.model}@{self.version_id}"

    def console_url(self, project: str) -> str:
        _, _, _, region, _, model_id = self.model.split("/")[:6]
        return MODEL_CONSOLE.format(region=region, id=model_id, version=self.version_id, project=project)
