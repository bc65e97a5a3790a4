"""Watching a run (`vtrain local`; a Vertex job under `submit --wait`, `status --watch`): the live view
on a terminal, plain lines elsewhere.

On a terminal (stderr a TTY, not `--plain`, not CI, TERM not `dumb`) a `rich` table redrawn once
a second shows one row per replica (state, step, steps/s, restarts) and the elapsed time; vtrain's
own `[vtrain]` lines print above it, and the replicas' output goes to their log files only, unless
`--follow LABEL` or `--verbose` asks for it. Elsewhere a run prints as before: each replica's
Python lines prefixed `[chief-0]` (TensorFlow's C++ logging is kept in the files and counted, see
:mod:`vtrain.view.lines`) and a `[vtrain] progress …` line when something changed, at most
every `--progress-every`.

A terminal too narrow for the table (fewer columns than its rows need without wrapping) gets the
plain lines instead, from the start or from the moment it is narrowed: a table rich wraps cell by
cell is unreadable, and its redraws leave its wrapped rows behind.

Every line printed here, and every cell of the table, goes through :func:`vtrain.foreign.printable`:
a replica's text (or a Vertex log entry's) cannot move the cursor over its `[chief-0] ` prefix,
retitle or clear the terminal, or pass for a `[vtrain]` line.

The view reads :meth:`~vtrain.local.job.LocalJob.progress` (for a Vertex job
:meth:`vtrain.view.vertex_rows.JobProgress.progress`, the same rows) from its own thread; the CPU that
thread uses is measured (:attr:`Watch.cpu_seconds`, time.thread_time) so its cost is known.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Collection
from typing import IO, Any

from vtrain.foreign import printable
from vtrain.view.lines import changed, clock, is_native_log, plain_line, rate_text

REFRESH_S = 1.0  # the clock shows seconds; rich redraws 3 rows in ~3.5 ms here (benchmarks/live_view.py)


def live_possible(stream: IO[str], env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """A person is watching `stream`: a TTY, not CI, a terminal that can redraw."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not env.get("CI") and env.get("TERM", "") != "dumb"


class Notices:
    """A file-like sink for the launcher's `[vtrain]` lines (what run_local writes as `notices`)."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit, self._buf = emit, ""

    def write(self, text: str) -> int:
        self._buf += text
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            self._emit(line)
        return len(text)

    def flush(self) -> None:
        pass


class Watch:
    """The view of one run: give `notices` and `on_line` to run_local, then :meth:`watch` the job."""

    def __init__(self, *, live: bool, logs: IO[str], follow: Collection[str] = (), verbose: bool = False,
                 progress_every: float = 30.0, err: IO[str] | None = None,
                 width: int | None = None) -> None:  # fmt: skip
        self.live = live
        self._logs = logs  # where replica lines go (stdout, or stderr with -o json)
        self._err = err or sys.stderr
        self._follow = set(follow)
        self._verbose = verbose
        self._every = progress_every
        self._lock = threading.Lock()
        self._console: Any = None
        self._live: Any = None
        self.hidden = 0  # replica lines kept in the files only
        self.native = 0  # of which TensorFlow C++ logging
        self.cpu_seconds = 0.0  # spent by the view's thread (rendering, reading the job's progress)
        self.notices = Notices(self._notice)
        self._said: dict[str, Any] | None = None  # the rows the last plain progress line said
        if live:
            from rich.console import Console  # only on a terminal: rich costs ~40 ms to import

            self._console = Console(file=self._err, highlight=False, markup=False, emoji=False, width=width)

    # ----------------------------------------------------------------- lines
    def _print(self, line: str, stream: IO[str]) -> None:
        # composed of printable parts already; this keeps it so whatever the caller did (a log entry of
        # several lines comes with the prefix on each line)
        line = "\n".join(printable(part, limit=None) for part in line.split("\n"))
        with self._lock:
            if self._console is not None:
                self._console.print(line, soft_wrap=True)  # above the live table
                return
            with contextlib.suppress(OSError, ValueError):
                stream.write(line + "\n")
                stream.flush()

    def _notice(self, line: str) -> None:
        self._print(line, self._err)

    def echo(self, line: str) -> None:
        """A line of the job's log (`submit --stream-logs`): above the live table, or as it is."""
        self._print(line, self._logs)

    def on_line(self, replica: Any, text: str, stream: str) -> None:
        """A replica's line (from its reader thread): shown, or kept in its log file only."""
        label = replica.label
        text = printable(text)
        if self._verbose or label in self._follow:
            self._print(f"[{label}] {text}", self._logs)
            return
        native = is_native_log(text)
        if self.live or native:
            self.hidden += 1
            self.native += native
            return
        self._print(f"[{label}] {text}", self._logs)

    # ----------------------------------------------------------------- the view
    def watch(self, job: Any, wait: Callable[[], str], *, last_line: bool = False) -> str:
        """Show `job` until `wait()` returns its final state (Ctrl-C reaches the caller as before).
        With `last_line`, plain output ends with a progress line of the final rows (a Vertex job, whose
        end no launcher summarizes), when it says something new."""
        stop = threading.Event()
        thread = threading.Thread(target=self._run, args=(job, stop), name="vtrain-watch", daemon=True)
        if self.live:
            from rich.live import Live

            table = self._table(job.progress())
            if self._fits(table):
                self._live = Live(table, console=self._console, auto_refresh=False,
                                  transient=False, redirect_stdout=False, redirect_stderr=False)  # fmt: skip
                self._live.start()
            else:
                self._to_plain()
        thread.start()
        try:
            return wait()
        finally:
            stop.set()
            thread.join(5)
            if self._live is not None:
                with contextlib.suppress(Exception):
                    self._live.update(self._table(job.progress()), refresh=True)
                    self._live.stop()
            elif last_line:
                with contextlib.suppress(Exception):
                    progress = job.progress()
                    if progress["replicas"] and changed(self._said, progress):
                        self._notice(f"[vtrain] {plain_line(progress)}")

    def _run(self, job: Any, stop: threading.Event) -> None:
        last = time.monotonic()  # the first plain line after one interval: the start is said already
        shown: tuple[Any, ...] | None = None  # what the table shows now: redrawn only when that changes
        while not stop.wait(REFRESH_S if self.live else min(REFRESH_S, self._every)):
            begin = time.thread_time()
            try:
                progress = job.progress()
                if self.live:
                    key = (progress["state"], clock(progress["seconds"]), self._console.width,
                           *((r["state"], r.get("step"), rate_text(r.get("rate")), r["restarts"])
                             for r in progress["replicas"]))  # fmt: skip
                    if key != shown:
                        table = self._table(progress)
                        if not self._fits(table):
                            self._to_plain()
                            continue
                        with self._lock:
                            self._live.update(table, refresh=True)
                        shown = key
                elif (time.monotonic() - last >= self._every and progress["replicas"] and changed(self._said, progress)
                      and any(r["state"] in ("starting", "running") for r in progress["replicas"])):
                    # once every replica has ended, the job's own end lines (restarts, the final state) say it:
                    # a progress line then would land among or after them
                    self._notice(f"[vtrain] {plain_line(progress)}")
                    self._said, last = progress, time.monotonic()
            except Exception:  # noqa: BLE001 - a view must never stop the run it shows
                pass
            finally:
                self.cpu_seconds += time.thread_time() - begin

    def _fits(self, table: Any) -> bool:
        """The table's rows fit the terminal's width unwrapped."""
        from rich.measure import Measurement

        wide = self._console.options.update(max_width=1 << 16)  # measured unclamped, then compared
        needed = Measurement.get(self._console, wide, table).maximum
        return bool(needed <= self._console.width)

    def _to_plain(self) -> None:
        """The terminal is too narrow for the table: plain lines from now on, as off a terminal."""
        with self._lock:
            if self._live is not None:
                with contextlib.suppress(Exception):
                    self._live.stop()
                self._live = None
            self.live, self._console = False, None
        self._notice(f"[vtrain] the terminal is too narrow for the live view: progress lines every "
                     f"{self._every:g} s instead")

    def _table(self, progress: dict[str, Any]) -> Any:
        from rich.table import Table

        state = printable(str(progress["state"]).removeprefix("JOB_STATE_"))
        name = printable(str(progress.get("name", "")))
        table = Table(title=f"{name}  {state}  {clock(progress['seconds'])}", title_justify="left",
                      box=None, pad_edge=False, header_style="bold")  # fmt: skip
        for name, justify in (("replica", "left"), ("state", "left"), ("step", "right"), ("steps/s", "right"),
                              ("restarts", "right")):  # fmt: skip
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in progress["replicas"]:
            step = "-" if row.get("step") is None else str(row["step"])
            restarts = "-" if row.get("restarts") is None else str(row["restarts"])  # a Vertex replica that never said
            table.add_row(printable(str(row["replica"])), printable(str(row["state"])), step,
                          rate_text(row.get("rate")), restarts)
        return table


__all__ = ["Notices", "Watch", "live_possible"]
