"""Issue 46 class 11: every job-file field that holds an image reference goes through the one reference grammar
(`vtrain.trainer.image.reference.reference_problem`: OCI/Docker's, bounded) at `validate`, with file:line:key.
Before, a space, a newline, upper case, `http://` or 100,000 characters in `model.serving_image` or
`trainer.container.image_uri` validated, and were found by Vertex (or the serving container) after training."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.test_values_that_passed import invoke

GOOD = "us-docker.pkg.dev/my-project/trainers/resnet:1.4"
DIGEST = "sha256:" + "0" * 64
#: (the value, the words of the refusal). The issue's instances first, then their neighbours.
BAD = [
    ("us-docker.pkg.dev/p/r/i:1 x", "it has whitespace or a control character in it, which no image reference has"),
    ("us-docker.pkg.dev/p/r/i:1\n", "it has whitespace or a control character in it, which no image reference has; "
                                    "try 'us-docker.pkg.dev/p/r/i:1'"),
    ("US-docker.pkg.dev/p/R/i:1", "it has upper-case letters: an image's registry host and repository are "
                                  "lower-case (only a tag may have upper case); try 'us-docker.pkg.dev/p/r/i:1'"),
    ("http://us-docker.pkg.dev/p/r/i:1", "an image reference has no scheme (http://, https://, docker://): it starts "
                                         "with the registry host; try 'us-docker.pkg.dev/p/r/i:1'"),
    ("us-docker.pkg.dev/p/r/" + "a" * 100_000, "it is 100,022 characters; an image reference is at most 456"),
    ("\tus-docker.pkg.dev/p/r/i:1", "it has whitespace or a control character in it"),
    ("us-docker.pkg.dev/p/r/i\x00:1", "contains a NUL byte (\\0)"),  # the loader's own refusal, first
    ("us-docker.pkg.dev/p/r/\x1b[31mi:1", "it has whitespace or a control character in it"),
    ("docker://us-docker.pkg.dev/p/r/i:1", "an image reference has no scheme"),
    ("us-docker.pkg.dev/p/r/" + "a" * 300, "its name is 322 characters; an image name is at most 255"),
    ("us-docker.pkg.dev/p/r/i:" + "t" * 129, "is not valid (letters, digits, _ . -; at most 128)"),
    ("us-docker.pkg.dev/p/r/i@sha256:abc", "the digest after @ must be sha256: and 64 hex digits"),
    ("localhost:99999/r/i:1", "registry port 99999 in 'localhost:99999' is not a TCP port (1 to 65535)"),
    ("us-docker.pkg.dev/p//i:1", "repository 'p//i' is not valid"),
]  # fmt: skip
VALID = [GOOD, "localhost:5000/team/trainer:v1", f"us-docker.pkg.dev/p/r/i@{DIGEST}", "[::1]:5000/r/i:Tag_1.0",
         "gcr.io/p/i"]


def _job(field: str, image: str) -> str:
    quoted = '"' + image.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") \
        .replace("\x00", "\\0").replace("\x1b", "\\e") + '"'
    container = f"  container: {{image_uri: {quoted}}}\n" if field == "trainer.container.image_uri" else \
        f"  container: {{image_uri: {GOOD}}}\n"
    pool = f"    container: {{image_uri: {quoted}}}\n" if field == "cluster.workers.container.image_uri" else ""
    serving = f"  serving_image: {quoted}\n" if field == "model.serving_image" else "  serving_image: tf2-cpu.2-15\n"
    return ("name: demo\nregion: us-central1\nbase_output_dir: gs://my-bucket/out\ntrainer:\n" + container
            + "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers:\n    replicas: 1\n" + pool
            + "model:\n  display_name: churn\n" + serving)


def _package_job(field: str, image: str, tmp_path: Path, build: bool = False) -> str:
    """A python-package job whose trainer.image or cluster.chief.image is `image` (with build: the base)."""
    package = tmp_path / "pkg"
    (package / "trainer").mkdir(parents=True, exist_ok=True)
    (package / "trainer" / "__init__.py").write_text("")
    (package / "trainer" / "task.py").write_text("print('trained')\n")
    quoted = '"' + image.replace("\n", "\\n") + '"'
    trainer_image = quoted if field == "trainer.image" else "tf-cpu.2-15"
    chief = f", image: {quoted}" if field == "cluster.chief.image" else ""
    build_block = "  build: {repository: us-central1-docker.pkg.dev/p/r/trainer}\n" if build else ""
    return (f"name: demo\nregion: us-central1\nstaging_bucket: gs://my-bucket/s\ntrainer:\n  package: {package}\n"
            f"  module: trainer.task\n  image: {trainer_image}\n{build_block}"
            f"cluster:\n  chief: {{machine_type: n1-standard-4{chief}}}\n")


@pytest.mark.parametrize("field", ["trainer.container.image_uri", "cluster.workers.container.image_uri",
                                   "model.serving_image"])
@pytest.mark.parametrize(("image", "said"), BAD)
def test_a_malformed_image_reference_is_refused_at_its_key(tmp_path: Path, field: str, image: str, said: str) -> None:
    done = invoke(tmp_path, _job(field, image), "validate")
    assert done.exit_code == 2, done.output
    [line] = [line for line in done.stderr.splitlines() if f": {field}: " in line]
    assert line.startswith(f"{tmp_path}/job.yaml:") and said in line, line
    assert len(line) < 1000  # a 100,000-character value is shown cut, escaped
    assert "\x00" not in done.stderr and "\x1b" not in done.stderr and "\t" not in line


@pytest.mark.parametrize("field", ["trainer.container.image_uri", "cluster.workers.container.image_uri",
                                   "model.serving_image"])
@pytest.mark.parametrize("image", VALID)
def test_well_formed_references_pass(tmp_path: Path, field: str, image: str) -> None:
    done = invoke(tmp_path, _job(field, image), "validate")
    assert done.exit_code == 0, done.output


@pytest.mark.parametrize(("field", "build"), [("trainer.image", False), ("cluster.chief.image", False),
                                              ("trainer.image", True), ("cluster.chief.image", True)])
def test_the_images_of_python_package_pools_and_build_bases_too(tmp_path: Path, field: str, build: bool) -> None:
    done = invoke(tmp_path, _package_job(field, "http://us-docker.pkg.dev/p/r/i:1", tmp_path, build), "validate")
    assert done.exit_code == 2, done.output
    noun = "base image" if build else "image"
    assert f": {field}: {noun} 'http://us-docker.pkg.dev/p/r/i:1': an image reference has no scheme" in done.stderr
    assert done.stderr.count("no scheme") == 1, done.stderr  # said once, though two rules read the field


def test_an_empty_image_uri_is_refused(tmp_path: Path) -> None:
    done = invoke(tmp_path, _job("trainer.container.image_uri", ""), "validate")
    assert done.exit_code == 2 and "trainer.container.image_uri: image '': an image reference is empty; e.g. " \
        "us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG" in done.stderr, done.output


@pytest.mark.parametrize("command", [("render",), ("submit", "--dry-run"), ("local",)])
def test_every_command_that_reads_the_job_refuses_it_before_anything(tmp_path: Path, command: tuple[str, ...]) -> None:
    done = invoke(tmp_path, _job("model.serving_image", "HTTP://x/y"), *command)
    assert done.exit_code == 2 and done.stdout == "", done.output
    assert "model.serving_image: serving image 'HTTP://x/y': an image reference has no scheme" in done.stderr
