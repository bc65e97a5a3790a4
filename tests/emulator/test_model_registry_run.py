"""Acceptance of issue 31 item 2: the keras template with a `model:` block, submitted with --wait to the
emulator running real processes (--run-jobs), ends with one model in Model Registry whose artifactUri is
the job's model dir, read back with the high-level SDK (`aiplatform.Model.list()` over REST); a second
identical submit makes no second version."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.emulator.test_emulated_run import PROJECT, emu, run  # noqa: F401 - emu is a fixture
from tests.helpers import write_job
from vtrain.emulator import Emulator

KERAS = REPO / "trainer_templates" / "keras"
MODEL_RE = r"^model (?:registered|not uploaded again): (projects/\d+/locations/us-central1/models/\d+)@(\d+)"


@pytest.mark.slow
def test_a_keras_job_with_a_model_block_ends_with_one_registered_model(tmp_path: Path, emu: Emulator) -> None:  # noqa: F811
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    job = write_job(tmp_path, f"""
        name: keras-model
        region: us-central1
        staging_bucket: gs://stage-bkt/s
        base_output_dir: gs://stage-bkt/out
        trainer:
          package: {KERAS}
          module: trainer.task
          image: tf-cpu.2-17
          args: [--epochs=1, --steps-per-epoch=2, --batch-size=8]
        cluster:
          chief: {{machine_type: n1-standard-4}}
        model: {{display_name: keras-classifier, serving_image: tf2-cpu.2-15, version_aliases: [candidate]}}
        """)
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 0, err
    first = re.search(MODEL_RE, out, re.M)
    assert first is not None and out[first.start():].startswith("model registered: "), out
    job_id = re.search(r"customJobs/(\d+)", out).group(1)  # type: ignore[union-attr]
    saved = tmp_path / "runs" / job_id / "model" / "saved_model.pb"
    assert saved.is_file()  # the trainer really exported a SavedModel where AIP_MODEL_DIR pointed

    code, again, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 0, err
    second = re.search(MODEL_RE, again, re.M)
    assert second is not None and again[second.start():].startswith("model not uploaded again: "), again
    assert second.groups() == first.groups()

    aiplatform.init(project=PROJECT, location="us-central1", api_transport="rest", api_endpoint=emu.url,
                    credentials=AnonymousCredentials())
    models = aiplatform.Model.list()
    assert [m.resource_name for m in models] == [first.group(1)]
    model = models[0]
    assert model.uri == "gs://stage-bkt/out/model/"  # the job's AIP_MODEL_DIR (base_output_dir/model/)
    assert model.display_name == "keras-classifier" and model.labels["vtrain-job-id"] == job_id
    assert model.container_spec.image_uri == "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
    versions = aiplatform.ModelRegistry(model.resource_name).list_versions()
    assert [v.version_id for v in versions] == ["1"] and sorted(versions[0].version_aliases) == ["candidate",
                                                                                               "default"]
    code, status, _ = run("status", job_id, "--api-endpoint", emu.url)
    assert code == 0 and f"model          {first.group(1)}@1\n" in status
