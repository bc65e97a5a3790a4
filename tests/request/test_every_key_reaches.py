"""Guard of issue 19: every key of the job file changes the request vtrain sends, unless its node says
why not (`vtrain_only=`). A builder line dropped, or a key added to the schema and never read, fails here.
Tuning keys change the HyperparameterTuningJob body (its studySpec), every other key the CustomJob body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import assert_equals_real_proto, planned
from tests.jobfile.declared import baseline, build, candidates, dotted, leaves, node_at, put, write_trainer
from vtrain.request.build import build_request
from vtrain.request.custom_job import PLAIN_FIELDS, build_job_dict


def _body(data: dict[str, Any], root: Path) -> str:
    return json.dumps(build_request(*planned(build(data, root))).body, sort_keys=True)


@pytest.mark.parametrize("path", leaves(), ids=dotted)
def test_every_key_changes_the_request_or_says_why_not(tmp_path: Path, path: tuple[Any, ...]) -> None:
    write_trainer(tmp_path)
    node = node_at(path)
    data = baseline(path)
    values = candidates(path, data)
    before = _body(data, tmp_path)
    changed = []
    for value in values:
        variant = json.loads(json.dumps(data))
        put(variant, path, value)
        changed.append(_body(variant, tmp_path) != before)
    if node.vtrain_only:
        assert not any(changed), f"{dotted(path)} is declared vtrain-only ({node.vtrain_only}) yet changes the body"
        return
    assert values, f"{dotted(path)}: give its node examples= (a valid value other than the default)"
    assert any(changed), (
        f"setting {dotted(path)} to any of {values} leaves the request unchanged: the builder drops it "
        "(a plain field without rest= on its node?), or declare vtrain_only= on its node with the reason"
    )


def test_plain_fields_keep_the_protos_field_order() -> None:
    """Every row set at once: the body is what MessageToDict writes, key order included."""
    config = build(baseline(()), Path.cwd())
    values = {"reserved_ip_ranges": ("r",), "labels": {"team": "ml"}, "enable_web_access": True,
              "enable_dashboard_access": True, "base_output_dir": "gs://guard-bucket/out"}
    from dataclasses import replace

    config = replace(config, **{a: values.get(a, f"projects/p/{a}") for a, _ in PLAIN_FIELDS})
    body = build_job_dict(*planned(config))
    assert_equals_real_proto(body)
    assert [p for _, p in PLAIN_FIELDS if p.startswith("jobSpec.")] == [
        f"jobSpec.{k}" + (".outputUriPrefix" if k == "baseOutputDirectory" else "")
        for k in body["jobSpec"] if k not in ("workerPoolSpecs", "scheduling")
    ]
