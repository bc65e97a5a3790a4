"""`readMask` of the list calls: a FieldMask (https://protobuf.dev/reference/protobuf/google.protobuf/#field-mask),
"Mask specifying which fields to read" (ListCustomJobsRequest / ListHyperparameterTuningJobsRequest).

In REST it is one comma-separated query value of field paths, camelCase as the JSON form writes
them (`displayName,jobSpec.workerPoolSpecs`; snake_case is taken too). A path the resource does
not have is a 400, as protobuf's own `FieldMask.IsValidForDescriptor` judges it; the answer then
holds the masked fields only.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.field_mask_pb2 import FieldMask

from vtrain.emulator.errors import invalid_argument

MAX_MASK = 4000


def read_mask(query: dict[str, str], descriptor: Any) -> FieldMask | None:
    """The list call's readMask (None: none given), checked against the resource's fields."""
    text = query.get("readMask", query.get("read_mask", ""))
    if not text.strip():
        return None
    if len(text) > MAX_MASK:
        raise invalid_argument(f"Invalid field mask: longer than {MAX_MASK} characters.")
    mask = FieldMask()
    paths = [p.strip() for p in text.split(",")]
    try:
        mask.FromJsonString(",".join(p for p in paths if "_" not in p))
    except ValueError:
        raise invalid_argument(f"Invalid field mask '{text[:200]}'.") from None
    mask.paths.extend(p for p in paths if "_" in p)  # already snake_case
    if not all(paths) or not mask.IsValidForDescriptor(descriptor):
        bad = next((p for p in mask.paths if not FieldMask(paths=[p]).IsValidForDescriptor(descriptor)), text)
        raise invalid_argument(f"Invalid field mask path '{bad[:200]}' for {descriptor.name}.",
                               [("read_mask", f"'{bad[:200]}' is not a field of {descriptor.name}.")])
    return mask


def masked(message: Any, mask: FieldMask | None) -> Any:
    """`message` with only the fields `mask` names (itself when there is no mask)."""
    if mask is None:
        return message
    out = type(message)()
    mask.MergeMessage(message, out)
    return out


__all__ = ["read_mask", "masked"]
