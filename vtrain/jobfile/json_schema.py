"""The job file's JSON Schema (draft 2020-12), generated from :data:`vtrain.jobfile.schema.JOB_SCHEMA`.

Editors (any YAML language server) complete and check keys with it; `vtrain schema` prints it.
There is no second copy of the shape: the generator walks the schema's node types (`Obj`,
`Str`, `Int`, …), so a key added there appears here with its type, enum and aliases. What the
node's type does not say, the description of each key, its default and examples, the node
declares too (`doc=`, `default=`, `examples=`): this module only walks the nodes, and a test
fails when a key has no description.

The JSON Schema accepts what the checker accepts where JSON Schema can say it (aliases, a
single string for a list, enum words in any case, `-` for `_`, durations like `1h30m`); rules
across keys (machine × accelerator, strategy × cluster) stay with `vtrain validate`.
"""

from __future__ import annotations

from typing import Any

from vtrain.constants import MODELINE, SCHEMA_FILE  # also the trainer selection's: never packaged
from vtrain.durations import PATTERN as _DURATION_PATTERN  # the one grammar
from vtrain.jobfile import nodes, schema
from vtrain.jobfile.yamlpos import PathKey

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# The modeline `vtrain init` writes (MODELINE): yaml-language-server resolves a relative path from the job file.


def _any_case(word: str) -> str:
    """A regex for `word` in any letter case, `-` or `_` where `_` is: what Str.check accepts."""
    out = ""
    for char in word:
        if char.isalpha():
            out += f"[{char.lower()}{char.upper()}]"
        elif char == "_":
            out += "[-_]"
        else:
            out += "\\" + char if not char.isalnum() else char
    return out




def node_schema(node: Any, path: PathKey = ()) -> dict[str, Any]:
    """The JSON Schema of one node of :mod:`vtrain.jobfile.schema`, with its docs (`path`: for errors)."""
    hook = getattr(node, "json_schema", None)
    if callable(hook):  # a node type that knows its own JSON Schema
        out: dict[str, Any] = dict(hook())
    elif isinstance(node, nodes.Obj):
        out = _object(node, path)
    elif isinstance(node, nodes.Str):
        if node.choices:
            out = {
                "type": "string",
                "anyOf": [
                    {"enum": list(node.choices)},
                    {"pattern": "^\\s*(?:" + "|".join(_any_case(c) for c in node.choices) + ")\\s*$"},
                ],
            }
        else:
            out = {"type": "string"}
    elif isinstance(node, nodes.Int):
        number: dict[str, Any] = {"type": "integer"}
        if node.minimum is not None:
            number["minimum"] = node.minimum
        if node.maximum is not None:
            number["maximum"] = node.maximum
        out = {"anyOf": [number, {"type": "string", "pattern": "^\\s*[aA][uU][tT][oO]\\s*$"}]} if node.allow_auto \
            else number
    elif isinstance(node, nodes.Bool):
        out = {"type": "boolean"}
    elif isinstance(node, nodes.Duration):
        out = {
            "anyOf": [
                {"type": "string", "pattern": _DURATION_PATTERN},
                {"type": "number", **({"minimum": 0} if node.zero_ok else {"exclusiveMinimum": 0}),
                 "maximum": nodes.MAX_DURATION_S},
            ]
        }
    elif isinstance(node, nodes.EnvValue):
        out = {"type": ["string", "number"]}
    elif isinstance(node, nodes.ListOf):
        items = node_schema(node.item, (*path, 0))
        array = {"type": "array", "items": items}
        out = {"anyOf": [items, array]} if node.single_ok else array
    elif isinstance(node, nodes.OneOrList):
        items = node_schema(node.item, (*path, 0))
        out = {"anyOf": [items, {"type": "array", "items": items, "minItems": 1}]}
    elif isinstance(node, nodes.MapOf):
        out = {"type": "object", "additionalProperties": node_schema(node.value, (*path, "*"))}
    else:
        raise TypeError(
            f"vtrain.jobfile.json_schema has no JSON Schema for {type(node).__name__} at {'.'.join(map(str, path))}: "
            "give the node type a json_schema() method or a branch in node_schema()"
        )
    return _documented(out, node)


def _documented(out: dict[str, Any], node: Any) -> dict[str, Any]:
    """The node's own doc, default and examples (:class:`vtrain.jobfile.nodes.Declared`) ahead of its shape."""
    head: dict[str, Any] = {"description": node.doc} if getattr(node, "doc", "") else {}
    if getattr(node, "default", None) is not None:
        head["default"] = node.default
    if getattr(node, "examples", ()):
        head["examples"] = list(node.examples)
    return {**head, **out}


def _object(node: nodes.Obj, path: PathKey) -> dict[str, Any]:
    properties = {name: node_schema(child, (*path, name)) for name, child in node.fields.items()}
    dependent: dict[str, Any] = {}
    for alias, name in node.aliases.items():
        canonical = properties[name]
        properties[alias] = {**canonical, "description": f"Alias of `{name}`. " + canonical.get("description", "")}
        dependent[alias] = {"not": {"required": [name]}}  # both spellings at once is ambiguous
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    required = []
    all_of = []
    for name in node.required:
        spellings = [name, *(a for a, n in node.aliases.items() if n == name)]
        if len(spellings) == 1:
            required.append(name)
        else:
            all_of.append({"anyOf": [{"required": [s]} for s in spellings]})
    if required:
        out["required"] = required
    if all_of:
        out["allOf"] = all_of
    if dependent:
        out["dependentSchemas"] = dependent
    return out


def key_paths(node: Any = None, path: PathKey = ()) -> list[PathKey]:
    """Every key path of the job file's schema (pools by name; aliases left out)."""
    node = schema.JOB_SCHEMA if node is None else node
    out: list[PathKey] = []
    if isinstance(node, nodes.Obj):
        for name, child in node.fields.items():
            out.append((*path, name))
            out.extend(key_paths(child, (*path, name)))
    return out


def job_schema() -> dict[str, Any]:
    """The whole job file's JSON Schema, ready for `json.dumps`."""
    body = node_schema(schema.JOB_SCHEMA)
    return {
        "$schema": DIALECT,
        "$id": "urn:vtrain:job-file:1",
        "title": "vtrain job file",
        "description": "One YAML file that vtrain turns into a Vertex AI CustomJob. `vtrain validate` checks "
        "what this schema cannot: rules across keys (machine × accelerator, strategy × cluster, regions).",
        **body,
    }


__all__ = ["MODELINE", "SCHEMA_FILE", "job_schema", "key_paths", "node_schema"]
