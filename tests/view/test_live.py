"""Issue 26: watching `vtrain local` — the live view in a real terminal, plain lines elsewhere, the timeline.

Two runs of the probe trainer (no TensorFlow), chief + 2 workers, worker-0 SIGKILLed at step 10:
one in a tmux pane (a real pseudo-terminal: rich draws the live view, the test reads the screen),
one with its output captured (no terminal: plain lines, asserted line by line). The first run's
timeline.png/html are checked against its result.json.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.local.test_local_run import TWO_WORKERS, cli_env, job_file
from vtrain.local.env import Replica
from vtrain.view.live import Watch, live_possible
from vtrain.view.timeline import png, timeline

STEPS = ["--steps=all", "--count=40", "--step-seconds=0.1", "--native-log=all"]
FAULT = ["--fault", "worker-0:kill@step:10"]
ROW = re.compile(r"^(chief-0|worker-0|worker-1)\s+(starting|running|done|stopped|exited \d+(?: \(\w+\))?)\s+"
                 r"(\d+|-)\s+(\S+)\s+(\d+)\s*$")


def expected_marks(result: dict) -> list[str]:
    """Every fault fired, restart and recovery in result.json, as the timeline keys them: each once."""
    marks = [f"fault:{f['replica']}:{f['at']:g}" for f in result["faults"]]
    marks += [f"restart:{e['replica']}:{e['at']:g}" for e in result["restarts"]["events"] if e["action"] == "restart"]
    marks += [f"recovery:{r['replica']}:{r['at'] - r['seconds']:g}" for r in result["restarts"]["recoveries"]]
    return sorted(marks)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a pseudo-terminal")
def test_live_view_in_a_terminal_and_the_timeline_of_that_run(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, STEPS, TWO_WORKERS)
    out = tmp_path / "o"
    env = {**cli_env(cache), "TERM": "xterm-256color"}
    keep = ("PYTHONPATH", "VTRAIN_CACHE_DIR", "TERM", "PATH", "HOME")
    # `env -u CI`: the tmux server inherits this process's environment, CI=true included under .ci/run.
    argv = ["env", "-u", "CI", *(f"{k}={v}" for k, v in env.items() if k in keep),
            sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(out), *FAULT]  # fmt: skip
    socket = f"vtrain-test-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", socket]
    # remain-on-exit: the pane keeps the last screen after vtrain exits (else a capture may miss its final line).
    subprocess.run([*tmux, "start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
                    "new-session", "-d", "-s", "run", "-x", "140", "-y", "40", *argv], check=True, timeout=30)
    seen: dict[str, list[tuple[int | None, int]]] = {}
    screen = ""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            shot = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-t", "run"], capture_output=True, text=True,
                                  timeout=10)  # fmt: skip
            if shot.returncode != 0:  # the pane closed: the command ended
                break
            screen = shot.stdout
            for line in screen.splitlines():
                row = ROW.match(line)
                if row:
                    step = None if row[3] == "-" else int(row[3])
                    seen.setdefault(row[1], []).append((step, int(row[5])))
            if "JOB_STATE_SUCCEEDED in" in screen:
                break
            dead = subprocess.run([*tmux, "display-message", "-p", "-t", "run", "#{pane_dead}"], capture_output=True,
                                  text=True, timeout=10)  # fmt: skip
            if dead.stdout.strip() == "1" and screen == shot.stdout:  # ended, and this screen is its last
                final = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-t", "run"], capture_output=True,
                                       text=True, timeout=10)  # fmt: skip
                screen = final.stdout or screen
                break
            time.sleep(0.2)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=10)
    assert "JOB_STATE_SUCCEEDED in" in screen, screen
    assert set(seen) == {"chief-0", "worker-0", "worker-1"}, screen
    chief = [s for s, _ in seen["chief-0"] if s is not None]
    assert len(set(chief)) >= 2 and chief == sorted(chief), chief  # the step increases, row after row
    counts = [n for _, n in seen["worker-0"]]
    assert counts[0] == 0 and counts[-1] == 1 and counts == sorted(counts), counts  # 0, then 1 after the fault
    assert all(n == 0 for _, n in seen["chief-0"] + seen["worker-1"])
    assert "[worker-0] " not in screen and "cpu_feature_guard" not in screen  # replica output: in the files only
    assert re.search(r"\d+ line\(s\) not shown here, 12 of them TensorFlow C\+\+ logging", screen), screen

    run_dir = (out / "vtrain-local" / "latest").resolve()
    result = json.loads((run_dir / "result.json").read_text())
    assert len(result["faults"]) == 1 and result["restarts"]["restarts"]["worker-0"] == 1
    width, height = png_size(run_dir / "timeline.png")
    assert width >= 600 and height >= 200
    drawn_html = sorted(re.findall(r'data-mark="([^"]+)"', (run_dir / "timeline.html").read_text()))
    assert drawn_html == expected_marks(result)
    assert sorted(png(timeline(result), tmp_path / "again.png")) == expected_marks(result)
    assert sorted(re.findall(r'<text x="8" y="[^"]+">([^<]+)</text>', (run_dir / "timeline.html").read_text())) == [
        "chief-0", "worker-0", "worker-1"]  # one lane per replica


@pytest.mark.slow
def test_plain_output_when_not_a_terminal(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, STEPS, TWO_WORKERS)
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(tmp_path / "o"),
                           *FAULT, "--progress-every", "1s"], env=cli_env(cache), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_dir = (tmp_path / "o" / "vtrain-local" / "latest").resolve()
    # stdout: each replica's Python lines, in its own order; TensorFlow's C++ lines are in its log file only.
    by: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        label, text = re.fullmatch(r"\[(chief-0|worker-0|worker-1)\] (.*)", line).groups()  # type: ignore[union-attr]
        by.setdefault(label, []).append(re.sub(r"pid \d+", "pid N", text))

    def one_run(label: str, restart: int, last: int) -> list[str]:
        return [f"probe {label} starting, pid N", f"{label} restart {restart}, job attempt 1",
                *(f"{label} step {n}" for n in range(1, last + 1))]  # fmt: skip

    for label in ("chief-0", "worker-1"):
        assert by[label] == [*one_run(label, 0, 40), f"probe {label} done"]
    first = by["worker-0"][: by["worker-0"].index("probe worker-0 starting, pid N", 1)]
    killed = max(int(t.rsplit(" ", 1)[1]) for t in first if " step " in t)
    assert 10 <= killed <= 15  # the probe prints a step's line before it reports the step the kill waits for
    assert by["worker-0"] == [*one_run("worker-0", 0, killed), *one_run("worker-0", 1, 40), "probe worker-0 done"]
    assert "cpu_feature_guard" in (run_dir / "worker-0.log").read_text() and "cpu_feature_guard" not in done.stdout
    # stderr: vtrain's lines, in this order; progress lines (when something changed) between the start and the end.
    lines = done.stderr.splitlines()
    progress = [x for x in lines if x.startswith("[vtrain] progress ")]
    story = [x for x in lines if not x.startswith("[vtrain] progress ")]
    expected = [
        r"\[vtrain\] runtime: host: VTRAIN_RUNTIME=host: this machine's Python and TensorFlow, not the image's",
        r"\[vtrain\] environment \S+ \((cached|installed) in [\d.]+ s\)",
        *([r"\[vtrain\] the job's image has TensorFlow .*"] if "the job's image has" in done.stderr else []),
        r"\[vtrain\] job local-test \(local-[\w-]+\): chief-0, worker-0, worker-1; outputs in .*, logs in .*",
        r"\[vtrain\] fault worker-0:kill@step:10: SIGKILL worker-0 at step \d+",
        r"\[vtrain\] worker-0 exited 137 \(SIGKILL\); restarting 1/5",
        r"\[vtrain\] restarts: worker-0 1 \(attempt 1 of the job\)",
        r"\[vtrain\] worker-0 resumed at step 1 [\d.]+ s after it failed, \d+ step\(s\) redone",
        rf"\[vtrain\] full logs in {re.escape(str(run_dir))}: chief-0.log, worker-0.log, worker-1.log, job.log; "
        r"12 line\(s\) not shown here, 12 of them TensorFlow C\+\+ logging \(--verbose streams them\); "
        r"timeline: timeline.html, timeline.png",
        r"\[vtrain\] local-test \(local-[\w-]+\) JOB_STATE_SUCCEEDED in [\d.]+ s; outputs in .*",
    ]
    assert len(story) == len(expected), done.stderr
    for line, pattern in zip(story, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert progress, done.stderr
    state = r"(starting|running|done|stopped|exited 137 \(SIGKILL\))"
    row = rf"(chief-0|worker-0|worker-1) {state}( step \d+( \([\d.]+/s\))?)?(, 1 restart)?"
    for line in progress:
        assert re.fullmatch(rf"\[vtrain\] progress \d+:\d\d: {row}(; {row}){{2}}", line), line
    assert lines.index(progress[0]) > 2 and lines.index(progress[-1]) < len(lines) - 4
    assert any("worker-0 running step" in x and "1 restart" in x for x in progress), progress


@pytest.mark.slow
def test_follow_streams_one_replica_whole_and_checks_its_name(tmp_path: Path, cache: Path) -> None:
    path = job_file(tmp_path, ["--native-log=all"], TWO_WORKERS)
    done = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--output-dir", str(tmp_path / "o"),
                           "--follow", "worker-1"], env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "[worker-1] I0000 00:00:" in done.stdout and "[chief-0] I0000" not in done.stdout  # its C++ lines too
    assert "[chief-0] probe chief-0 done" in done.stdout  # the others still show their Python lines
    bad = subprocess.run([sys.executable, "-m", "vtrain", "local", str(path), "--follow", "worker-7"],
                         env=cli_env(cache), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr == ("error: --follow worker-7: this job has no replica worker-7; it has "
                                                  "chief-0, worker-0, worker-1\n"), bad.stderr


CHIEF, WORKER = Replica(0, 0), Replica(1, 1)
CPP = "I0000 00:00:1796165869.336992   13361 port.cc:153] oneDNN custom operations are on."


def lines_of(view: Watch, logs: io.StringIO) -> list[str]:
    for replica, text in ((CHIEF, "Epoch 1/2"), (CHIEF, CPP), (WORKER, "loss 0.1"), (WORKER, CPP)):
        view.on_line(replica, text, "stderr")
    return logs.getvalue().splitlines()


def test_plain_shows_python_lines_and_counts_the_cpp_ones() -> None:
    logs, err = io.StringIO(), io.StringIO()
    view = Watch(live=False, logs=logs, err=err)
    assert lines_of(view, logs) == ["[chief-0] Epoch 1/2", "[worker-1] loss 0.1"]
    assert (view.hidden, view.native) == (2, 2)
    view.notices.write("[vtrain] one\n[vtrain] tw")
    view.notices.write("o\n")
    assert err.getvalue() == "[vtrain] one\n[vtrain] two\n"


def test_follow_and_verbose_stream_everything_of_theirs() -> None:
    logs = io.StringIO()
    view = Watch(live=False, logs=logs, follow=["worker-1"], err=io.StringIO())
    assert lines_of(view, logs) == ["[chief-0] Epoch 1/2", "[worker-1] loss 0.1", f"[worker-1] {CPP}"]
    logs = io.StringIO()
    view = Watch(live=False, logs=logs, verbose=True, err=io.StringIO())
    assert len(lines_of(view, logs)) == 4 and view.hidden == 0


def test_live_keeps_replica_lines_out_of_the_terminal_unless_followed() -> None:
    logs, err = io.StringIO(), io.StringIO()
    view = Watch(live=True, logs=logs, follow=["chief-0"], err=err)
    lines_of(view, logs)
    assert logs.getvalue() == "" and (view.hidden, view.native) == (2, 1)
    assert err.getvalue().splitlines() == ["[chief-0] Epoch 1/2", f"[chief-0] {CPP}"]  # above the table, on stderr


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "tty", "live"), [
    ({"TERM": "xterm"}, True, True), ({"TERM": "xterm"}, False, False), ({"TERM": "dumb"}, True, False),
    ({"TERM": "xterm", "CI": "true"}, True, False), ({}, True, True),
])  # fmt: skip
def test_live_only_on_a_terminal_a_person_watches(env: dict[str, str], tty: bool, live: bool) -> None:
    assert live_possible(Tty() if tty else io.StringIO(), env) is live


class _Job:
    """A job's rows (three replicas) for the view, without a job."""

    def progress(self) -> dict:
        return {"name": "quickstart-keras", "state": "JOB_STATE_RUNNING", "seconds": 12.0,
                "replicas": [{"replica": label, "state": "running", "step": 120, "rate": 9.5, "restarts": 0}
                             for label in ("chief-0", "worker-0", "worker-1")]}  # fmt: skip


def test_a_terminal_too_narrow_for_the_table_gets_plain_lines() -> None:
    logs, err = io.StringIO(), io.StringIO()
    view = Watch(live=True, logs=logs, err=err, width=20, progress_every=30.0)
    assert view.watch(_Job(), lambda: "JOB_STATE_SUCCEEDED", last_line=True) == "JOB_STATE_SUCCEEDED"
    assert not view.live  # no table drawn, wrapped cell by cell into 20 columns
    lines = err.getvalue().splitlines()
    assert lines[0] == "[vtrain] the terminal is too narrow for the live view: progress lines every 30 s instead"
    assert lines[1:] == ["[vtrain] progress 0:12: chief-0 running step 120 (9.5/s); worker-0 running step 120 "
                         "(9.5/s); worker-1 running step 120 (9.5/s)"]  # fmt: skip
    view.on_line(CHIEF, "Epoch 1/2", "stdout")  # as off a terminal: the replicas' Python lines are shown
    assert logs.getvalue() == "[chief-0] Epoch 1/2\n"

    wide = io.StringIO()
    view = Watch(live=True, logs=io.StringIO(), err=wide, width=100)
    view.watch(_Job(), lambda: "JOB_STATE_SUCCEEDED")
    assert view.live and re.search(r"^worker-1\s+running\s+120\s+9\.5/s\s+0$", wide.getvalue(), re.M)


def test_the_view_turns_plain_when_the_terminal_is_narrowed() -> None:
    err = io.StringIO()
    view = Watch(live=True, logs=io.StringIO(), err=err, width=100)

    def narrowed() -> str:
        view._console.width = 20  # the user drags the window narrower while the job runs
        for _ in range(200):  # the view's thread sees it at its next redraw (once a second)
            if not view.live:
                break
            time.sleep(0.05)
        return "JOB_STATE_SUCCEEDED"

    view.watch(_Job(), narrowed)
    assert not view.live
    assert "[vtrain] the terminal is too narrow for the live view" in err.getvalue()
