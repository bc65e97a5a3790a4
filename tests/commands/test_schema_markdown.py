"""The manual's job-file reference table (docs/reference/job-file.md) is `vtrain schema --markdown`'s output,
between its markers.
Regenerate it after an intended change with `UPDATE_GOLDEN=1` (as the golden request files)."""

from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from tests.conftest import REPO
from vtrain.cli import cli
from vtrain.jobfile.json_schema import key_paths
from vtrain.jobfile.reference import BEGIN, END

PAGE = REPO / "docs" / "reference" / "job-file.md"


def _generated() -> str:
    result = CliRunner().invoke(cli, ["schema", "--markdown"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_docs_table_is_the_generated_one() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"{PAGE} needs one {BEGIN} … {END} block"
    head, rest = text.split(BEGIN)
    block, tail = rest.split(END)
    want = "\n" + _generated()
    if os.environ.get("UPDATE_GOLDEN") == "1":
        PAGE.write_text(head + BEGIN + want + END + tail, encoding="utf-8")
        block = want
    assert block == want, f"{PAGE}'s table is stale: run `UPDATE_GOLDEN=1` on this test to regenerate it"
    assert head.startswith("# Job file reference (version 1)\n")


def test_the_table_names_every_key_and_where_plain_fields_go() -> None:
    table = _generated()
    for path in key_paths():
        pool = path[0] == "cluster" and len(path) > 2 or path[:2] == ("diloco", "second_learner_pool") and len(path) > 2
        key = ".".join(["cluster", "*", *path[2:]]) if pool else ".".join(map(str, path))
        assert f"| `{key}`" in table, key
    assert "Sent as `jobSpec.persistentResourceId`." in table
    assert "Sent as `encryptionSpec.kmsKeyName`." in table
    assert "| `reservation.affinity` | `none` \\| `any` \\| `specific` | `any` |" in table


def test_the_markdown_command_imports_no_google_library() -> None:
    code = ("import sys; from vtrain.cli import cli\n"
            "try: cli(['schema', '--markdown'], standalone_mode=False)\nexcept SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('tensorflow', 'google.cloud.', 'google.protobuf'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
