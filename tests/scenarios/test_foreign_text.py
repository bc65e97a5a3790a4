"""Issue 30, class 1: one hostile line through every path that prints what others wrote.

The same line (an OSC that retitles the terminal, a CSI that clears it, a carriage return that
forges a `[vtrain] progress` line over the replica's prefix, a bidi override, a C1 CSI) comes from
a real trainer process (`vtrain local --follow`, plain output, the failure report, job.log, the SDK's
logs), from Cloud Logging entries and a job's error in the Vertex emulator (`vtrain logs`, `submit
--stream-logs`, `status`, `status --watch`, `list`), from a trial's error (the trial table) and from
the rows of the live view. No ESC, BEL or CR byte of it may reach stdout or stderr; what it said is
shown escaped.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from vtrain.cli import cli
from vtrain.emulator import Emulator
from vtrain.emulator.runner import RunContext, RunResult

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[H\r[vtrain] progress 9:99: forged \u202egnp.exe \x9b31m"
#: How it must look once shown: every control and format character escaped, on one line.
SHOWN = r"\x1b]0;pwned\x07\x1b[2J\x1b[H\r[vtrain] progress 9:99: forged \u202egnp.exe \x9b31m"
HOSTILE_TRAINER = REPO / "tests" / "data" / "trainers" / "hostile"
PROJECT = "test-project"


def assert_clean(*outputs: str) -> None:
    """No byte of the hostile line that a terminal obeys, and no line that passes for vtrain's own."""
    for text in outputs:
        for bad in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
            assert bad not in text, (bad, text)
        assert not re.search(r"^\[vtrain\] progress 9:99", text, re.M), text


# ---- Vertex answers: log entries, a job's error, an odd task name ---------------------------------
def hostile_runner(job: Any, ctx: RunContext) -> RunResult:
    ctx.log(HOSTILE)
    ctx.log(f"line one\n[vtrain] second line {HOSTILE}", task="workerpool1-0")  # one entry, two lines
    ctx.log("from a task Vertex never names", task="\x1b[31mworkerpool9-0\r")
    ctx.sleep(0.1)
    return RunResult("JOB_STATE_FAILED", f"{HOSTILE}\nsecond line {HOSTILE}")


pytestmark = pytest.mark.emulator(runner=hostile_runner, point_at=PROJECT)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_vertex_log_entries_and_errors_are_shown_escaped(tmp_path: Path, emu: Emulator) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: hostile\nregion: us-central1\ntrainer:\n  container:\n    image_uri: "
                   "us-docker.pkg.dev/p/r/t:1\ncluster:\n  chief: {machine_type: n1-standard-4}\n"
                   "  workers: {replicas: 1}\n", encoding="utf-8")  # fmt: skip
    code, out, err = run("submit", str(job), "--stream-logs", "--poll", "0.05")
    assert code == 10, err
    assert_clean(out, err)
    assert f"[chief-0] {SHOWN}\n[worker-0] line one\n[worker-0] [vtrain] second line {SHOWN}\n" in out
    assert "[\\x1b[31mworkerpool9-0\\r] from a task Vertex never names" in out
    assert re.search(rf"^error: job \S+ ended JOB_STATE_FAILED: {re.escape(SHOWN)}\nerror: second line ", err, re.M)
    [created] = emu.jobs()
    job_id = created.name.rsplit("/", 1)[1]

    code, out, err = run("logs", job_id, "--timestamps")
    assert code == 0 and out.count(SHOWN) == 2, out
    assert_clean(out, err)
    assert re.search(r"^\S+Z \[worker-0\] \[vtrain\] second line ", out, re.M)  # the prefix on every line
    for args in (("status", job_id), ("status", job_id, "--watch", "--plain", "--poll", "0.05"), ("list",)):
        code, out, err = run(*args)
        assert code in (0, 10), err
        assert_clean(out, err)
    code, out, _ = run("status", job_id)
    # a second line of the error continues under the first, indented past the labels: it cannot pass for a row
    assert re.search(rf"^error\s+{re.escape(SHOWN)}\n {{8,}}second line ", out, re.M), out


# ---- the live view and the trial table -------------------------------------------------------------
class _Rows:
    def progress(self) -> dict[str, Any]:
        return {"name": HOSTILE, "state": HOSTILE, "seconds": 1.0,
                "replicas": [{"replica": HOSTILE, "state": HOSTILE, "step": 3, "rate": None, "restarts": 0}]}


def test_the_live_view_and_its_lines_are_escaped() -> None:
    from vtrain.local.env import Replica
    from vtrain.view.live import Watch

    logs, err = io.StringIO(), io.StringIO()
    view = Watch(live=True, logs=logs, follow=["chief-0"], err=err, width=400)
    view.watch(_Rows(), lambda: "JOB_STATE_SUCCEEDED")
    view.on_line(Replica(0, 0), HOSTILE, "stdout")
    view.echo(f"[chief-0] one\n{HOSTILE}")
    drawn = err.getvalue()  # not a terminal: rich draws the table without cursor moves of its own
    assert_clean(drawn, logs.getvalue())
    assert f"[chief-0] {SHOWN}" in drawn

    plain = io.StringIO()
    view = Watch(live=False, logs=plain, err=plain)
    view.on_line(Replica(0, 0), HOSTILE, "stdout")
    view.notices.write(f"[vtrain] {HOSTILE}\n")
    assert_clean(plain.getvalue())
    assert plain.getvalue().splitlines() == [f"[chief-0] {SHOWN}", f"[vtrain] {SHOWN}"]


def test_a_trial_table_quotes_a_trainer_escaped() -> None:
    from vtrain.tuning.table import TrialRow, format_table

    lines = format_table([TrialRow("1", "INFEASIBLE", {"lr": "0.1"}, None, None, HOSTILE)], "loss")
    assert_clean(*lines)
    assert lines[1].endswith(SHOWN)


def test_an_error_cannot_start_a_line_of_its_own_with_a_carriage_return() -> None:
    from vtrain.errors import BackendError

    out = io.StringIO()
    BackendError(f"registry said: {HOSTILE}\u2028[vtrain] done").show(out)
    assert out.getvalue() == f"error: registry said: {SHOWN}\\u2028[vtrain] done\n"


# ---- a real trainer process ----------------------------------------------------------------------
def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(f"name: hostile\ntrainer:\n  package: {HOSTILE_TRAINER}\n  module: trainer.task\n"
                    "cluster:\n  chief: {machine_type: n1-standard-4}\n", encoding="utf-8")  # fmt: skip
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", [["--follow", "chief-0"], ["--plain"], ["-o", "json"]])
def test_a_trainer_cannot_drive_the_terminal_of_vtrain_local(tmp_path: Path, mode: list[str],
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.getbasetemp() / "hostile-cache"
    env = {**os.environ, "PYTHONPATH": str(REPO), "VTRAIN_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(job_file(tmp_path)), "--output-dir",
                           str(tmp_path / "o"), *mode], env=env, capture_output=True, timeout=300)  # fmt: skip
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 10, err
    assert_clean(out, err)
    streamed = err if mode[0] == "-o" else out
    assert f"[chief-0] hostile {SHOWN}" in streamed  # the replica's lines, its prefix intact
    # The failure report: the headline quotes the error, the last lines are shown as they were.
    assert "error: job hostile (local-" in err and f"a module cannot be imported (ImportError: {SHOWN})" in err
    assert re.search(r"^error: last lines of chief-0 \(full log: .*chief-0\.log\):$", err, re.M), err
    assert f"error:   | hostile {SHOWN}" in err
    run_dir = (tmp_path / "o" / "vtrain-local" / "latest").resolve()
    assert b"hostile \x1b]0;pwned\x07" in (run_dir / "chief-0.log").read_bytes()  # the replica's own log: as written
    assert "\x1b" not in (run_dir / "job.log").read_text(encoding="utf-8")  # vtrain's composed log: escaped
    result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    assert_clean(result["error"])


def test_the_diloco_syncer_names_its_peers_escaped() -> None:
    import logging

    from vtrain.diloco.__main__ import PrintableFormatter
    from vtrain.diloco.syncer import summary_line

    record = logging.LogRecord("vtrain.diloco", logging.INFO, __file__, 1, "vtrain.diloco: %s registered", (HOSTILE,),
                               None)  # fmt: skip
    line = PrintableFormatter("%(message)s").format(record)
    assert line == f"vtrain.diloco: {SHOWN} registered"
    stats = {"rounds": [3], "merges": 3, "stale_merged": 0, "stale_dropped": 0, "grace_skipped": 0, "max_stall": 0.0,
             "rejected": 0, "learners": {HOSTILE: 3}}  # fmt: skip
    assert_clean(summary_line(stats))
