"""`vtrain.pipelines.launcher_op` compiled: its inputs, outputs and image (the run itself: tests/emulator)."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as types.
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is not installed")

from kfp import dsl  # noqa: E402

from tests.conftest import REPO  # noqa: E402
from tests.pipelines.compiled import compile_to_spec  # noqa: E402
from vtrain.errors import UsageError  # noqa: E402
from vtrain.pipelines import launcher_op  # noqa: E402


def _compiled(tmp_path: Path, job_file: Path, **kwargs: Any) -> dict[str, Any]:
    @dsl.pipeline(name="train")
    def pipeline(lr: float = 0.1) -> None:
        launcher_op(job_file, ["--lr", lr], **kwargs)

    return compile_to_spec(pipeline, tmp_path)


def test_the_step_gets_the_job_file_args_and_recover_and_runs_in_the_image(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    spec = _compiled(tmp_path, Path("configs/quickstart.yaml"), recover=2, image="europe-docker.pkg.dev/p/r/launcher:1")
    (name, task), = spec["root"]["dag"]["tasks"].items()
    given = task["inputs"]["parameters"]
    assert given["job_file"]["runtimeValue"]["constant"] == str(REPO / "configs" / "quickstart.yaml")
    assert given["args"]["runtimeValue"]["constant"] == ["--lr", "{{$.inputs.parameters['pipelinechannel--lr']}}"]
    assert given["recover"]["runtimeValue"]["constant"] == 2
    component = spec["components"][task["componentRef"]["name"]]
    assert set(component["outputDefinitions"]["artifacts"]) == {"model_dir"}  # no `model:` block: no model output
    executor = spec["deploymentSpec"]["executors"][component["executorLabel"]]["container"]
    assert executor["image"] == "europe-docker.pkg.dev/p/r/launcher:1"
    assert "pip install" not in " ".join(executor["command"])  # kfp is in the image: nothing installed at run time


def test_a_model_block_adds_a_google_vertex_model_output(tmp_path: Path) -> None:
    spec = _compiled(tmp_path, REPO / "configs" / "model-registry.yaml")
    (component,) = [c for c in spec["components"].values() if "executorLabel" in c]
    outputs = component["outputDefinitions"]["artifacts"]
    assert outputs["model"]["artifactType"]["schemaTitle"] == "google.VertexModel"
    assert outputs["model_dir"]["artifactType"]["schemaTitle"] == "system.Artifact"


@pytest.mark.parametrize("recover", [-1, True, "2"])
def test_recover_is_a_whole_number(tmp_path: Path, recover: Any) -> None:
    with pytest.raises(UsageError, match="recover must be a whole number of resubmissions"):
        _compiled(tmp_path, REPO / "configs" / "quickstart.yaml", recover=recover)
