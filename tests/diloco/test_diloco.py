"""DiLoCo without processes: the job file, the rules, the request, the runtime decision, the codecs,
the outer step and the syncer's merge rules (on a clock the test drives)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import assert_equals_real_proto, planned, write_job
from vtrain import load_config
from vtrain.constants import DILOCO_DEFAULTS, DilocoKnobs
from vtrain.diloco import codec, traffic
from vtrain.diloco.codec import TensorSpec
from vtrain.diloco.members import Conn, Learner
from vtrain.diloco.outer import Outer
from vtrain.diloco.settings import Settings
from vtrain.diloco.storage import Store
from vtrain.diloco.syncer import Syncer
from vtrain.errors import ConfigError, DilocoError, RuntimeMismatch
from vtrain.jobfile.config import DilocoConfig
from vtrain.request.custom_job import build_job_dict
from vtrain.runtime.decision import choose_strategy

JOB = """
name: d
trainer: {{package_uris: [gs://bkt-x/t.tar.gz], module: trainer.task}}
distribution_strategy: diloco
{diloco}
cluster:
  chief: {{machine_type: {chief}}}
  workers: {{replicas: 4, machine_type: a2-highgpu-1g}}
{extra}
"""


def _job(tmp_path: Path, diloco: str = "", chief: str = "n1-standard-8", extra: str = "") -> Path:
    return write_job(tmp_path, JOB.format(diloco=diloco, chief=chief, extra=extra))


def test_the_job_model_and_the_replicas_share_one_set_of_knobs() -> None:
    assert issubclass(DilocoConfig, DilocoKnobs) and issubclass(Settings, DilocoKnobs)
    assert DilocoConfig().settings() == DILOCO_DEFAULTS == asdict(Settings())
    custom = DilocoConfig(inner_steps=20, compression="int8", min_quorum=3, checkpoint_every=0.0)
    assert Settings.from_json(json.dumps(custom.settings())) == Settings(**custom.settings())


def test_the_syncer_runs_on_pool_0_and_every_pool_gets_the_settings(tmp_path: Path) -> None:
    path = _job(tmp_path, "diloco: {inner_steps: 20, compression: int8, grace: 1.5s, "
                          "second_learner_pool: {replicas: 2, machine_type: g2-standard-8}}")
    body = build_job_dict(*planned(load_config(path)))
    pools = body["jobSpec"]["workerPoolSpecs"]
    assert [p["machineSpec"]["machineType"] for p in pools] == ["n1-standard-8", "a2-highgpu-1g", "g2-standard-8"]
    chief = pools[0]["pythonPackageSpec"]
    assert chief["pythonModule"] == "vtrain.diloco" and "args" not in chief and "tf-cpu" in chief["executorImageUri"]
    assert pools[1]["pythonPackageSpec"]["pythonModule"] == "trainer.task"
    for pool in pools:
        env = {e["name"]: e["value"] for e in pool["pythonPackageSpec"]["env"]}
        settings = Settings.from_json(env["VTRAIN_DILOCO"])
        assert (settings.inner_steps, settings.compression, settings.grace) == (20, "int8", 1.5)
        assert env["VTRAIN_DISTRIBUTION_STRATEGY"] == "diloco"
    assert_equals_real_proto(body)


def test_a_container_trainer_runs_the_syncer_from_its_image(tmp_path: Path) -> None:
    path = write_job(tmp_path, """
        name: d
        trainer: {container: {image_uri: us-docker.pkg.dev/p/r/t:1, command: [python, -m, t]}}
        distribution_strategy: diloco
        cluster: {chief: {machine_type: n1-standard-8}, workers: {replicas: 2}}
    """)
    config = load_config(path)
    pools = build_job_dict(*planned(config))["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["containerSpec"]["command"] == ["python3", "-m", "vtrain.diloco"]
    assert pools[1]["containerSpec"]["command"] == ["python", "-m", "t"]
    assert any("needs vtrain" in w.message for w in config.warnings)


@pytest.mark.parametrize(("diloco", "chief", "extra", "expected"), [
    ("diloco: {min_quorum: 5}", "n1-standard-8", "", "diloco.min_quorum: min_quorum 5 is more than the 4 learner(s)"),
    ("diloco: {fragments: 3}", "n1-standard-8", "", "inner_steps (50) must be a multiple of fragments (3); e.g. "
                                                    "fragments: 2"),
    ("diloco: {fragments: 60}", "n1-standard-8", "", "fragments (60) must be at most inner_steps (50)"),
    ("", "a2-highgpu-1g", "", "cluster.chief.machine_type: pool 0 runs the DiLoCo syncer, which needs only CPUs"),
    ("", "n1-standard-8", "  reduction_server: {replicas: 2}", "DiLoCo jobs have no reduction server"),
    ("diloco: {compression: int9}", "n1-standard-8", "", "'int9' is not allowed; allowed: none, bf16, int8, int4; "
                                                         "did you mean 'int8'?"),
    ("diloco: {outer_momentum: 1}", "n1-standard-8", "", "diloco.outer_momentum: must be below 1, got 1"),
    ("diloco: {grace: soon}", "n1-standard-8", "", "expected seconds (a number) or a duration like 0.5s"),
    ("diloco: {straggler_timeout: 0}", "n1-standard-8", "", "straggler_timeout must be longer than 0s"),
])
def test_bad_diloco_jobs_say_what_to_change(tmp_path: Path, diloco: str, chief: str, extra: str,
                                            expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_job(tmp_path, diloco, chief, extra))
    assert expected in str(err.value) + "".join(p.message for p in err.value.problems)


def test_diloco_settings_need_the_diloco_strategy(tmp_path: Path) -> None:
    path = write_job(tmp_path, """
        name: d
        trainer: {package_uris: [gs://bkt-x/t.tar.gz], module: trainer.task}
        distribution_strategy: multi_worker_mirrored
        diloco: {inner_steps: 10}
        cluster: {chief: {machine_type: n1-standard-8}, workers: {replicas: 2}}
    """)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert [p.path for p in err.value.problems] == ["diloco"]
    assert "only for distribution_strategy: diloco" in err.value.problems[0].message


def _env(task: str, index: int, learners: int = 2, strategy: str = "diloco") -> dict[str, str]:
    cluster = {"chief": ["h:1"], "worker": [f"h:{i + 2}" for i in range(learners)]}
    return {"VTRAIN_DISTRIBUTION_STRATEGY": strategy,
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task, "index": index}})}


def test_learners_are_standalone_and_the_first_one_plays_the_chief() -> None:
    first = choose_strategy(_env("worker", 0), gpus=0, tpu=False)
    assert (first.strategy, first.is_chief, first.num_workers, first.multi_worker) == ("diloco", True, 2, False)
    assert "default strategy" in first.reason
    other = choose_strategy(_env("worker", 1), gpus=4, tpu=False)
    assert not other.is_chief and "MirroredStrategy over 4 local GPUs" in other.reason
    with pytest.raises(RuntimeMismatch, match="pool 0 .* runs the syncer"):
        choose_strategy(_env("chief", 0), gpus=0, tpu=False)


def test_settings_from_the_environment_are_checked() -> None:
    with pytest.raises(DilocoError, match="unknown keys color"):
        Settings.from_json('{"color": 1}')
    with pytest.raises(DilocoError, match="multiple of fragments"):
        Settings.from_json('{"inner_steps": 10, "fragments": 3}')
    with pytest.raises(DilocoError, match="overlap must be true or false, got 'yes'"):
        Settings.from_json('{"overlap": "yes"}')
    assert Settings.from_json('{"overlap": true}').overlap is True


@pytest.mark.parametrize("name", ["none", "bf16", "int8", "int4"])
def test_codecs_round_trip_within_their_precision(name: str) -> None:
    x = np.random.default_rng(0).normal(size=3001).astype(np.float32)
    data = codec.encode(x, name)
    assert len(data) == traffic.encoded_size(x.size, name)
    back = codec.decode(data, name, x.size)
    bound = {"none": 0, "bf16": 0.004, "int8": 0.005, "int4": 0.08}[name]
    assert np.abs(back - x).max() <= bound * np.abs(x).max()


def test_fragments_are_balanced_and_manifests_are_hashed_by_shape() -> None:
    manifest = [TensorSpec(str(i), "float32", (n,), True) for i, n in enumerate([100, 90, 60, 50, 10])]
    parts = codec.fragments(manifest, 2)
    assert sorted(sum(manifest[i].size for i in p) for p in parts) == [150, 160]
    other = [*manifest[:-1], TensorSpec("4", "float32", (11,), True)]
    assert codec.manifest_hash(manifest) != codec.manifest_hash(other)


def test_the_outer_step_is_nesterov_and_statistics_are_averaged() -> None:
    manifest = [TensorSpec("w", "float32", (3,), True), TensorSpec("bn", "float32", (2,), False)]
    outer = Outer(manifest, [np.ones(3), np.zeros(2)], Settings(outer_lr=0.5, outer_momentum=0.9))
    deltas = [([np.full(3, 1.0), np.full(2, -1.0)], 1.0), ([np.full(3, 3.0), np.full(2, -3.0)], 3.0)]
    outer.merge(0, deltas)
    g = 2.5  # weighted by examples: (1·1 + 3·3) / 4
    assert np.allclose(outer.params[0], 1 - 0.5 * (g + 0.9 * g))
    assert np.allclose(outer.params[1], 2.5)  # the weighted mean of the learners' values (0 - delta)
    assert outer.rounds == [1]


def test_a_compressed_downlink_keeps_every_learner_bit_identical_to_the_syncer() -> None:
    manifest = [TensorSpec("w", "float32", (500,), True)]
    rng = np.random.default_rng(1)
    start = rng.normal(size=500).astype(np.float32)
    outer = Outer(manifest, [start], Settings(compression="int4"))
    anchor = start.copy()
    for _ in range(5):
        update = outer.merge(0, [([rng.normal(size=500).astype(np.float32) * 0.1], 1.0)])
        anchor = anchor + codec.unpack(update, "int4", manifest)[0]
    assert np.array_equal(anchor, outer.params[0])
    assert outer.catch_up(0, 3) is not None and len(outer.catch_up(0, 3) or []) == 2
    assert outer.catch_up(0, 6) is None  # ahead of us (we restarted): a snapshot instead
    restored, meta = Outer.from_bytes(outer.to_bytes(), Settings(compression="int4"))
    assert restored.rounds == [5] and np.array_equal(restored.params[0], outer.params[0])
    assert np.array_equal(restored.residual[0], outer.residual[0])


def test_traffic_per_step_is_below_a_ring_all_reduce_by_h_and_4h() -> None:
    params, h = 10_000_000, 50
    ring = traffic.ring_allreduce_bytes_per_step(params, 4)["up"]
    assert traffic.bytes_per_step(params, h, "none")["up"] <= ring / h
    assert traffic.bytes_per_step(params, h, "int8")["up"] <= ring / (4 * h)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _syncer(quorum: int | None, fragments: int = 1) -> tuple[Syncer, Clock]:
    clock = Clock()
    names = ["a", "b", "c"]
    s = Syncer(Settings(min_quorum=quorum, grace=5.0, straggler_timeout=10.0, fragments=fragments, inner_steps=10),
               names, "t", clock=clock)
    manifest = [TensorSpec("w", "float32", (4,), True), TensorSpec("v", "float32", (4,), True)]
    s.outer = Outer(manifest, [np.zeros(4), np.zeros(4)], s.settings)
    s._reset_rounds()
    for n in names:
        s.learners[n] = Learner(n, Conn(), clock.now, s.outer.rounds)
    return s, clock


def _deliver(s: Syncer, name: str, f: int = 0) -> None:
    assert s.outer is not None
    s.pending[f][name] = ([np.ones(4)], 1.0, s.outer.fragments[f].round)


def test_a_merge_waits_for_every_live_learner_and_not_for_a_silent_one() -> None:
    s, clock = _syncer(quorum=None)
    _deliver(s, "a"), _deliver(s, "b")
    assert not s._ready(0, clock.now)
    clock.now += 9.9  # c is still heartbeating within straggler_timeout? its last frame was 9.9 s ago
    assert not s._ready(0, clock.now)
    clock.now += 0.2  # 10.1 s of silence: hung, merged around
    assert s._ready(0, clock.now)


def test_a_quorum_waits_an_adaptive_grace_window_capped_by_grace() -> None:
    s, clock = _syncer(quorum=2)
    clock.now += 4.0  # the round took 4 s to reach its quorum
    _deliver(s, "a"), _deliver(s, "b")
    for lr in s.learners.values():
        lr.last_heard = clock.now
    assert not s._ready(0, clock.now)
    clock.now += 0.9
    assert not s._ready(0, clock.now)
    clock.now += 0.2  # a quarter of 4 s has passed
    assert s._ready(0, clock.now)
    s2, clock2 = _syncer(quorum=2)
    clock2.now += 400.0
    _deliver(s2, "a"), _deliver(s2, "b")
    for lr in s2.learners.values():
        lr.last_heard = clock2.now
    assert not s2._ready(0, clock2.now)
    clock2.now += 5.1  # never more than `grace`
    assert s2._ready(0, clock2.now)


def test_a_learner_blocked_on_another_fragment_is_not_waited_for() -> None:
    s, clock = _syncer(quorum=None, fragments=2)
    _deliver(s, "a", f=0)
    _deliver(s, "b", f=0)
    _deliver(s, "c", f=1)  # c waits on fragment 1, which waits on a and b: no cycle allowed
    assert s._ready(0, clock.now)


def test_a_resumed_syncer_waits_for_the_learners_to_come_back_before_its_first_merge(tmp_path: Path) -> None:
    first, clock = _syncer(quorum=None)
    first.outer.merge(0, [([np.ones(4), np.ones(4)], 1.0)], full_weight=1.0)  # type: ignore[union-attr]
    store = Store(str(tmp_path))
    store.write(first.outer.to_bytes({"learners": ["a", "b", "c"]}))  # type: ignore[union-attr]
    s = Syncer(first.settings, ["a", "b", "c"], "t", store, clock=clock)
    assert s.stats["resumed_from"] == [1] and s.outer is not None and s.outer.rounds == [1]
    s.learners["a"] = Learner("a", Conn(), clock.now, s.outer.rounds)  # the first learner back
    _deliver(s, "a")
    assert not s._ready(0, clock.now)  # it must not merge alone with the whole round's weight
    clock.now += 9.9
    assert not s._ready(0, clock.now)
    s.learners["a"].last_heard = clock.now
    clock.now += 0.2  # straggler_timeout since the restart: b and c are not coming back soon
    assert s._ready(0, clock.now)
    s2 = Syncer(first.settings, ["a", "b", "c"], "t", store, clock=clock)
    for n in "abc":
        s2.learners[n] = Learner(n, Conn(), clock.now, s2.outer.rounds)  # type: ignore[union-attr]
        _deliver(s2, n)
    assert s2._ready(0, clock.now)  # everyone is back: no wait


def test_the_grace_window_is_skipped_when_no_missing_learner_can_make_it_by_its_pace() -> None:
    s, clock = _syncer(quorum=2)
    start = clock.now
    slow = s.learners["c"]
    slow.answered_at, slow.work = start, 8.0  # c takes 8 s from our answer to its next delta
    clock.now += 4.0  # a and b reach the quorum in 4 s: the window is 1 s, c is due at +8 s
    _deliver(s, "a"), _deliver(s, "b")
    for lr in s.learners.values():
        lr.last_heard = clock.now
    assert s._ready(0, clock.now) and s.stats["grace_skipped"] == 1  # no wait for it

    s2, clock2 = _syncer(quorum=2)
    jitter = s2.learners["c"]
    jitter.answered_at, jitter.work = clock2.now, 4.5  # c is a little slower: due within the window
    clock2.now += 4.0
    _deliver(s2, "a"), _deliver(s2, "b")
    for lr in s2.learners.values():
        lr.last_heard = clock2.now
    assert not s2._ready(0, clock2.now)
    clock2.now += 1.1
    assert s2._ready(0, clock2.now) and s2.stats["grace_skipped"] == 0


def test_a_learners_pace_is_a_moving_average_of_answer_to_delta_times() -> None:
    lr = Learner("a", Conn(), 0.0, [0], answered_at=10.0)
    lr.heard_delta(14.0)
    assert lr.work == 4.0 and lr.answered_at is None  # waiting on us: not due at all
    lr.heard_delta(30.0)  # a delta without an answer in between (after a rejoin) is no sample
    assert lr.work == 4.0
    lr.answered_at = 20.0
    lr.heard_delta(28.0)
    assert lr.work == 6.0  # 0.5 * 8 + 0.5 * 4
    lr.answered_at = 40.0
    assert lr.due_by(46.0) and not lr.due_by(45.9)
    unknown = Learner("b", Conn(), 0.0, [0], answered_at=10.0)
    assert unknown.due_by(0.0)  # no pace yet: it may come any time, so the window is kept


def test_with_a_quorum_the_first_merge_waits_for_that_many_learners_to_register() -> None:
    s, clock = _syncer(quorum=2)
    del s.learners["c"]  # c's TensorFlow is still starting
    _deliver(s, "a")
    assert not s._ready(0, clock.now)  # one learner alone is below the quorum
    _deliver(s, "b")
    assert s._ready(0, clock.now)  # a quorum registered and sent: c joins later at the current round
    every, clock2 = _syncer(quorum=None)
    del every.learners["c"]
    _deliver(every, "a"), _deliver(every, "b")
    assert not every._ready(0, clock2.now)  # without min_quorum the first merge waits for all of them


def test_a_learner_that_rejoins_mid_round_is_not_waited_for_until_the_next_round() -> None:
    s, clock = _syncer(quorum=None)
    s.outer.fragments[0].round = 5  # type: ignore[union-attr]  # past the first round
    s.learners["a"].base = s.learners["b"].base = [5]
    clock.now += 1.0
    s.learners["c"] = Learner("c", Conn(), clock.now, [5], joined=clock.now)  # restarted: back mid-round
    _deliver(s, "a"), _deliver(s, "b")
    assert s._ready(0, clock.now)  # no stall for its start-up: its delta, if any, joins the next merge
    s.round_started[0] = clock.now + 0.5  # the next round began after it joined: now it counts again
    assert s._expected(0, clock.now + 1.0)[1] == ["c"]


def test_a_rejoined_learners_late_first_delta_is_answered_with_the_next_merge_to_fall_in_step() -> None:
    s, clock = _syncer(quorum=None)
    two = [np.ones(4), np.ones(4)]
    s.pending[0] = {"a": (two, 1.0, 0), "b": (two, 1.0, 0)}
    s._merge(0, clock.now)  # round 1, without c (it was down)
    conn = Conn()
    s.learners["c"] = Learner("c", conn, clock.now, [0], joined=clock.now, just_joined=True)  # back, a round old
    s.pending[0]["c"] = (two, 0.5, 0)  # what _delta files for its stale first delta ...
    s.held[0].add("c")  # ... with no answer yet: it waits for this round's merge
    s.pending[0].update({"a": (two, 1.0, 1), "b": (two, 1.0, 1)})
    assert conn.out.empty()
    s._merge(0, clock.now)
    assert conn.out.qsize() == 2 and s.learners["c"].base == [2]  # rounds 1 and 2: in step with a and b
    assert not s.held[0]


def test_learners_that_finished_still_weigh_in_so_a_lagging_learner_moves_the_model_by_its_share() -> None:
    s, clock = _syncer(quorum=None)
    for n in ("a", "b"):
        s.learners[n].done, s.learners[n].weight = True, 1.0
    s.learners["c"].weight = 1.0
    before = s.outer.params[0].copy()  # type: ignore[union-attr]
    s.pending[0]["c"] = ([np.ones(4), np.ones(4)], 1.0, 0)
    s._merge(0, clock.now)
    moved = before - s.outer.params[0]  # type: ignore[union-attr]
    step = s.settings.outer_lr * (1 + s.settings.outer_momentum) / 3  # a third of one learner's delta, with Nesterov
    assert np.allclose(moved, step, atol=1e-6)


def _kinds(conn: Conn) -> list[str]:
    out = []
    while not conn.out.empty():
        frame = conn.out.get_nowait()
        out.append("closed" if frame is None else frame.header.kind + (" (ended)" if frame.header.ended else ""))
    return out


def test_a_learner_that_registers_after_the_end_gets_the_final_model_and_stops() -> None:
    from vtrain.diloco import wire

    s, _ = _syncer(quorum=2)
    assert s.outer is not None
    hello = wire.header("hello", token="t", learner="c", manifest_hash=s.outer.hash)
    early = Conn()
    s._hello(early, hello)
    assert _kinds(early) == ["welcome"]  # training goes on: it trains
    for n in ("a", "b"):
        s.learners[n].done = True
    s._finish()  # a quorum is done: the straggler c got the final model
    late = Conn()  # c restarted (or its TensorFlow took longer than the whole run): back after the end
    s._hello(late, hello)
    assert _kinds(late) == ["welcome (ended)", "final"]  # it must not train on alone, waiting for merges


def test_the_syncers_last_log_line_says_what_happened() -> None:
    from vtrain.diloco.syncer import summary_line

    stats = {"rounds": [20], "merges": 17, "resumed_from": [3], "stale_merged": 2, "stale_dropped": 1,
             "grace_skipped": 4, "max_stall": 0.25, "rejected": 0,
             "learners": {"workerpool1-1": 17, "workerpool1-0": 16}}
    assert summary_line(stats) == (
        "rounds [20] (17 merges, resumed at [3]); stale deltas merged 2, dropped 1; grace skipped 4; "
        "longest stall 0.25 s; refused 0; deltas per learner: workerpool1-0 16, workerpool1-1 17")


def test_exponents_yaml_reads_as_text_are_numbers(tmp_path: Path) -> None:
    # YAML 1.1 reads 7e-1 (no dot) as text; the knob means 0.7, as tuning ranges already read it.
    config = load_config(_job(tmp_path, "diloco: {outer_lr: 7e-1, outer_momentum: 5E-1}"))
    assert config.diloco is not None and (config.diloco.outer_lr, config.diloco.outer_momentum) == (0.7, 0.5)
    with pytest.raises(ConfigError, match=r"diloco.outer_momentum: must be below 1, got 1.5"):
        load_config(_job(tmp_path, "diloco: {outer_momentum: 15e-1}"))
