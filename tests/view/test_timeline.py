"""The timeline picture (issue 26): marks from a result, drawn as SVG and PNG, read back from both.

The runs that produce real results are in tests/commands/test_watch.py; here the result is an input
shaped as `vtrain local` writes it (two restarts, a retry, a fault, a recovery, a DiLoCo merge)."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from vtrain.cli import cli
from vtrain.view.timeline import draw_run, html, png, result_from_logs, runs, timeline

RESULT: dict[str, Any] = {
    "name": "local-1", "display_name": "demo", "state": "JOB_STATE_FAILED", "seconds": 20.0,
    "replicas": {"chief-0": 1, "worker-0": 0},
    "processes": [
        {"replica": "chief-0", "restart": 0, "start": 0.1, "end": 5.0, "exit": -9},
        {"replica": "chief-0", "restart": 1, "start": 5.5, "end": 20.0, "exit": 1},
        {"replica": "worker-0", "restart": 0, "start": 0.2, "end": None, "exit": None},
    ],
    "steps": {"chief-0": [[1.0, 1], [4.9, 10], [7.0, 6], [19.0, 30]], "worker-0": [[1.0, 1], [19.0, 30]]},
    "faults": [{"spec": "chief-0:kill@5s", "replica": "chief-0", "kind": "kill", "at": 4.95, "at_step": 10}],
    "restarts": {"events": [
        {"replica": "chief-0", "action": "restart", "at": 5.0, "permanent": False, "reason": "exited 137 (SIGKILL)"},
        {"replica": "worker-0", "action": "retry_job", "at": 9.0, "permanent": False, "reason": "exited 3"},
        {"replica": "chief-0", "action": "fail", "at": 20.0, "permanent": True, "reason": "a SyntaxError"},
        {"replica": "chief-0", "action": "chief succeeded", "at": 20.0, "permanent": False, "reason": None},
    ], "recoveries": [{"replica": "chief-0", "at": 7.0, "seconds": 2.0, "resumed_at_step": 6, "steps_redone": 4}]},
    "diloco": {"merges": [{"replica": "worker-0", "at": 12.0, "quorum": "2/2"}]},
}  # fmt: skip
KEYS = sorted(["fault:chief-0:4.95", "restart:chief-0:5", "retry_job:worker-0:9", "failed:chief-0:20",
               "recovery:chief-0:5", "merge:worker-0:12"])  # fmt: skip


def test_marks_come_from_the_result_each_once() -> None:
    line = timeline(RESULT)
    assert sorted(m.key for m in line.marks) == KEYS
    assert line.lanes == ["chief-0", "worker-0"]
    assert line.bars["chief-0"] == [(0.1, 5.0, -9), (5.5, 20.0, 1)] and line.bars["worker-0"] == [(0.2, 20.0, None)]
    recovery = next(m for m in line.marks if m.kind == "recovery")
    assert (recovery.at, recovery.until, recovery.label) == (5.0, 7.0, "2.0 s, 4 step(s) redone")


def test_steps_restart_their_line_with_each_process() -> None:
    line = timeline(RESULT)
    assert runs(line.steps["chief-0"], line.bars["chief-0"]) == [[(1.0, 1), (4.9, 10)], [(7.0, 6), (19.0, 30)]]


@pytest.mark.slow  # matplotlib's first import
def test_html_and_png_draw_every_mark_once(tmp_path: Path) -> None:
    page = html(timeline(RESULT))
    assert sorted(re.findall(r'data-mark="([^"]+)"', page)) == KEYS
    assert page.count("<polyline") == 3 and "<script" not in page and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    drawn = png(timeline(RESULT), tmp_path / "t.png")
    assert sorted(drawn) == KEYS
    data = (tmp_path / "t.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1000, 260)


def test_a_vertex_jobs_lanes_from_its_log_lines() -> None:
    lines = ["2026-01-01T00:00:00.000Z [vertex] job started", "2026-01-01T00:00:01.500Z [chief-0] start",
             "2026-01-01T00:00:02Z [worker-0] up", "2026-01-01T00:00:09.250000Z [chief-0] done", "no timestamp"]
    result = result_from_logs("projects/p/locations/r/customJobs/1", "tiny", "JOB_STATE_SUCCEEDED", lines)
    assert result["seconds"] == 7.75 and list(result["replicas"]) == ["chief-0", "worker-0"]
    assert [(p["replica"], p["start"], p["end"]) for p in result["processes"]] == [("chief-0", 0.0, 7.75),
                                                                                   ("worker-0", 0.5, 0.5)]
    assert timeline(result).marks == []


@pytest.mark.slow  # matplotlib's first import
def test_the_command_redraws_a_run_folder_and_refuses_what_is_none(tmp_path: Path) -> None:
    import json

    run_dir = tmp_path / "out" / "vtrain-local" / "local-1"
    run_dir.mkdir(parents=True)
    (run_dir / "result.json").write_text(json.dumps(RESULT))
    (tmp_path / "out" / "vtrain-local" / "latest").symlink_to("local-1")
    done = CliRunner().invoke(cli, ["timeline", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [str(tmp_path / "out" / "vtrain-local" / "latest" / f"timeline.{ext}")
                                        for ext in ("html", "png")]  # fmt: skip
    assert (run_dir / "timeline.png").exists()
    other = tmp_path / "elsewhere"
    done = CliRunner().invoke(cli, ["timeline", str(run_dir), "--out", str(other)])
    assert done.exit_code == 0 and sorted(p.name for p in other.iterdir()) == ["timeline.html", "timeline.png"]
    done = CliRunner().invoke(cli, ["timeline", str(tmp_path)])
    assert done.exit_code == 2 and done.stderr == (f"error: {tmp_path} is no local run's folder: it has no result.json "
                                                   "(nor vtrain-local/latest/); pass OUTPUT/vtrain-local/JOB_ID, or a "
                                                   "Vertex job ID\n")  # fmt: skip
    done = CliRunner().invoke(cli, ["timeline", "not-a-job"])
    assert done.exit_code == 2 and "'not-a-job' is neither a folder nor a Vertex job ID" in done.stderr
    (run_dir / "result.json").write_text("{")
    done = CliRunner().invoke(cli, ["timeline", str(run_dir)])
    assert done.exit_code == 2 and "Traceback" not in done.output
    assert done.stderr.startswith(f"error: {run_dir / 'result.json'}: unreadable: not JSON at line 1 column 2;")


@pytest.mark.parametrize("bad", ["{}", "[]"])
def test_an_empty_result_draws_an_empty_timeline(tmp_path: Path, bad: str) -> None:
    (tmp_path / "result.json").write_text(bad)
    if bad == "[]":
        done = CliRunner().invoke(cli, ["timeline", str(tmp_path)])
        said = (f"error: {tmp_path / 'result.json'}: unreadable: the document is an array; allowed: an object; "
                "a local run's folder has the result.json `vtrain local` wrote\n")
        assert done.exit_code == 2 and done.stderr == said
        return
    assert [p.name for p in draw_run(tmp_path)] == ["timeline.html", "timeline.png"]
