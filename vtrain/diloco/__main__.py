"""`python -m vtrain.diloco`: pool 0 of a DiLoCo job (Vertex AI or `vtrain local` starts it).

Listens on this replica's CLUSTER_SPEC address, resumes from $AIP_CHECKPOINT_DIR when a checkpoint
is there, merges until every learner is done, and exits 0 (the job succeeds) or 1 with one line
saying why. SIGTERM (preemption, cancel) writes a checkpoint first. The outer steps merged are
reported as this replica's steps (VTRAIN_STATUS_FILE, set by `vtrain local`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from vtrain.errors import DilocoError
from vtrain.foreign import printable


class PrintableFormatter(logging.Formatter):
    """The syncer's lines name its peers (a learner's name, its manifest's tensor names, a reason it
    sent): each line of a record is made printable, so a peer's text cannot drive a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return "\n".join(printable(line) for line in super().format(record).split("\n"))


def serve(env: Mapping[str, str]) -> int:
    import grpc

    from vtrain.diloco import settings as envsettings
    from vtrain.diloco import wire
    from vtrain.diloco.storage import SUMMARY_NAME, Store
    from vtrain.diloco.syncer import Syncer, summary_json, summary_line
    from vtrain.runtime.recovery import report_step

    log = logging.getLogger("vtrain.diloco")
    settings = envsettings.settings(env)
    expected = envsettings.expected_learners(env)
    if not expected:
        raise DilocoError("CLUSTER_SPEC lists no learners (workerpool1/workerpool2): nothing to merge")
    address = envsettings.syncer_address(env)
    checkpoint_dir = env.get("AIP_CHECKPOINT_DIR", "")
    store = Store(checkpoint_dir) if checkpoint_dir else None
    # Outer steps count as this replica's steps: `vtrain local --fault chief-0:kill@step:N` aims at the
    # syncer, and the launcher measures how many rounds a restart redid (none beyond the last checkpoint).
    syncer = Syncer(settings, expected, envsettings.token(env), store, on_progress=report_step)
    server = grpc.server(ThreadPoolExecutor(max_workers=2 * len(expected) + 8), options=wire.server_options())
    server.add_generic_rpc_handlers((wire.service_handler(syncer.session),))
    bind = envsettings.bind_address(address)
    if server.add_insecure_port(bind) == 0:
        raise DilocoError(f"the syncer cannot listen on {bind}")
    server.start()

    def stop(signum: int, _frame: object) -> None:
        syncer.stop_requested = True
        with syncer.cv:
            syncer.cv.notify_all()

    signal.signal(signal.SIGTERM, stop)
    log.info("vtrain.diloco: syncer on %s for %d learner(s): %s; H=%d, outer lr %g, momentum %g, quorum %s, "
             "grace %gs, straggler timeout %gs, %s, %d fragment(s)", bind, len(expected), ", ".join(expected),
             settings.inner_steps, settings.outer_lr, settings.outer_momentum, settings.min_quorum or "all",
             settings.grace, settings.straggler_timeout, settings.compression, settings.fragments)
    try:
        stats = syncer.coordinate()
    finally:
        server.stop(grace=2)
    if syncer.stop_requested:
        log.warning("vtrain.diloco: stopped by SIGTERM at rounds %s (checkpoint written)", stats.get("rounds"))
        return 143
    log.info("vtrain.diloco: finished: %s", summary_line(stats))
    log.debug("vtrain.diloco: statistics: %s", summary_json(stats))
    if checkpoint_dir:  # what happened, for people and tests: merges, stalls, stale deltas, per-learner counts
        Store(checkpoint_dir, SUMMARY_NAME).write(json.dumps(stats, indent=1).encode())
    return 0


def main() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(PrintableFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=os.environ.get("VTRAIN_LOG_LEVEL", "INFO"), handlers=[handler])
    try:
        code = serve(os.environ)
    except DilocoError as err:
        err.show(sys.stderr)  # its lines printable
        sys.stderr.flush()
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
