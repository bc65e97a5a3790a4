"""The learner's side of the wire: numpy in, numpy out; the TensorFlow glue is :mod:`vtrain.runtime.diloco`.

:class:`Client` keeps the anchor (the global parameters this learner last received, per fragment),
turns local parameters into a delta (anchor − local), sends it, and blocks until the syncer's
update arrives. A heartbeat thread keeps the syncer from taking a learner that is busy (or
waiting) for a hung one. If the stream breaks (the syncer restarted, a network blip), it
reconnects until ``registration_timeout`` and comes back with the syncer's current global model:
:meth:`sync` then returns every fragment, and the caller resets its variables to them.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from vtrain.diloco import codec, wire
from vtrain.diloco.codec import TensorSpec
from vtrain.diloco.settings import Settings
from vtrain.errors import DilocoError

log = logging.getLogger("vtrain.diloco")


class _Broken(Exception):
    """The stream ended or fell silent: reconnect."""


@dataclass
class Traffic:
    """Bytes on the wire (protobuf frames as serialised) and payload bytes of deltas/updates."""

    sent: int = 0
    received: int = 0
    delta_payload: int = 0
    update_payload: int = 0
    syncs: int = 0
    wait_seconds: float = 0.0
    reconnects: int = 0
    extra: dict[str, float] = field(default_factory=dict)


class Client:
    def __init__(self, address: str, token: str, name: str, manifest: Sequence[TensorSpec], settings: Settings,
                 initial: Callable[[], Sequence[np.ndarray]]) -> None:
        self.address, self._token, self.name, self.settings = address, token, name, settings
        self.manifest = list(manifest)
        self.hash = codec.manifest_hash(self.manifest)
        self.fragments = codec.fragments(self.manifest, settings.fragments)
        self._initial = initial
        self.anchor: list[np.ndarray] = []
        self.rounds: list[int] = [0] * len(self.fragments)
        self.traffic = Traffic()
        self._out: queue.Queue[Any] = queue.Queue()
        self._in: queue.Queue[Any] = queue.Queue()
        self._channel: grpc.Channel | None = None
        self._call: Any = None
        self._stop = threading.Event()
        self.stopped = False  # the syncer ended training (a quorum finished): stop at once
        self._holding = False
        # Deltas sent and not merged yet: fragment -> [payload, examples, the round that answers it]
        self._inflight: dict[int, list[Any]] = {}

    # ------------------------------------------------------------------ connection

    def connect(self) -> list[np.ndarray]:
        """Register (sending our initial parameters if the syncer has none); the global model, full."""
        deadline = time.monotonic() + self.settings.registration_timeout
        delay = 0.2
        while True:
            try:
                return self._handshake(deadline)
            except _Broken as err:
                self._teardown()
                if time.monotonic() + delay >= deadline:
                    raise DilocoError(f"{self.name}: no syncer at {self.address} within registration_timeout "
                                      f"({self.settings.registration_timeout:g} s): {err}") from None
                log.info("vtrain.diloco: %s: syncer not reachable (%s); retrying", self.name, err)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _handshake(self, deadline: float) -> list[np.ndarray]:
        self._out, self._in = queue.Queue(), queue.Queue()
        self._stop = threading.Event()
        self._channel = grpc.insecure_channel(self.address, options=wire.GRPC_OPTIONS)
        outbox = self._out

        def requests() -> Any:
            while True:
                frame = outbox.get()
                if frame is None:
                    return
                yield frame

        stub = self._channel.stream_stream(wire.METHOD, request_serializer=wire.Frame.SerializeToString,
                                           response_deserializer=wire.Frame.FromString)
        self._call = stub(requests(), wait_for_ready=True)
        threading.Thread(target=self._reader, args=(self._call, self._in), daemon=True).start()
        self._send(wire.header("hello", token=self._token, learner=self.name, manifest_hash=self.hash,
                               manifest=self.manifest, rounds=self.rounds))
        while True:
            head, payload = self._recv(max(0.1, deadline - time.monotonic()), waiting_for="the syncer's welcome")
            if head.kind == "init_please":
                values = [np.asarray(v, np.float32) for v in self._initial()]
                self._send(wire.header("init", learner=self.name, manifest_hash=self.hash, manifest=self.manifest),
                           codec.pack(values, "none"))
            elif head.kind == "welcome":
                self.anchor = codec.unpack(payload, "none", [self.manifest[i] for f in self.fragments for i in f])
                order = [i for f in self.fragments for i in f]
                self.anchor = [a for _, a in sorted(zip(order, self.anchor, strict=True), key=lambda p: p[0])]
                self.rounds = list(head.rounds)
                threading.Thread(target=self._heartbeats, args=(self._stop, outbox), daemon=True).start()
                log.info("vtrain.diloco: %s joined at rounds %s", self.name, self.rounds)
                if head.ended:  # we came after the end: this is the final model, no step to take
                    self._apply(wire.header("final", rounds=self.rounds), b"")
                return [a.copy() for a in self.anchor]

    def _reader(self, call: Any, inbox: queue.Queue[Any]) -> None:
        assembler = wire.Assembler()
        try:
            for frame in call:
                self.traffic.received += frame.ByteSize()
                message = assembler.feed(frame)
                if message is not None:
                    inbox.put(message)
            inbox.put(("closed", "the syncer ended the stream"))
        except grpc.RpcError as err:
            inbox.put(("closed", f"{err.code().name}: {err.details()}"))
        except Exception as err:  # noqa: BLE001 - any other end of the stream is a break too
            inbox.put(("closed", str(err)))

    def _heartbeats(self, stop: threading.Event, outbox: queue.Queue[Any]) -> None:
        beat = wire.Frame(header=wire.header("heartbeat"))
        while not stop.wait(self.settings.heartbeat):
            self.traffic.sent += beat.ByteSize()
            outbox.put(beat)

    def _send(self, head: Any, payload: bytes = b"") -> None:
        for frame in wire.frames(head, payload):
            self.traffic.sent += frame.ByteSize()
            self._out.put(frame)

    def _recv(self, timeout: float, waiting_for: str) -> tuple[Any, bytes]:
        """The next message that is not a heartbeat. Silence longer than the syncer's heartbeats allow
        (or `timeout`) breaks the connection."""
        end = time.monotonic() + timeout
        silence = max(3 * self.settings.heartbeat, self.settings.straggler_timeout)
        while True:
            wait = min(end, time.monotonic() + silence) - time.monotonic()
            try:
                head, payload = self._in.get(timeout=max(0.0, wait))
            except queue.Empty:
                if time.monotonic() >= end:
                    raise _Broken(f"nothing from the syncer while waiting for {waiting_for}") from None
                raise _Broken(f"the syncer fell silent for {silence:g} s") from None
            if self._screen(head, payload):
                return head, payload

    def _poll(self) -> tuple[Any, bytes] | None:
        """The next message that is not a heartbeat, if one has arrived; never waits."""
        while True:
            try:
                head, payload = self._in.get_nowait()
            except queue.Empty:
                return None
            if self._screen(head, payload):
                return head, payload

    def _screen(self, head: Any, payload: Any) -> bool:
        """False for a heartbeat; raises for the end of the stream or a refusal."""
        if head == "closed":
            raise _Broken(payload)
        if head.kind == "reject":
            self._teardown()
            raise DilocoError(f"{self.name}: the syncer refused us: {head.reason}")
        return bool(head.kind != "heartbeat")

    def _teardown(self) -> None:
        self._stop.set()
        self._out.put(None)
        if self._call is not None:
            self._call.cancel()
        if self._channel is not None:
            self._channel.close()
        self._call = self._channel = None

    def close(self) -> None:
        """Let the syncer go: it exits (and with it, as the chief, the job) once every learner has."""
        self._teardown()

    def _hold_until_exit(self) -> None:
        """Keep the stream (and heartbeats) open after the final model until close() or the process exits.

        The syncer is the job's chief: once it exits, Vertex ends the job and stops the other replicas,
        so it must outlive the learners' last work, above all the first learner writing the model."""
        if not self._holding:
            self._holding = True
            atexit.register(self.close)

    # ------------------------------------------------------------------ syncing

    def delta(self, f: int, local: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [self.anchor[i] - np.asarray(v, np.float32).reshape(self.anchor[i].shape)
                for i, v in zip(self.fragments[f], local, strict=True)]

    def sync(self, f: int, local: Sequence[np.ndarray], examples: float) -> dict[int, list[np.ndarray]]:
        """Send fragment f's delta, wait for the merge; {fragment: new values} (all of them after a rejoin)."""
        self.send(f, local, examples)
        merged, reset = self.collect(wait=True, until=f)
        return {g: [self.anchor[i].copy() for i in self.fragments[g]]
                for g in (range(len(self.fragments)) if reset else merged)}

    def send(self, f: int, local: Sequence[np.ndarray], examples: float) -> None:
        """Send fragment f's delta and return at once; :meth:`collect` applies the merge when it comes.

        One delta per fragment is in flight at a time: the next one must start from the merged model."""
        if f in self._inflight:
            raise RuntimeError(f"fragment {f}'s last delta is still in flight: collect its merge first")
        start = time.monotonic()
        payload = codec.pack(self.delta(f, local), self.settings.compression)
        self._inflight[f] = [payload, float(examples), self.rounds[f] + 1]
        self._send_delta(f, payload, float(examples))
        self.traffic.syncs += 1
        self.traffic.wait_seconds += time.monotonic() - start

    def _send_delta(self, f: int, payload: bytes, examples: float) -> None:
        self._send(wire.header("delta", learner=self.name, manifest_hash=self.hash, fragment=f,
                               base_round=self.rounds[f], examples=examples, codec=self.settings.compression), payload)
        self.traffic.delta_payload += len(payload)

    def collect(self, wait: bool, until: int | None = None) -> tuple[list[int], bool]:
        """Apply what the syncer sent; (fragments whose delta in flight was merged, reset).

        With `wait`, block until fragment `until`'s merge (every one in flight when None) is in;
        without, take only what has already arrived. `reset` is True when the caller must take the
        whole global model as it is (training ended, or we rejoined a syncer that lost our deltas);
        otherwise the merged fragments' anchors are the new global values. If the stream breaks,
        rejoin and, when the syncer came back at exactly our rounds (its checkpoint held them), send
        the deltas in flight again rather than lose the round.
        """
        start = time.monotonic()
        merged: list[int] = []
        reset = False
        for attempt in range(3):
            try:
                while self._inflight and not self.stopped:
                    waiting = wait and (until is None or until in self._inflight)
                    message = self._recv(float("inf"), "the merged update") if waiting else self._poll()
                    if message is None:
                        break
                    self._apply(*message)
                    merged += self._answered(message[0])
                if self.stopped:
                    reset = True
                break
            except _Broken as err:
                rounds, anchor = list(self.rounds), list(self.anchor)
                try:
                    self._rejoin(err)
                except DilocoError:
                    self._inflight.clear()  # the syncer is gone for good: nothing will answer them
                    raise
                if attempt < 2 and self._inflight and self._resumed_where_we_were(rounds, anchor):
                    log.info("vtrain.diloco: %s: the syncer resumed at our rounds %s; sending the delta again",
                             self.name, rounds)
                    for g, entry in self._inflight.items():
                        entry[2] = self.rounds[g] + 1
                        self._send_delta(g, entry[0], entry[1])
                    continue
                reset = True
                break
        if reset:
            self._inflight.clear()
            merged = list(range(len(self.fragments)))
        self.traffic.wait_seconds += time.monotonic() - start
        if (merged or reset) and "first_sync_wait" not in self.traffic.extra:
            # includes waiting for every learner to start: reported apart
            self.traffic.extra["first_sync_wait"] = self.traffic.wait_seconds
        return merged, reset

    def _answered(self, head: Any) -> list[int]:
        """The fragment whose delta in flight this update completes, if it does (a catch-up comes in
        several updates: its base_round says how far it goes, and all of it is read first)."""
        if head.kind != "update" or int(head.fragment) not in self._inflight:
            return []
        g = int(head.fragment)
        entry = self._inflight[g]
        entry[2] = max(entry[2], int(head.base_round))
        if self.rounds[g] < entry[2]:
            return []
        del self._inflight[g]
        return [g]

    def _apply(self, head: Any, payload: bytes) -> None:
        if head.kind == "final":
            log.info("vtrain.diloco: %s: the syncer ended training at rounds %s", self.name, list(head.rounds))
            self.stopped = True
            self._hold_until_exit()
            return
        if head.kind != "update":
            return
        g = int(head.fragment)
        if not head.snapshot and int(head.round) <= self.rounds[g]:
            return  # already applied (an update is never applied twice: the anchor must stay bit-exact)
        specs = [self.manifest[i] for i in self.fragments[g]]
        values = codec.unpack(payload, head.codec, specs)
        self.traffic.update_payload += len(payload)
        for i, v in zip(self.fragments[g], values, strict=True):
            self.anchor[i] = v.astype(np.float32) if head.snapshot else self.anchor[i] + v
        self.rounds[g] = int(head.round)

    def _resumed_where_we_were(self, rounds: list[int], anchor: list[np.ndarray]) -> bool:
        return (not self.stopped and self.rounds == rounds
                and all(np.array_equal(a, b) for a, b in zip(anchor, self.anchor, strict=True)))

    def _rejoin(self, err: BaseException) -> None:
        """Reconnect; the anchor and rounds become the syncer's current global model."""
        log.warning("vtrain.diloco: %s: connection to the syncer lost (%s); rejoining", self.name, err)
        self._teardown()
        self.traffic.reconnects += 1
        self.connect()

    def finish(self, pending: Mapping[int, tuple[Sequence[np.ndarray], float]]) -> list[np.ndarray]:
        """Send the last deltas and `done`; wait for the final global model (all tensors).

        If the syncer restarts meanwhile, rejoin, send the last deltas again if it came back at the
        rounds they were made from (else they are lost, as with any rejoin), and say `done` again; if
        it is gone for good, keep the last global model received.
        """
        if self.stopped:
            return [a.copy() for a in self.anchor]
        if self._inflight:
            raise RuntimeError(f"deltas of fragments {sorted(self._inflight)} are still in flight: collect them first")
        for attempt in range(3):
            rounds, anchor = list(self.rounds), list(self.anchor)
            try:
                for f, (local, examples) in pending.items():
                    self._send_delta(f, codec.pack(self.delta(f, local), self.settings.compression), float(examples))
                self._send(wire.header("done", learner=self.name))
                while True:
                    head, payload = self._recv(float("inf"), "the final model")
                    if head.kind == "final":
                        self._hold_until_exit()
                        return [a.copy() for a in self.anchor]
                    self._apply(head, payload)
            except _Broken as err:
                try:
                    if attempt < 2:
                        self._rejoin(err)
                        if not self._resumed_where_we_were(rounds, anchor):
                            pending = {}  # merged before the syncer went down, or its base is gone: not again
                        continue
                except DilocoError:
                    pass
                log.warning("vtrain.diloco: %s: the syncer went away before the final model (%s); keeping the "
                            "last global model received", self.name, err)
                break
        self._teardown()
        return [a.copy() for a in self.anchor]
