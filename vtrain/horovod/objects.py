"""Python objects over the ring: Horovod's broadcast_object and allgather_object.

An object is serialized once (cloudpickle where it is installed, as Horovod does, so a lambda or a class
defined in the script travels; the standard pickle otherwise) and its bytes travel in chunks of
:data:`CHUNK` bytes, viewed as int64 so nothing is widened on the way, into one buffer per sender: the
memory a transfer takes is about the serialized object, on the sender and on each receiver, whatever its
size. A sender that cannot serialize its object says so to every rank instead of leaving them waiting: all
ranks raise the same error. A ring of one serializes too, so what fails with two replicas fails with one.
"""

from __future__ import annotations

import importlib
import importlib.util
import pickle
from typing import Any

from vtrain.horovod import agreement
from vtrain.horovod.agreement import Descriptor

#: Bytes per collective while an object travels (a multiple of 8).
CHUNK = 4 << 20
_ELEMENTS = CHUNK // 8


def _dumps(obj: Any) -> bytes:
    try:
        cloudpickle = importlib.import_module("cloudpickle")
    except ImportError:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return bytes(cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _serialized(obj: Any) -> tuple[bytes, str]:
    """The object's bytes, or b'' and why it cannot be serialized."""
    try:
        return _dumps(obj), ""
    except Exception as err:  # noqa: BLE001 - whatever pickling raises, every rank must hear of it
        hint = "" if _has_cloudpickle() else " (install cloudpickle to send lambdas and local classes, as Horovod does)"
        return b"", f"{type(err).__name__}: {err}{hint}"


def _has_cloudpickle() -> bool:
    return importlib.util.find_spec("cloudpickle") is not None


def _loads(data: bytes | bytearray | memoryview) -> Any:
    return pickle.loads(data)  # noqa: S301 - bytes from this same job's ranks


def _refused(call: str, ranks: list[int], reasons: list[str]) -> pickle.PicklingError:
    said = "; ".join(f"rank {r}: {why}" for r, why in zip(ranks, reasons, strict=True))
    return pickle.PicklingError(f"vtrain.horovod: {call}: the object could not be serialized, so no rank received "
                                f"it: {said}")


def _words(data: bytes | bytearray | memoryview, start: int, stop: int) -> Any:
    """data[start:stop] as int64 numbers, zero-padded to cover stop - start bytes even where data is shorter
    (one copy of the chunk)."""
    import numpy as np

    words = np.zeros((stop - start + 7) // 8, dtype=np.int64)
    piece = memoryview(data)[start:min(stop, len(data))]
    words.view(np.uint8)[:len(piece)] = np.frombuffer(piece, dtype=np.uint8)
    return words


def _write(buffer: bytearray, start: int, words: Any) -> None:
    import numpy as np

    raw = np.asarray(words, dtype=np.int64).view(np.uint8)
    stop = min(len(buffer), start + len(raw))
    buffer[start:stop] = raw[:stop - start].tobytes()


def broadcast_object(obj: Any, root_rank: int = 0, session: Any = None, name: str | None = None,
                     process_set: Any = None) -> Any:
    """Rank root_rank's Python object on every rank (the root keeps its own object)."""
    import tensorflow as tf

    from vtrain.horovod.collectives import _broadcast_one
    from vtrain.horovod.ops import agree, check_process_set, check_root
    from vtrain.horovod.ring import rank, size

    check_process_set(process_set)
    root = check_root(root_rank, "hvd.broadcast_object")
    mine = rank() == root
    data, why = _serialized(obj) if mine else (b"", "")
    if size() == 1:
        if why:
            raise _refused("hvd.broadcast_object", [root], [why])
        return obj
    reason = why.encode()
    header = tf.constant([len(data), len(reason)] if mine else [0, 0], tf.int64)
    agree("hvd.broadcast_object", Descriptor(agreement.OBJECT, [header], root=root, name=name))
    length, reason_length = (int(v) for v in _broadcast_one(header, root).numpy())
    if reason_length:
        text = bytearray(reason_length)
        _write(text, 0, _broadcast_one(tf.constant(_words(reason, 0, reason_length)), root).numpy())
        raise _refused("hvd.broadcast_object", [root], [text.decode(errors="replace")])
    received = None if mine else bytearray(length)
    for start in range(0, length, CHUNK):
        stop = min(length, start + CHUNK)
        if mine:
            _broadcast_one(tf.constant(_words(data, start, stop)), root)
        else:
            assert received is not None
            chunk = _broadcast_one(tf.zeros([(stop - start + 7) // 8], tf.int64), root)
            _write(received, start, chunk.numpy())
            del chunk
    return obj if mine else _loads(received or b"")


def allgather_object(obj: Any, session: Any = None, name: str | None = None, process_set: Any = None) -> list[Any]:
    """Every rank's Python object, in rank order (each deserialized from the bytes it sent, as Horovod)."""
    import tensorflow as tf

    from vtrain.horovod.ops import agree, check_process_set, gather, rank_order
    from vtrain.horovod.ring import size

    check_process_set(process_set)
    data, why = _serialized(obj)
    n = size()
    if n == 1:
        if why:
            raise _refused("hvd.allgather_object", [0], [why])
        return [_loads(data)]
    reason = why.encode()
    header = tf.constant([[len(data), len(reason)]], tf.int64)
    agreed = agree("hvd.allgather_object", Descriptor(agreement.OBJECT, [header[0]], name=name))
    order = rank_order(agreed.table).numpy().tolist()  # rank r's row in the gather
    headers = gather(header).numpy()
    lengths = [int(headers[order[r]][0]) for r in range(n)]
    reasons = [int(headers[order[r]][1]) for r in range(n)]
    longest = max(max(lengths), max(reasons))
    if any(reasons):
        texts = _gather_bytes(reason, max(reasons), order)
        failed = [r for r in range(n) if reasons[r]]
        raise _refused("hvd.allgather_object", failed, [bytes(texts[r][:reasons[r]]).decode(errors="replace")
                                                       for r in failed])
    buffers = _gather_bytes(data, longest, order, lengths)
    del data
    out = []
    for r in range(n):
        out.append(_loads(memoryview(buffers[r])[:lengths[r]]))
        buffers[r] = bytearray()
    return out


def _gather_bytes(data: bytes, longest: int, order: list[int], lengths: list[int] | None = None) -> list[bytearray]:
    """Every rank's bytes (each up to `longest`), chunk by chunk, in rank order."""
    import tensorflow as tf

    from vtrain.horovod.ops import gather

    n = len(order)
    buffers = [bytearray(lengths[r] if lengths else longest) for r in range(n)]
    for start in range(0, longest, CHUNK):
        stop = min(longest, start + CHUNK)
        words = _words(data, start, stop)
        rows = tf.reshape(gather(tf.constant(words)), [n, len(words)]).numpy()
        for r in range(n):
            if start < len(buffers[r]):
                _write(buffers[r], start, rows[order[r]])
        del rows
    return buffers
