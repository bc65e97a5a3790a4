"""Guard of issue 19: every default the JSON Schema shows is what the job config builds when the key is
left out, so the editor's hint and vtrain's behaviour are one fact. Defaults that Vertex applies
(`vertex_default=`: vtrain sends nothing) are left to Vertex and only shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.jobfile.declared import baseline, build, dotted, leaves, node_at, put
from vtrain.constants import DILOCO_DEFAULTS
from vtrain.jobfile.json_schema import job_schema

WITH_DEFAULT = [p for p in leaves() if node_at(p).default is not None]


def _shown(path: tuple[Any, ...]) -> dict[str, Any]:
    """The JSON Schema of one key, as `vtrain schema` prints it."""
    node: dict[str, Any] = job_schema()
    for part in path:
        node = node["properties"][part]
    return node


def test_defaults_are_declared() -> None:
    """Not vacuous: the diloco knobs, pools and scheduling switches all carry one."""
    assert {"region", "cluster.chief.replicas", "reservation.affinity", "diloco.inner_steps"} <= set(
        map(dotted, WITH_DEFAULT))


@pytest.mark.parametrize("path", WITH_DEFAULT, ids=dotted)
def test_every_schema_default_is_what_the_model_builds_without_the_key(tmp_path: Path, path: tuple[Any, ...]) -> None:
    node = node_at(path)
    assert _shown(path)["default"] == node.default
    if node.vertex_default:
        pytest.skip(f"{dotted(path)}: Vertex's default; vtrain sends nothing when the key is left out")
    without = baseline(path, without=True)
    written = baseline(path, without=True)
    put(written, path, node.default)
    assert build(without, tmp_path) == build(written, tmp_path), (
        f"the JSON Schema says {dotted(path)} defaults to {node.default!r}, but the model builds something else "
        "without it: fix the node's default= (or the model)"
    )


def test_reservation_affinity_defaults_to_what_the_model_builds(tmp_path: Path) -> None:
    """It said `none` while the model built `any` (or `specific` with a name)."""
    assert _shown(("reservation", "affinity"))["default"] == "any"
    assert build(baseline(("reservation", "affinity"), without=True), tmp_path).reservation.affinity == "any"
    named = baseline(("reservation", "name"))
    put(named, ("reservation", "name"), "projects/p/zones/z/reservations/r")
    assert build(named, tmp_path).reservation.affinity == "specific"


def test_the_json_schema_shows_every_diloco_default() -> None:
    """It showed none; each now comes from DILOCO_DEFAULTS (min_quorum has none: every learner alive)."""
    for name, value in DILOCO_DEFAULTS.items():
        shown = _shown(("diloco", name))
        if value is None:
            assert "default" not in shown, name
        else:
            assert shown["default"] == value, name
