"""Issue 20, class 2: a DiLoCo merge is durable before any learner hears of it, and what a syncer
restart loses is counted. A syncer killed between sending a merge and writing its checkpoint used
to resume a round behind the learners (their work for that round dropped) while its summary said
nothing was redone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.diloco.test_diloco import Clock
from vtrain.diloco import wire
from vtrain.diloco.codec import TensorSpec
from vtrain.diloco.members import Conn, Learner
from vtrain.diloco.outer import Outer
from vtrain.diloco.settings import Settings
from vtrain.diloco.storage import Store
from vtrain.diloco.syncer import Syncer, summary_line

NAMES = ["a", "b"]


class RecordingStore(Store):
    """A real local store that notes, at each write, how many frames the learners had been sent."""

    def __init__(self, directory: str, learners: dict[str, Learner]) -> None:
        super().__init__(directory)
        self.learners = learners
        self.sent_at_write: list[int] = []

    def write(self, data: bytes) -> None:
        self.sent_at_write.append(sum(lr.conn.out.qsize() for lr in self.learners.values() if lr.conn))
        super().write(data)


def _syncer(tmp_path: Path, every: float, clock: Clock | None = None) -> tuple[Syncer, RecordingStore, Clock]:
    clock = clock or Clock()
    settings = Settings(checkpoint_every=every, grace=0.0, straggler_timeout=10.0, inner_steps=10)
    s = Syncer(settings, NAMES, "t", None, clock=clock)
    store = RecordingStore(str(tmp_path), s.learners)
    s.store = store
    manifest = [TensorSpec("w", "float32", (4,), True)]
    s.outer = Outer(manifest, [np.zeros(4)], settings)
    s._reset_rounds()
    for n in NAMES:
        s.learners[n] = Learner(n, Conn(), clock.now, s.outer.rounds)
    return s, store, clock


def _merge_round(s: Syncer, clock: Clock) -> None:
    assert s.outer is not None
    for n in NAMES:
        s.pending[0][n] = ([np.ones(4)], 1.0, s.outer.fragments[0].round)
    clock.now += 1.0
    s._merge(0, clock.now)


def _rounds_on_disk(store: Store, settings: Settings) -> list[int]:
    data = store.read()
    assert data is not None
    return Outer.from_bytes(data, settings)[0].rounds


def test_with_checkpoint_every_0_each_merge_is_written_before_it_is_sent(tmp_path: Path) -> None:
    s, store, clock = _syncer(tmp_path, every=0.0)
    for expected in (1, 2, 3):
        _merge_round(s, clock)
        # What a kill right now would leave: the learners hold round `expected`, and so does the disk.
        assert _rounds_on_disk(store, s.settings) == [expected]
        assert store.sent_at_write[-1] == 0  # nothing of this merge had gone out when it was written
        for lr in s.learners.values():
            frame = lr.conn.out.get_nowait()  # type: ignore[union-attr]
            assert frame.header.kind == "update" and frame.header.round == expected


def test_with_a_period_merges_wait_for_the_due_checkpoint_and_a_resume_counts_what_was_lost(tmp_path: Path) -> None:
    s, store, clock = _syncer(tmp_path, every=60.0)
    _merge_round(s, clock)
    _merge_round(s, clock)
    assert store.read() is None  # not due yet: sent, not durable (the documented trade)
    clock.now += 60.0
    _merge_round(s, clock)  # due: written before it is sent
    assert _rounds_on_disk(store, s.settings) == [3] and store.sent_at_write[-1] == 2 * len(NAMES)
    _merge_round(s, clock)  # round 4 is sent, then the syncer is killed

    resumed = Syncer(s.settings, NAMES, "t", Store(str(tmp_path)), clock=clock)
    assert resumed.stats["resumed_from"] == [3]
    conn = Conn()
    hello = wire.header("hello", token="t", learner="a", manifest_hash=resumed.outer.hash,  # type: ignore[union-attr]
                        manifest=[], rounds=[4])
    assert resumed._hello(conn, hello)
    assert resumed.stats["rounds_lost"] == 1  # the learner had round 4, the checkpoint 3: one redone
    assert "1 round(s) lost with the syncer and redone" in summary_line({**resumed.stats, "learners": {}})
    level = Syncer(s.settings, NAMES, "t", Store(str(tmp_path)), clock=clock)
    assert level._hello(Conn(), wire.header("hello", token="t", learner="b", manifest_hash=level.outer.hash,  # type: ignore[union-attr]
                                            manifest=[], rounds=[3]))
    assert level.stats["rounds_lost"] == 0
