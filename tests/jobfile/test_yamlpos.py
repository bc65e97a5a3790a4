"""YAML with positions: every key and value located, duplicates and unsafe tags refused."""

from __future__ import annotations

import pytest
import yaml

from vtrain.jobfile.yamlpos import Position, Positions, format_path, iter_paths, load_yaml

TEXT = """\
name: demo
cluster:
  chief:
    machine_type: n1-standard-4
    args: [--a, --b]
  workers: {replicas: 2}
labels:
  - x
  - y
"""


def test_data_is_plain_and_nothing_is_wrong() -> None:
    data, _, problems = load_yaml(TEXT, "job.yaml")
    assert problems == []
    assert data == {
        "name": "demo",
        "cluster": {"chief": {"machine_type": "n1-standard-4", "args": ["--a", "--b"]}, "workers": {"replicas": 2}},
        "labels": ["x", "y"],
    }


@pytest.mark.parametrize(
    ("path", "key", "expected"),
    [
        (("name",), False, (1, 7)),
        (("name",), True, (1, 1)),
        (("cluster", "chief", "machine_type"), False, (4, 19)),
        (("cluster", "chief", "machine_type"), True, (4, 5)),
        (("cluster", "chief", "args", 1), False, (5, 17)),
        (("cluster", "workers"), False, (6, 12)),  # flow mapping: where the value starts
        (("cluster", "workers", "replicas"), False, (6, 23)),
        (("labels", 1), False, (9, 5)),
        # block collections are located at their key, not at their first child
        (("cluster",), False, (2, 1)),
        (("cluster", "chief"), False, (3, 3)),
        (("labels",), False, (7, 1)),
        # keys never written fall back to the nearest ancestor that was
        (("cluster", "chief", "accelerator"), False, (3, 3)),
        (("cluster", "workers", "machine_type"), False, (6, 12)),
        (("nothing", "here"), False, (1, 1)),
    ],
)
def test_positions(path: tuple[str | int, ...], key: bool, expected: tuple[int, int]) -> None:
    _, positions, _ = load_yaml(TEXT, "job.yaml")
    pos = positions.of(path, key=key)
    assert (pos.file, pos.line, pos.column) == ("job.yaml", *expected)


def test_duplicate_keys_keep_the_first_and_say_where_it_was() -> None:
    data, _, problems = load_yaml("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n", "f.yaml")
    assert data == {"a": 1, "b": {"c": 1}}
    assert [(p.path, p.line, p.column, p.message) for p in problems] == [
        ("b.c", 4, 3, "duplicate key 'c' (first defined on line 3); keep only one"),
        ("a", 5, 1, "duplicate key 'a' (first defined on line 1); keep only one"),
    ]


def test_keys_that_are_collections_are_refused() -> None:
    data, _, problems = load_yaml("? [a, b]\n: 1\nok: 2\n", "f.yaml")
    assert data == {"ok": 2}
    assert [(p.path, p.line, p.message) for p in problems] == [("", 1, "mapping keys must be plain scalars")]


def test_scalar_keys_become_text() -> None:
    data, _, problems = load_yaml("1: one\ntrue: yes\n01: x\n", "f.yaml")
    assert (data, problems) == ({"1": "one", "true": True, "01": "x"}, [])  # the key as written, not str(True)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_documents(text: str) -> None:
    data, positions, problems = load_yaml(text, "f.yaml")
    assert (data, problems) == (None, [])
    assert positions.of(()) == Position("f.yaml", 1, 1)


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("a:\n\tb: 1\n", 2, 1, "tab character found; YAML indentation must use spaces, not tabs"),
        ("a: [1, 2\nb: 3\n", 2, 2, "YAML syntax error: expected ',' or ']'"),
        ("a: 'open\n", 2, 1, "YAML syntax error: found unexpected end of stream (while scanning a quoted scalar)"),
        ("a: 1\n b: 2\n", 2, 3, "YAML syntax error: mapping values are not allowed here"),
        ("a: 1\n---\nb: 2\n", 2, 1, "YAML syntax error: expected a single document in the stream but found another"),
        ("a: *nowhere\n", 1, 4, "YAML syntax error: found undefined alias 'nowhere'"),
    ],
)
def test_syntax_errors_are_one_located_problem(text: str, line: int, column: int, fragment: str) -> None:
    data, _, problems = load_yaml(text, "f.yaml")
    (problem,) = problems
    assert data is None
    assert (problem.file, problem.path, problem.line, problem.column) == ("f.yaml", "", line, column)
    assert problem.message.startswith(fragment), problem.message


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("a: !!python/object/apply:os.system ['echo pwned']\n", "!!python/object/apply:os.system"),
        ("a: !!set {x, y}\n", "!!set"),
        ("a: !custom {x: 1}\n", "!custom"),
    ],
)
def test_collection_tags_are_refused_not_run(text: str, tag: str) -> None:
    _, _, problems = load_yaml(text, "f.yaml")
    assert [(p.path, p.line, p.message) for p in problems] == [
        ("a", 1, f"unsupported YAML tag '{tag}'; use plain mappings, lists and values")]


def test_scalar_python_tags_are_a_syntax_error() -> None:
    data, _, problems = load_yaml("a: !!python/name:os.system ''\n", "f.yaml")
    (problem,) = problems
    assert data is None and problem.line == 1
    assert "could not determine a constructor for the tag 'tag:yaml.org,2002:python/name:os.system'" in (
        problem.message)


def test_a_document_marker_alone_is_empty() -> None:
    data, _, problems = load_yaml("---\n", "f.yaml")
    assert (data, problems) == (None, [])


def test_anchors_and_merge_keys_override_without_duplicate_errors() -> None:
    text = "base: &b {machine_type: n1-standard-4, replicas: 1}\nchief:\n  <<: *b\n  replicas: 3\n"
    data, positions, problems = load_yaml(text, "f.yaml")
    assert problems == []
    assert data["chief"] == {"machine_type": "n1-standard-4", "replicas": 3}
    assert positions.of(("chief", "replicas")).line == 4
    assert positions.of(("chief", "machine_type")).line == 1  # where the merged value is written


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("c:\n  a: 1\n  <<: {a: 2, b: 2}\n", {"a": 1, "b": 2}),  # own keys beat merged ones
        ("c:\n  <<: [{a: 1}, {a: 2, b: 2}]\n", {"a": 1, "b": 2}),  # earlier merges beat later ones
    ],
)
def test_merge_semantics_match_pyyaml(text: str, expected: dict[str, int]) -> None:
    data, _, problems = load_yaml(text, "f.yaml")
    assert problems == [] and data == {"c": expected} == yaml.safe_load(text)


def test_a_key_written_twice_next_to_a_merge_is_still_a_duplicate() -> None:
    _, _, problems = load_yaml("c:\n  a: 1\n  <<: {a: 2}\n  a: 3\n", "f.yaml")
    assert [(p.path, p.line) for p in problems] == [("c.a", 4)]


@pytest.mark.parametrize(
    ("path", "text"),
    [((), ""), (("a",), "a"), (("a", "b"), "a.b"), (("a", 0, "b"), "a[0].b"), (("a", 1, 2), "a[1][2]")],
)
def test_format_path(path: tuple[str | int, ...], text: str) -> None:
    assert format_path(path) == text


def test_alias_makes_positions_findable_under_the_canonical_name() -> None:
    _, positions, _ = load_yaml("cluster:\n  ps:\n    replicas: 2\n", "f.yaml")
    positions.alias(("cluster", "ps"), ("cluster", "parameter_servers"))
    assert positions.of(("cluster", "parameter_servers", "replicas")).line == 3
    assert positions.of(("cluster", "parameter_servers"), key=True).line == 2


def test_of_without_any_position_uses_the_default() -> None:
    positions = Positions(default=Position("f.yaml"))
    assert positions.of(("a", "b")) == Position("f.yaml")
    assert positions.of(("a",), key=True) == Position("f.yaml")


def test_iter_paths() -> None:
    assert list(iter_paths({"a": [1, {"b": 2}], "c": 3})) == [
        (), ("a",), ("a", 0), ("a", 1), ("a", 1, "b"), ("c",)
    ]


def test_deep_nesting_is_a_problem_not_a_recursion_error() -> None:
    data, _, problems = load_yaml("name: " + "[" * 5000 + "]" * 5000 + "\n", "job.yaml")
    assert data is None
    assert [p.message for p in problems] == ["the YAML is nested too deeply"]


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    data, _, problems = load_yaml("\n".join(lines) + "\n", "job.yaml")
    assert data is None
    assert len(problems) == 1 and "has or expands to more than 20,000 values" in problems[0].message
