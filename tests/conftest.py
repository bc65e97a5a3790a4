"""Fixtures every folder shares (a folder's own live in its conftest.py). No test may read the developer's
Google Cloud or vtrain setup.

- `make_emulator(runner, point_at=PROJECT, **options)` starts a `vtrain.emulator.Emulator` on a free port and
  stops it at teardown; `emu` is the one most tests use, its arguments set by an `emulator` mark.
- `make_registry(auth=..., token=...)` starts a real docker-registry on a free port and stops it at teardown;
  `registry` and `auth_registry` are the two most tests use.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.helpers import MakeEmulator, MakeRegistry, QuickstartRun
    from tests.trainer.image_helpers import Registry
    from vtrain.emulator import Emulator

REPO = Path(__file__).resolve().parents[1]
_PREFIXES = ("GOOGLE_", "CLOUDSDK_", "VTRAIN_", "TF_CONFIG", "CLUSTER_SPEC", "AIP_", "STORAGE_EMULATOR_HOST")


@pytest.fixture(autouse=True, scope="session")
def _host_runtime() -> Iterator[None]:
    """The suite's default runtime (see _clean_environment) for what runs outside a test too: a module or session
    fixture runs before the function-scoped fixture below sets it (the Horovod runs, the DTensor run)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VTRAIN_RUNTIME", "host")
        yield


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    # vtrain's state (records of creates whose answer was lost) stays inside each test.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    # vtrain's cache is the run's (never ~/.cache): what one test built (a trainer sdist, an environment) the
    # next reuses, as a person's second command does. A test about the cache itself sets its own.
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))
    # A prebuilt-image job rehearses on the image's stack by default (vtrain.local.runtimes): each TensorFlow
    # version a ~230 MB download and its own processes' first imports. The suite's jobs run on this machine's
    # TensorFlow unless a test opts in (monkeypatch.delenv, or --runtime stack); those few share one stack per
    # TensorFlow version through the run's cache: tf-cpu.2-15 (the Estimator row), tf-cpu.2-17 (the quickstart).
    monkeypatch.setenv("VTRAIN_RUNTIME", "host")
    # The high-level SDK's experiment tracker is module state: a TensorBoard one test gave `aiplatform.init`
    # would make the next test's `init` on that worker call google.auth.default() (metadata.py
    # _get_global_tensorboard), which a machine without credentials lacks. Cleared unless nothing imported it.
    import sys

    metadata = sys.modules.get("google.cloud.aiplatform.metadata.metadata")
    if metadata is not None:
        tracker = metadata._experiment_tracker
        tracker.reset()
        tracker._global_tensorboard = None


@pytest.fixture
def repo() -> Path:
    return REPO


pytest_plugins = ["tests.gcs_emulator"]

QUICKSTART_PAGE = REPO / "docs" / "guides" / "quickstart.md"


def page_blocks(page: Path, language: str) -> list[str]:
    """The fenced ```language blocks of a docs page, in order."""
    import re

    return re.findall(rf"^```{language}\n(.*?)^```$", page.read_text(encoding="utf-8"), flags=re.S | re.M)


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tests.helpers.run_cache`: one `vtrain local` (and emulated run) environment cache for the whole run,
    both xdist workers included. A test that damages a cache or asserts what one installs makes its own. (It
    shadows pytest's own `cache` fixture, which no test uses.)"""
    from tests.helpers import run_cache

    return run_cache(tmp_path_factory)


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory: pytest.TempPathFactory) -> QuickstartRun:
    """The quickstart page's ```bash blocks, in order, in one shell (as in a person's terminal), in a folder laid
    out as a checkout: the keras template trained by a chief and two workers, real TensorFlow processes. Run
    once for the whole test run: the tests that read what it made (the page, --from-run, multi-worker
    training) share it; under pytest-xdist the first worker to ask runs it and the other waits for it, by a
    lock in the run's common temporary folder. Its environment is as clean as a test's."""
    import json
    import subprocess
    import sys

    from tests.helpers import QuickstartRun, once

    if not (Path(sys.prefix) / "bin" / "vtrain").is_file():
        pytest.skip(f"the page runs `source .venv/bin/activate` then `vtrain`: {sys.prefix} has no vtrain script")
    script = "\n".join(page_blocks(QUICKSTART_PAGE, "bash"))

    def run(folder: Path) -> None:
        for name in ("configs", "trainer_templates"):
            (folder / name).symlink_to(REPO / name)
        (folder / ".venv").symlink_to(sys.prefix)
        env = {k: v for k, v in os.environ.items() if not k.startswith(_PREFIXES)}
        env.update(VTRAIN_CACHE_DIR=str(folder / "cache"), XDG_STATE_HOME=str(folder / "xdg-state"))
        ran = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=folder, env=env,
                             capture_output=True, text=True, timeout=900)
        (folder / "ran.json").write_text(json.dumps({"returncode": ran.returncode, "stdout": ran.stdout,
                                                     "stderr": ran.stderr}))

    folder = once(tmp_path_factory, "quickstart", run)
    result = json.loads((folder / "ran.json").read_text())
    return QuickstartRun(folder=folder, script=script, **result)

#: What `emu` passes to the emulator unless an `emulator` mark says otherwise: jobs leave PENDING and
#: CANCELLING after 0.05 s (the emulator's own defaults, 0.5 s and 0.2 s, are for people watching).
EMU_DEFAULTS: dict[str, Any] = {"pending_seconds": 0.05, "cancel_seconds": 0.05}


@pytest.fixture
def make_emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeEmulator]:
    """Start emulators; each is stopped at teardown. `runner` and `options` go to `Emulator(...)` (its own
    defaults, not EMU_DEFAULTS); `point_at=PROJECT` also sets VTRAIN_API_ENDPOINT, VTRAIN_PROJECT and
    VTRAIN_REGION=us-central1, so the CLI and the SDK reach it (and no test asks gcloud), and VTRAIN_POLL=0.1, so
    what follows a job there (`submit --wait`, a pipeline step) asks at the emulator's pace."""
    from vtrain.emulator import Emulator

    with contextlib.ExitStack() as stack:

        def make(runner: Any = None, *, point_at: str | None = None, **options: Any) -> Emulator:
            emulator = stack.enter_context(Emulator(runner=runner, **options))
            if point_at is not None:
                monkeypatch.setenv("VTRAIN_API_ENDPOINT", emulator.url)
                monkeypatch.setenv("VTRAIN_PROJECT", point_at)
                monkeypatch.setenv("VTRAIN_REGION", "us-central1")
                monkeypatch.setenv("VTRAIN_POLL", "0.1")  # the emulator's pace, not Vertex's 10 s default
            return emulator

        yield make


@pytest.fixture
def emu(make_emulator: MakeEmulator, request: pytest.FixtureRequest) -> Emulator:
    """An emulator for this test: `make_emulator(**EMU_DEFAULTS | kwargs)` of the closest
    `@pytest.mark.emulator(runner=..., **options)` (a module sets its own with `pytestmark`). Keywords only:
    a mark given one function as its only argument would decorate it instead."""
    mark = request.node.get_closest_marker("emulator")
    return make_emulator(**{**EMU_DEFAULTS, **(mark.kwargs if mark is not None else {})})


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Submits retry 4 times 10-20 ms apart (tests.helpers.FAST_RETRY), so a retried answer costs milliseconds."""
    import importlib

    from tests.helpers import FAST_RETRY

    monkeypatch.setattr(importlib.import_module("vtrain.cloud.submit"), "DEFAULT_RETRY", FAST_RETRY)


@pytest.fixture
def bucket(gcs: Any) -> Any:
    """The staging bucket gs://stage-bkt on gcp-storage-emulator."""
    gcs.create_bucket("stage-bkt")
    return gcs


@pytest.fixture
def make_registry(tmp_path: Path) -> Iterator[MakeRegistry]:
    """Start docker-registry processes (the CNCF distribution registry) on free loopback ports, each under
    its own folder of tmp_path; each is stopped at teardown (also if the test stopped it). `auth`: htpasswd
    basic auth; `token`: (realm, rootcertbundle) of a token service. Skips where docker-registry is missing."""
    from tests.trainer.image_helpers import REGISTRY_BIN, start_registry, stop_registry

    if REGISTRY_BIN is None:
        pytest.skip("docker-registry is not installed: apt-get install docker-registry (.ci/run does)")
    started: list[Registry] = []

    def make(name: str = "registry", *, auth: bool = False, token: tuple[str, Path] | None = None) -> Registry:
        found = start_registry(tmp_path / name, auth=auth, token=token)
        started.append(found)
        return found

    yield make
    for found in reversed(started):
        stop_registry(found)


@pytest.fixture
def registry(make_registry: MakeRegistry) -> Registry:
    return make_registry()


@pytest.fixture
def auth_registry(make_registry: MakeRegistry) -> Registry:
    return make_registry("auth-registry", auth=True)


def pytest_configure(config: pytest.Config) -> None:
    """A shell that starts a command in the background (`make test &`, a CI step's `cmd &`) ignores SIGINT
    for it, and an ignored signal stays ignored in every child: the tests that press Ctrl-C on a vtrain they
    started would wait for nothing. Python's own handler again, so children start with the default."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most `slow` tests first, each file's tests together and in their order. xdist's
    worksteal gives each worker a contiguous part of this list and a worker that runs out takes the end of
    the other's: the end is then quick tests, not a minute-long TensorFlow scenario that one worker runs
    while the other waits. (A stable sort on the file's count keeps a file's tests adjacent, so its module
    fixtures still run once per worker.)"""
    slow: dict[Path, int] = {}
    for item in items:
        slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: -slow[item.path])
    _alone_where_make_finds_it(items)


def _alone_where_make_finds_it(items: list[pytest.Item]) -> None:
    """`make test` runs the `alone` part on the files that say `pytest.mark.alone` (a grep: collecting only them
    is quicker). A test marked otherwise (a conftest hook, a mark given a new name) would silently not run."""
    unseen = sorted({str(item.path) for item in items if item.get_closest_marker("alone") is not None
                     and "pytest.mark.alone" not in item.path.read_text(encoding="utf-8")})
    if unseen:
        raise pytest.UsageError(f"{', '.join(unseen)}: marked alone but not with `pytest.mark.alone` in the file, "
                                "which is how `make test` finds the alone tests (ALONE_FILES)")


#: A test that takes longer than this and is not marked `slow` is named at the end of the run, so
#: `make test-fast` stays quick; a report, not a failure (timings are not asserted in tests).
SLOW_SECONDS = 5.0
_unmarked_slow: list[tuple[str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Reads the report, not the clock, so it also sees the tests that pytest-xdist's workers ran."""
    if report.when == "call" and report.duration > SLOW_SECONDS and "slow" not in report.keywords:
        _unmarked_slow.append((report.nodeid, report.duration))


#: Modules that collecting the suite must not import: each pytest run (each xdist worker, the `alone` part)
#: would pay for them, the runs that deselect the tests that need them too. Said at the end, not failed.
HEAVY_AT_COLLECTION = ("tensorflow",)
_heavy_collected: list[str] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    import sys

    _heavy_collected.extend(name for name in HEAVY_AT_COLLECTION if name in sys.modules)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _heavy_collected:
        terminalreporter.section("imported while collecting (import it in a fixture or the test)")
        terminalreporter.write_line(", ".join(_heavy_collected))
    if _unmarked_slow:
        terminalreporter.section(f"tests over {SLOW_SECONDS:g} s not marked slow (mark them @pytest.mark.slow)")
        for nodeid, took in sorted(_unmarked_slow, key=lambda e: -e[1]):
            terminalreporter.write_line(f"{took:6.1f} s  {nodeid}")
