"""Google's published REST reference of Vertex AI, the aiplatform v1 Discovery document that ships in
google-api-python-client, as a test oracle: which method a (verb, path) is, and whether an answer has
the shape that method's response schema declares (no unknown fields, the declared JSON types, enums,
int64 as strings, the resource inside a done Operation by its @type)."""

from __future__ import annotations

import json
import os
import re
from functools import cache
from typing import Any

import pytest


@cache
def document() -> dict[str, Any]:
    googleapiclient = pytest.importorskip("googleapiclient", reason="google-api-python-client (dev extra)")
    path = os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents",
                        "aiplatform.v1.json")  # fmt: skip
    with open(path, encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


@cache
def _methods() -> list[tuple[str, re.Pattern[str], dict[str, Any]]]:
    found: list[tuple[str, re.Pattern[str], dict[str, Any]]] = []

    def walk(resources: dict[str, Any]) -> None:
        for resource in resources.values():
            for method in resource.get("methods", {}).values():
                pattern = re.sub(r"\\\{[^}]+\\\}", "[^/:]+", re.escape(method["flatPath"]))
                found.append((method["httpMethod"], re.compile(f"^/{pattern}$"), method))
            walk(resource.get("resources", {}))

    walk(document()["resources"])
    return found


def method(verb: str, path: str) -> dict[str, Any]:
    """The Discovery method serving `verb path` (path without query), or an AssertionError."""
    for http, pattern, m in _methods():
        if http == verb and pattern.match(path):
            return m
    raise AssertionError(f"no aiplatform v1 method is {verb} {path}")


def check_answer(verb: str, path: str, answer: Any) -> None:
    """`answer` has the shape of the response of the method `verb path` is."""
    m = method(verb, path)
    check(answer, m["response"]["$ref"], m["id"])


def check(value: Any, schema: str | dict[str, Any], where: str) -> None:
    schemas = document()["schemas"]
    spec = schemas[schema] if isinstance(schema, str) else schema
    if "$ref" in spec:
        check(value, spec["$ref"], where)
        return
    kind, fmt = spec.get("type"), spec.get("format")
    if kind == "any":
        return
    if kind == "object":
        assert isinstance(value, dict), f"{where}: {value!r} is not an object"
        props = spec.get("properties")
        for key, item in value.items():
            if props is not None:
                if key == "@type" and isinstance(schema, str) and "Operation" not in schema:
                    continue
                assert key in props, f"{where}: '{key}' is not a field of {schema if isinstance(schema, str) else 'it'}"
                check(item, props[key], f"{where}.{key}")
            elif "additionalProperties" in spec:
                check(item, spec["additionalProperties"], f"{where}[{key}]")
        if schema == "GoogleLongrunningOperation" and "response" in value:
            inner = dict(value["response"])
            kind_url = inner.pop("@type")
            name = kind_url.rsplit("/", 1)[-1]
            if name.startswith("google.cloud.aiplatform.v1."):
                check(inner, "GoogleCloudAiplatformV1" + name.rsplit(".", 1)[-1], f"{where}.response")
            else:
                assert name == "google.protobuf.Empty" and not inner, f"{where}.response: {value['response']}"
        return
    if kind == "array":
        assert isinstance(value, list), f"{where}: {value!r} is not an array"
        for i, item in enumerate(value):
            check(item, spec["items"], f"{where}[{i}]")
        return
    if kind == "string":
        assert isinstance(value, str), f"{where}: {value!r} is not a string"
        if fmt in ("int64", "uint64"):
            assert re.fullmatch(r"-?\d+", value), f"{where}: {value!r} is not an int64 string"
        if fmt == "google-datetime":
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", value), f"{where}: {value!r}"
        if "enum" in spec:
            assert value in spec["enum"], f"{where}: {value!r} is not one of {spec['enum']}"
        return
    if kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r} is not an integer"
        return
    if kind == "number":
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{where}: {value!r}"
        return
    if kind == "boolean":
        assert isinstance(value, bool), f"{where}: {value!r} is not a boolean"
        return
    raise AssertionError(f"{where}: unknown Discovery type {kind}")


def output_only(schema: str) -> set[str]:
    """The fields the reference marks "Output only." in `schema` (GoogleCloudAiplatformV1 + name)."""
    props = document()["schemas"]["GoogleCloudAiplatformV1" + schema]["properties"]
    return {k for k, v in props.items() if "Output only" in v.get("description", "")}
