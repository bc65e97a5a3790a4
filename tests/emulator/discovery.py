"""Google's published REST reference for Vertex AI, the aiplatform v1 Discovery document (shipped in
google-api-python-client), as a checker of the emulator's answers: every field is one the schema
declares, with the declared JSON type (int64 as a string, enums as names or numbers, nested objects and
maps checked too), and every path and verb is one the document has."""

from __future__ import annotations

import json
import os
import re
from functools import cache
from typing import Any

import pytest


@cache
def document() -> dict[str, Any]:
    googleapiclient = pytest.importorskip("googleapiclient", reason="google-api-python-client ships the document")
    path = os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents",
                        "aiplatform.v1.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def method(*resources: str, name: str) -> dict[str, Any]:
    node: dict[str, Any] = document()
    for resource in resources:
        node = node["resources"][resource]
    return node["methods"][name]  # type: ignore[no-any-return]


def path_matches(template: str, path: str) -> bool:
    """`v1/{+name}` style templates against a request path (no leading slash)."""
    pattern = re.sub(r"\{\+?[A-Za-z]+\}", "§", template)
    pattern = re.escape(pattern).replace("§", "[^?]+")
    return re.fullmatch(pattern, path) is not None


def problems(value: Any, ref: str, where: str = "") -> list[str]:
    """What in `value` the schema `ref` does not allow ([] when it is true to the document)."""
    return _check(value, {"$ref": ref}, where or ref)


def _check(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    if "$ref" in schema:
        schema = document()["schemas"][schema["$ref"]]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        out: list[str] = []
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                out += _check(item, props[key], f"{where}.{key}")
            elif extra is not None:
                out += _check(item, extra, f"{where}.{key}")
            elif key != "@type":
                out.append(f"{where}.{key}: not a field of the schema")
        return out
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: expected an array"]
        return [p for i, item in enumerate(value) for p in _check(item, schema["items"], f"{where}[{i}]")]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{where}: expected a string, got {value!r}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{where}: {value!r} is not one of {schema['enum'][:8]}"]
        if schema.get("format") in ("int64", "uint64") and not re.fullmatch(r"-?\d+", value):
            return [f"{where}: {value!r} is not an int64"]
        if schema.get("format") == "google-datetime" and not re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", value):
            return [f"{where}: {value!r} is not an RFC 3339 time"]
        return []
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{where}: expected a boolean"]
    if kind in ("integer", "number"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected a number"]
    if kind == "any":
        return []
    return []
