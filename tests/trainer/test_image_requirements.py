"""What the image's requirements are made of, read as someone else's text (issue 30, classes 2, 3, 4, 6):
requirements files bounded, regular and (for -r/-c) under the job's directory; --hash, NUL and escape
codes refused with their position; the trainer's declared dependencies as its backend reports them."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from tests.trainer.image_helpers import make_trainer
from vtrain.cli import cli
from vtrain.errors import PackagingError
from vtrain.trainer.image import wheels
from vtrain.trainer.image.requirements import MAX_FILE_BYTES, declared_requirements, read_requirements
from vtrain.trainer.packaging import scan_package

REPO = "us-central1-docker.pkg.dev/my-proj/train/demo"


def _read(job_dir: Path, text: str | bytes, name: str = "reqs.txt") -> str:
    """The one-line refusal for a requirements file with `text`, read as the job in `job_dir` would."""
    path = job_dir / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(PackagingError) as err:
        read_requirements([str(path)], [True], root=job_dir)
    message = str(err.value)
    assert "\n" not in message and "\x1b" not in message and "\x00" not in message and "\x07" not in message
    return message


def test_an_include_outside_the_jobs_directory_is_refused_without_reading_it(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (tmp_path / "secret.txt").write_text("TOP-SECRET-LINE\n")
    for target in ("/etc/shadow", "/proc/self/environ", "../secret.txt", str(tmp_path / "secret.txt")):
        message = _read(job, f"numpy==1.26.4\n-r {target}\n")
        assert f"reqs.txt:2: -r {target} is outside the job's directory" in message
        assert "TOP-SECRET" not in message and "root:" not in message
    message = _read(job, "-c ../secret.txt\n")
    assert "reqs.txt:1: -c ../secret.txt is outside the job's directory" in message
    (job / "sneaky.txt").symlink_to(tmp_path / "secret.txt")  # a link under the folder that points out of it
    assert "outside the job's directory" in _read(job, "-r sneaky.txt\n")


def test_devices_fifos_and_huge_files_are_refused_before_reading(tmp_path: Path) -> None:
    (tmp_path / "zero.txt").symlink_to("/dev/zero")
    with pytest.raises(PackagingError, match="zero.txt: it is a character device, not a regular file"):
        read_requirements([str(tmp_path / "zero.txt")], [True], root=tmp_path)
    os.mkfifo(tmp_path / "pipe.txt")
    message = _read(tmp_path, "-r pipe.txt\n")  # would hang forever if opened blocking
    assert "pipe.txt: it is a FIFO (named pipe), not a regular file" in message
    (tmp_path / "big.txt").write_bytes(b"# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    assert f"larger than {MAX_FILE_BYTES:,} bytes" in _read(tmp_path, "-r big.txt\n")


@pytest.mark.parametrize(("text", "where"), [
    ("numpy==1.26.4 --hash=sha256:" + "0" * 64 + "\n", "reqs.txt:1: --hash at column 15"),
    ("ok==1\nnumpy==1.26.4 \\\n    --hash=sha256:abc\n", "reqs.txt:2: --hash at column"),
    (b"numpy==1.26.4\x00\n", "reqs.txt:1:14: a control character (\\x00)"),
    ("tf-keras==2.17.0\x1b[2J\n", "reqs.txt:1:17: a control character (\\x1b)"),
    ("x==1\n\x07numpy\n", "reqs.txt:2:1: a control character (\\x07)"),
    ("numpy\u202e==1\n", "reqs.txt:1:6: a control character (\\u202e)"),
    (b"numpy==1\xff\n", "reqs.txt:1: not UTF-8 text"),
])
def test_hashes_nul_bytes_and_escape_codes_are_refused_with_their_position(tmp_path: Path, text: str | bytes,
                                                                           where: str) -> None:
    assert where in _read(tmp_path, text)


@pytest.mark.parametrize(("entry", "words"), [
    ("numpy==1.26.4 --hash=sha256:abc", "--hash at column 15"),
    ("numpy==1.26\x00", "a control character (\\x00) at column 12"),
    ("tf-keras\x1b]0;pwned\x07", "a control character (\\x1b) at column 9"),
    ("numpy=1", "is not a requirement specifier"),
])
def test_a_job_file_requirement_with_a_hash_or_controls_is_refused(entry: str, words: str) -> None:
    with pytest.raises(PackagingError) as err:
        read_requirements([entry], [False])
    assert words in str(err.value) and "\x1b" not in str(err.value) and "\x00" not in str(err.value)


def test_constraints_and_includes_under_the_job_are_read(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.txt").write_text("tf-keras==2.17.0  # keras 2\n-c ../pins.txt\n")
    (tmp_path / "pins.txt").write_text("numpy<2\n")
    (tmp_path / "reqs.txt").write_text("--extra-index-url https://example.com/simple\n-r sub/more.txt\n"
                                       "pandas \\\n  >=2\n")
    found = read_requirements([str(tmp_path / "reqs.txt"), "absl-py"], [True, False], root=tmp_path)
    assert found.requirements == ("tf-keras==2.17.0", "pandas   >=2", "absl-py")
    assert found.constraints == ("numpy<2",)
    assert found.index_args == ("--extra-index-url", "https://example.com/simple")


def test_validate_refuses_a_requirements_file_that_reads_etc_shadow_in_one_line(tmp_path: Path) -> None:
    make_trainer(tmp_path / "t")
    (tmp_path / "reqs.txt").write_text("-r /etc/shadow\n")
    job = write_job(tmp_path, f"name: demo\nregion: us-central1\ntrainer:\n  package: t\n  module: trainer.task\n"
                              f"  build:\n    repository: {REPO}\n    requirements: reqs.txt\n"
                              "cluster:\n  chief: {machine_type: n1-standard-4}\n")
    result = CliRunner().invoke(cli, ["validate", str(job)])
    assert result.exit_code == 2, result.output
    assert "-r /etc/shadow is outside the job's directory" in result.output
    assert "root:" not in result.output and "Traceback" not in result.output


def test_a_bad_platform_is_refused_by_validate(tmp_path: Path) -> None:
    make_trainer(tmp_path / "t")
    job = write_job(tmp_path, f"name: demo\nregion: us-central1\ntrainer:\n  package: t\n  module: trainer.task\n"
                              f"  build:\n    repository: {REPO}\n    platform: linux_x86_64\n"
                              "cluster:\n  chief: {machine_type: n1-standard-4}\n")
    result = CliRunner().invoke(cli, ["validate", str(job)])
    assert result.exit_code == 2, result.output
    assert "trainer.build.platform" in result.output and "manylinux_2_35_x86_64" in result.output


def test_the_layer_cache_lives_under_vtrain_cache_dir(tmp_path: Path) -> None:
    assert wheels.cache_dir({"VTRAIN_CACHE_DIR": str(tmp_path)}) == tmp_path / "image-layers"
    assert wheels.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "vtrain" / "image-layers"


# --- what the trainer declares ---------------------------------------------------------------------------


def test_static_pep621_dependencies_are_read_without_a_backend(tmp_path: Path) -> None:
    root = make_trainer(tmp_path / "t")
    (root / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "1"\n'
                                         'dependencies = ["tf-keras~=2.17.0", "absl-py; python_version>\'3\'"]\n')
    scan = scan_package(root)
    found = declared_requirements(root, scan.files, scan.digest, cache=tmp_path / "cache")
    assert found == ("tf-keras~=2.17.0", "absl-py; python_version>'3'")
    assert not (tmp_path / "cache").exists()  # static: nothing run, nothing cached
    (root / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "1"\ndependencies = ["numpy==1 --hash=x"]\n')
    with pytest.raises(PackagingError, match="project.dependencies: --hash at column 10"):
        declared_requirements(root, scan_package(root).files, "x", cache=tmp_path / "cache")


@pytest.mark.slow
def test_setup_py_install_requires_come_from_the_backend_and_are_cached(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "setup.py").write_text(textwrap.dedent("""\
        from setuptools import setup
        setup(name="legacy-trainer", version="0.1", packages=["trainer"],
              install_requires=["tf-keras>=2.17", "cloudml-hypertune"])
        """))
    scan = scan_package(root)
    found = declared_requirements(root, scan.files, scan.digest, cache=tmp_path / "cache")
    assert set(found) == {"tf-keras>=2.17", "cloudml-hypertune"}
    assert not list(root.glob("*.egg-info"))  # built from a copy: the user's folder is left as it was
    assert (tmp_path / "cache" / "trainer-requires" / f"{scan.digest}.json").is_file()


def test_cache_clear_removes_the_image_caches_under_vtrain_cache_dir(tmp_path: Path) -> None:
    for part in ("image-layers", "image-bases", "trainer-requires"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "x.json").write_text("{}")
    cleared = CliRunner().invoke(cli, ["cache", "clear", "-o", "json"], env={"VTRAIN_CACHE_DIR": str(tmp_path)})
    assert cleared.exit_code == 0, cleared.output
    assert not [p for p in ("image-layers", "image-bases", "trainer-requires") if (tmp_path / p).exists()]
