"""Layouts for the usual ways to split a model over a DTensor mesh, and the input each client feeds.

Mesh dimensions by convention: ``batch`` (data parallel: inputs split on their first axis, weights
replicated, gradients averaged by DTensor's all-reduce) and ``model`` (tensor parallel, Megatron
style: the first dense kernel of a block split by columns, the second by rows, so the hidden
activation stays split and one all-reduce per block joins the partial sums). A layout helper asked for
a dimension the mesh lacks leaves that axis whole, so one trainer runs on ``batch=4`` alone too.

Variables are made on the host and packed from the pieces each client holds (every client computes
the same full value from the same seed and keeps only its devices' slices): measured on TF 2.21,
``stateless_random_*`` under ``call_with_layout`` fails on a sharded layout, while packing works for
every layout. Sharded checkpoints are in :mod:`.dtensor_checkpoint`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

BATCH = "batch"
MODEL = "model"


def _dt() -> Any:
    from tensorflow.experimental import dtensor

    return dtensor


def _axis(mesh: Any, name: str) -> str:
    return name if name in mesh.dim_names and mesh.dim_size(name) > 1 else _dt().UNSHARDED


def replicated(mesh: Any, rank: int) -> Any:
    """Every device holds the whole tensor."""
    return _dt().Layout.replicated(mesh, rank)


def batch_sharded(mesh: Any, rank: int, dim: str = BATCH) -> Any:
    """Inputs and activations: the first axis split over `dim`, the rest whole (data parallel)."""
    dt = _dt()
    return dt.Layout([_axis(mesh, dim)] + [dt.UNSHARDED] * (rank - 1), mesh)


def column_sharded(mesh: Any, dim: str = MODEL) -> Any:
    """A dense kernel [in, out] split by output columns over `dim`; its bias: :func:`bias_sharded`."""
    return _dt().Layout([_dt().UNSHARDED, _axis(mesh, dim)], mesh)


def bias_sharded(mesh: Any, dim: str = MODEL) -> Any:
    """The bias [out] of a column-sharded kernel."""
    return _dt().Layout([_axis(mesh, dim)], mesh)


def row_sharded(mesh: Any, dim: str = MODEL) -> Any:
    """A dense kernel [in, out] split by input rows over `dim`: its output is a partial sum DTensor
    all-reduces over `dim`; its bias stays :func:`replicated`."""
    return _dt().Layout([_axis(mesh, dim), _dt().UNSHARDED], mesh)


def embedding_sharded(mesh: Any, dim: str = MODEL) -> Any:
    """An embedding table [vocab, width] split along the width: a lookup stays local to each device,
    and the looked-up vectors come out split the same way (feed them to a row-sharded kernel)."""
    return _dt().Layout([_dt().UNSHARDED, _axis(mesh, dim)], mesh)


def activation_sharded(mesh: Any, rank: int = 2, batch: str = BATCH, dim: str = MODEL) -> Any:
    """The hidden activation between a column- and a row-sharded kernel: [batch, ..., model]."""
    dt = _dt()
    return dt.Layout([_axis(mesh, batch)] + [dt.UNSHARDED] * (rank - 2) + [_axis(mesh, dim)], mesh)


# --------------------------------------------------------------------------- the pieces of this client


def _piece(value: Any, layout: Any, location: dict[str, int]) -> Any:
    """The slice of `value` the device at mesh `location` holds under `layout`."""
    index = []
    for axis, spec in enumerate(layout.sharding_specs):
        if spec == _dt().UNSHARDED:
            index.append(slice(None))
            continue
        parts = layout.mesh.dim_size(spec)
        if value.shape[axis] % parts:
            raise ValueError(f"axis {axis} of a {tuple(value.shape)} tensor does not split into {parts} ({spec!r})")
        size = value.shape[axis] // parts
        index.append(slice(location[spec] * size, (location[spec] + 1) * size))
    return value[tuple(index)]


def pack_full(value: Any, layout: Any) -> Any:
    """A DTensor with `layout` from the full host value, each client packing only its own devices' slices.

    Every client must pass the same value (same seed, same data)."""
    import numpy as np

    full = np.asarray(value)
    pieces = [np.ascontiguousarray(_piece(full, layout, loc)) for loc in layout.mesh.local_device_locations()]
    return _dt().pack(pieces, layout)


def variable(value: Any, layout: Any, name: str | None = None, trainable: bool = True) -> Any:
    """A DVariable holding `value` (numpy, the same on every client) split as `layout` says."""
    return _dt().DVariable(pack_full(value, layout), name=name, trainable=trainable)


def local_shards(value: Any) -> list[Any]:
    """The numpy pieces this client's devices hold, in local-device order (DVariables are read first)."""
    tensor = value.read_value() if hasattr(value, "read_value") else value
    return [piece.numpy() for piece in _dt().unpack(tensor)]


def device_bytes(variables: Iterable[Any]) -> dict[str, int]:
    """Bytes of weights each local device holds: what tensor parallelism saves per accelerator."""
    out: dict[str, int] = {}
    for v in variables:
        tensor = v.read_value() if hasattr(v, "read_value") else v
        for piece in _dt().unpack(tensor):
            out[piece.device] = out.get(piece.device, 0) + int(piece.numpy().nbytes)
    return out


def gather(value: Any) -> Any:
    """The full value as numpy on every client (a collective: all clients must call it)."""
    tensor = value.read_value() if hasattr(value, "read_value") else value
    layout = _dt().fetch_layout(tensor)
    whole = _dt().relayout(tensor, replicated(layout.mesh, len(tensor.shape)))
    return _dt().unpack(whole)[0].numpy()


# --------------------------------------------------------------------------- input: each client its part


def client_rows(mesh: Any, global_batch: int, dim: str = BATCH) -> tuple[int, int]:
    """[start, stop) of the global batch this client feeds: the rows its devices hold on `dim`.

    With `create_distributed_mesh`'s order (the first dimension outermost), a client's devices hold
    one contiguous run of rows; with no `dim` in the mesh every client feeds the whole batch."""
    axis = _axis(mesh, dim)
    if axis == _dt().UNSHARDED:
        return 0, global_batch
    parts = mesh.dim_size(axis)
    if global_batch % parts:
        raise ValueError(f"global batch {global_batch} does not split over {parts} {axis!r} shards")
    per = global_batch // parts
    held = sorted({loc[axis] for loc in mesh.local_device_locations()})
    if held != list(range(held[0], held[-1] + 1)):
        raise ValueError(f"this client's devices hold {axis!r} shards {held}, not one contiguous run")
    return held[0] * per, (held[-1] + 1) * per


def pack_batch(local: Any, mesh: Any, global_batch: int, dim: str = BATCH) -> Any:
    """A batch-sharded DTensor of the global batch from this client's rows (``client_rows``) only."""
    import numpy as np

    rows = np.asarray(local)
    start, stop = client_rows(mesh, global_batch, dim)
    if rows.shape[0] != stop - start:
        raise ValueError(f"this client feeds rows [{start}, {stop}) of the global batch, got {rows.shape[0]} rows")
    layout = batch_sharded(mesh, rows.ndim, dim)
    axis = _axis(mesh, dim)
    per = global_batch if axis == _dt().UNSHARDED else global_batch // mesh.dim_size(axis)
    pieces = []
    for loc in mesh.local_device_locations():
        first = 0 if axis == _dt().UNSHARDED else loc[axis] * per - start
        pieces.append(np.ascontiguousarray(rows[first : first + per]))
    return _dt().pack(pieces, layout)


__all__ = [
    "BATCH",
    "MODEL",
    "activation_sharded",
    "batch_sharded",
    "bias_sharded",
    "client_rows",
    "column_sharded",
    "device_bytes",
    "embedding_sharded",
    "gather",
    "local_shards",
    "pack_batch",
    "pack_full",
    "replicated",
    "row_sharded",
    "variable",
]
