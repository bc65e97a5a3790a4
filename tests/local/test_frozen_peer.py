"""Issue 20, class 10: the start-up deadline covers frozen peers, not only those that never came up.

A SIGSTOPped replica's port still accepts connections (the kernel answers for it), so it counted as
up: a chief restarted while a worker was frozen for an hour waited for it forever, as TF's initial
cluster check does. Now a member that stays frozen for `startup_timeout` while a (re)started peer
waits fails the job, naming it; a freeze shorter than that, or one after start-up, does not.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.local.test_local_restarts import restarts, start
from tests.local.test_local_run import assert_clean
from vtrain import proctree


@pytest.mark.alone
def test_frozen_reads_the_process_state() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not proctree.frozen(child.pid)
        child.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not proctree.frozen(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proctree.frozen(child.pid)
        child.send_signal(signal.SIGCONT)
        while proctree.frozen(child.pid) and time.monotonic() < deadline + 5:
            time.sleep(0.01)
        assert not proctree.frozen(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not proctree.frozen(child.pid)  # gone: not frozen


@pytest.mark.slow
def test_a_restarted_chief_waiting_on_a_frozen_worker_fails_the_job(tmp_path: Path, cache: Path) -> None:
    # worker-0 freezes for an hour once every server is up (that alone fails nothing: start-up is over);
    # then the chief crashes and is restarted, and its cluster check would wait for worker-0 forever.
    job, _, notices = start(tmp_path, cache, ["--listen=all", "--sleep=all", "--fail=chief-0", "--fail-after=2",
                                              "--fail-times=1"], faults=("worker-0:stop:1h@1s",), startup_timeout=2.0)
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    assert job.error == ("worker-0 stayed frozen (stopped, e.g. by SIGSTOP: its port accepts, nothing answers) and "
                         "did not answer within 2 s while chief-0, worker-1 waited for it (TF's initial cluster "
                         "check has no timeout)"), job.error
    assert restarts(job) == {"chief-0": 1}  # the chief was restarted; the frozen worker is not "failed"
    assert "SIGSTOP worker-0" in notices.getvalue()
    assert_clean(job)  # the frozen group got SIGCONT with its SIGTERM: nothing is left stopped


@pytest.mark.slow
def test_a_freeze_shorter_than_the_deadline_is_waited_out(tmp_path: Path, cache: Path) -> None:
    job, _, notices = start(tmp_path, cache, ["--listen=all", "--sleep=all", "--seconds=4", "--fail=chief-0",
                                              "--fail-after=1.5", "--fail-times=1"],
                            faults=("worker-0:stop:1.5s@1s",), startup_timeout=4.0, worker_grace=2)
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    assert restarts(job) == {"chief-0": 1}
    assert "SIGCONT worker-0 after 1.5s" in notices.getvalue()
    assert_clean(job)
