"""The Pipelines guide's pipelines (its opening one-step example, the train → evaluate → register one) compile as
written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

GUIDE = REPO / "docs" / "guides" / "pipelines.md"


def test_the_guides_three_step_pipeline_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
    pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is missing")
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    first, three_steps = [b for b in blocks if "@dsl.pipeline" in b]  # the page's opening example, then the pipeline
    job = (REPO / "configs" / "quickstart.yaml").read_text(encoding="utf-8")
    (tmp_path / "job.yaml").write_text(job.replace("../trainer_templates/keras",
                                                   str(REPO / "trainer_templates" / "keras")), encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    def compiled(snippet: str) -> dict[str, Any]:
        # run as a script file of its own (kfp reads a component's source back through inspect); no future flags
        script = tmp_path / f"guide_{abs(hash(snippet))}.py"
        script.write_text(snippet, encoding="utf-8")
        exec(compile(snippet, str(script), "exec", dont_inherit=True), {"__name__": "guide"})
        return dict(yaml.safe_load((tmp_path / "pipeline.yaml").read_text(encoding="utf-8")))

    assert set(compiled(first)["root"]["dag"]["tasks"]) == {"vtrain-launcher"}
    spec = compiled(three_steps)
    tasks = spec["root"]["dag"]["tasks"]
    assert {"vtrain-launcher", "evaluate"} <= set(tasks)
    upload = [c for c in spec["components"] if c.startswith("comp-condition")]
    assert upload, "the register step runs under the evaluation's condition"
    args = tasks["vtrain-launcher"]["inputs"]["parameters"]["args"]["runtimeValue"]["constant"]
    assert args == ["--learning-rate", "{{$.inputs.parameters['pipelinechannel--learning_rate']}}"]
