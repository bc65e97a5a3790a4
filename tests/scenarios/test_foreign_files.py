"""Issue 30, classes 3 and 4: files someone else wrote, through the real CLI (`vtrain estimate --from-run`,
`vtrain timeline`): read bounded (regular files, size, depth), every number checked; a wrong one is one
line naming the file and the field, exit 2, no traceback, no content of the file repeated."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.estimate.test_from_run import job, make_run  # noqa: F401 (job: a fixture)
from tests.view.test_timeline import RESULT
from vtrain.cli import cli

MAX_RESULT_BYTES = 16 * 1024 * 1024  # vtrain.local.resultfile's cap (not imported: the test runs on older code too)

DEEP = "[" * 100_000 + "]" * 100_000
SECRET = "s3cr3t-line-from-the-file"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def one_line(result: Result) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output and SECRET not in result.output and "\x1b" not in result.output
    return lines[0]


# ---- estimate --from-run -----------------------------------------------------------------------------
BAD_PROFILES: dict[str, tuple[dict[str, Any], str]] = {
    "infinite step time": ({"steps": {"count": 40, "timed": 36, "median_s": math.inf, "p90_s": 0.1}},
                           "steps.median_s is inf; allowed: a finite number ≥ 0"),
    "NaN step time": ({"steps": {"count": 40, "timed": 36, "median_s": math.nan, "p90_s": 0.1}},
                      "steps.median_s is NaN; allowed: a finite number ≥ 0"),
    "boolean parameter count": ({"count_params": True}, "count_params is a boolean (true); allowed: a whole number"),
    "negative gradient bytes": ({"gradient_bytes": -644}, "gradient_bytes is -644; allowed: a whole number ≥ 0"),
    "negative peak": ({"memory": {"kind": "rss", "peak_bytes": -1}}, "memory.peak_bytes is -1"),
    "negative slot bytes": ({"optimizer": {"name": "SGD", "slot_bytes": -8, "slots_per_param": 1.0}},
                            "optimizer.slot_bytes is -8"),
    "text for a mapping": ({"device": "cpu"}, "device is a string; allowed: an object"),
    "text for the optimizer": ({"optimizer": "adam"}, "optimizer is a string; allowed: an object"),
    "array for parameters": ({"parameters": [1, 2]}, "parameters is an array; allowed: an object"),
    "dtype row as number": ({"parameters": {"by_dtype": {"float32": 7}}},
                            "parameters.by_dtype.float32 is 7; allowed: an object"),
    "infinite flops": ({"flops": {"per_step": math.inf}}, "flops.per_step is inf"),
    "share above one": ({"steps": {"input_wait_share": 7.0}}, "steps.input_wait_share is 7.0; allowed: a finite "
                                                              "number from 0 to 1"),
}


@pytest.mark.parametrize("name", list(BAD_PROFILES))
def test_estimate_refuses_a_profile_with_a_wrong_field_naming_file_and_field(name: str, job: Path) -> None:  # noqa: F811
    over, said = BAD_PROFILES[name]
    folder = make_run(job, replicas=1, **over)
    done = invoke("estimate", str(job), "--from-run", str(folder))
    assert done.exit_code == 2, done.output
    assert one_line(done).startswith(f"error: --from-run: {folder / 'profile' / 'chief-0.json'}: unreadable: {said}")


@pytest.mark.parametrize(("content", "said"), [
    (DEEP, "JSON nested deeper than 100 levels"),
    (f'"{SECRET}"', "the document is a string; allowed: an object"),
    (b"\xff\xd8\xff\xe0" + SECRET.encode(), "not UTF-8 text (a binary file?): byte 0 cannot be decoded"),
])  # fmt: skip
def test_estimate_leaves_out_what_is_no_profile_and_says_so(content: str | bytes, said: str, job: Path) -> None:  # noqa: F811
    folder = make_run(job, replicas=2)
    bad = folder / "profile" / "worker-0.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    done = invoke("estimate", str(job), "--from-run", str(folder), "-o", "json")
    assert done.exit_code == 0, done.output
    warnings = json.loads(done.stdout)["from_run"]["warnings"]
    assert [w for w in warnings if str(bad) in w] == [f"{bad}: unreadable: {said}: not a profile; left out"]
    strict = invoke("estimate", str(job), "--from-run", str(folder), "--strict")
    assert strict.exit_code == 2 and said in one_line(strict) and one_line(strict).endswith("(--strict)")
    (folder / "profile" / "chief-0.json").write_text(DEEP)
    none = invoke("estimate", str(job), "--from-run", str(folder))
    assert none.exit_code == 2 and "no readable profile" in one_line(none)


def test_estimate_states_the_fallback_for_an_unreadable_result_json(job: Path) -> None:  # noqa: F811
    folder = make_run(job, replicas=1)
    (folder / "result.json").write_text(DEEP)
    done = invoke("estimate", str(job), "--from-run", str(folder), "-o", "json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["from_run"]["warnings"] == [
        f"{folder / 'result.json'}: unreadable: JSON nested deeper than 100 levels; the run is taken as one that "
        "has not ended"]
    assert invoke("estimate", str(job), "--from-run", str(folder), "--strict").exit_code == 2


# ---- vtrain timeline ---------------------------------------------------------------------------------
def _with(path: str, value: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(json.dumps(RESULT))
    *parents, last = path.split(".")
    node: Any = result
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return result


WRONG_RESULTS: dict[str, tuple[bytes | None, str]] = {
    "missing": (None, ""),
    "not an object": (b'["' + SECRET.encode() + b'"]', "the document is an array; allowed: an object"),
    "wrong type": (json.dumps(_with("processes.0.start", "soon")).encode(),
                   "processes[0].start is a string; allowed: a finite number"),
    "wrong container": (json.dumps(_with("steps", [1, 2])).encode(), "steps is an array; allowed: an object"),
    "bad point": (json.dumps(_with("steps.chief-0.1", [4.9])).encode(),
                  'steps."chief-0"[1] is an array; allowed: an array [seconds, step]'),
    "NaN": (json.dumps(_with("restarts.events.1.at", math.nan)).encode(),
            "restarts.events[1].at is NaN; allowed: a finite number"),
    "infinite": (json.dumps(_with("seconds", math.inf)).encode(), "seconds is inf; allowed: a finite number ≥ 0"),
    "huge": (b" " * (MAX_RESULT_BYTES + 1), f"it is larger than {MAX_RESULT_BYTES:,} bytes"),
    "deep": (DEEP.encode(), "JSON nested deeper than 100 levels"),
    "binary": (b"\x00\x01\x02\xff" + SECRET.encode(), "not UTF-8 text (a binary file?): byte 3 cannot be decoded"),
}


@pytest.mark.parametrize("name", list(WRONG_RESULTS))
def test_timeline_refuses_a_wrong_result_json_in_one_line(name: str, tmp_path: Path) -> None:
    content, said = WRONG_RESULTS[name]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    if content is not None:
        (run_dir / "result.json").write_bytes(content)
    done = invoke("timeline", str(run_dir))
    assert done.exit_code == 2, done.output
    line = one_line(done)
    if content is None:
        assert line.startswith(f"error: {run_dir} is no local run's folder: it has no result.json")
    else:
        assert line == (f"error: {run_dir / 'result.json'}: unreadable: {said}; a local run's folder has the "
                        "result.json `vtrain local` wrote")
    assert not (run_dir / "timeline.html").exists()  # nothing half-done


def test_a_replica_name_cannot_inject_markup_into_the_page(tmp_path: Path) -> None:
    from vtrain.view.timeline import html, timeline

    evil = '<script>alert(1)</script>$x$'
    result = _with("processes.0.replica", evil)
    result["replicas"] = {evil: 1}
    page = html(timeline(result))
    assert "<script" not in page and "&lt;script&gt;" in page
