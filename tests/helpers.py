"""Small helpers for tests that write job files, and the types of the shared fixtures."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vtrain.cloud.vertex.retry import RetryPolicy

if TYPE_CHECKING:
    from tests.trainer.image_helpers import Registry
    from vtrain.emulator import Emulator


#: The retry policy of tests that retry (the `fast_retries` fixture sets it as submit's default).
FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.02)


def planned(config: Any) -> tuple[Any, Any]:
    """(config, its artifacts planned from its files): the two first arguments of the pure request builders,
    `build_request(*planned(config))`, as a command passes them."""
    from vtrain.trainer.artifacts import plan_artifacts

    return config, plan_artifacts(config)


def write_job(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def assert_equals_real_proto(body: dict) -> None:
    """The body parses strictly into CustomJob and MessageToDict gives it back unchanged.

    Key order is compared too, except inside map fields (labels), whose iteration order
    protobuf does not define.
    """
    import json

    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    job = CustomJob()
    json_format.ParseDict(body, job._pb)  # strict: unknown fields raise
    back = json_format.MessageToDict(job._pb)
    assert back == body
    labels = back.pop("labels", None), body.get("labels")
    assert json.dumps(back, indent=2) == json.dumps({k: v for k, v in body.items() if k != "labels"}, indent=2)
    assert labels[0] == labels[1]


class MakeEmulator(Protocol):
    """The `make_emulator` fixture (tests/conftest.py)."""

    def __call__(self, runner: Any = None, *, point_at: str | None = None, **options: Any) -> Emulator: ...


class MakeRegistry(Protocol):
    """The `make_registry` fixture (tests/conftest.py)."""

    def __call__(self, name: str = "registry", *, auth: bool = False,
                 token: tuple[str, Path] | None = None) -> Registry: ...


@dataclass(frozen=True)
class QuickstartRun:
    """The quickstart page's ```bash blocks, run once in `folder` (laid out as a checkout): the `quickstart_run`
    fixture. The job's run is `folder/vtrain-out/quickstart/vtrain-local/latest`."""

    folder: Path
    script: str
    returncode: int
    stdout: str
    stderr: str

    @property
    def output_dir(self) -> Path:
        return self.folder / "vtrain-out" / "quickstart"

    @property
    def run_dir(self) -> Path:
        return self.output_dir / "vtrain-local" / "latest"

    def assert_succeeded(self) -> None:
        assert self.returncode == 0, (f"{self.script}\n--- stdout\n{self.stdout[-3000:]}\n"
                                      f"--- stderr\n{self.stderr[-3000:]}")
