"""Running a trainer's own PEP 517 build backend, quietly, its output kept for the error it may become."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vtrain.errors import PackagingError

if TYPE_CHECKING:
    from build import ProjectBuilder


def run_backend(source_dir: Path, out_dir: Path, *, isolation: bool | None = None) -> Path:
    """Build an sdist with the project's own PEP 517 backend.

    ``isolation=None`` builds in this interpreter when the backend's requirements are already
    installed (fast, offline) and otherwise in an isolated environment, which pip fills from
    the package index.
    """
    from build import BuildBackendException, BuildException, FailedProcessError, ProjectBuilder
    from build.env import DefaultIsolatedEnv

    try:
        with warnings.catch_warnings():
            # The backend's own warnings (setuptools "beta" notices) are noise to a vtrain user.
            warnings.simplefilter("ignore")
            builder = ProjectBuilder(source_dir, runner=_captured_runner)
            if isolation is None:
                isolation = _lacks_requirements(builder, source_dir)
            if not isolation:
                return Path(builder.build("sdist", out_dir))
            with DefaultIsolatedEnv() as env:
                builder = ProjectBuilder.from_isolated_env(env, source_dir, runner=_captured_runner)
                env.install(builder.build_system_requires)
                env.install(builder.get_requires_for_build("sdist"))
                return Path(builder.build("sdist", out_dir))
    except BuildBackendException as err:
        raise PackagingError(f"building the sdist failed: {err}{_tail(err.exception)}") from err
    except FailedProcessError as err:  # pip could not install the build requirements
        raise PackagingError(f"building the sdist failed: {err}{_tail(err.exception)}") from err
    except (BuildException, OSError) as err:
        raise PackagingError(f"building the sdist failed: {err}") from err


#: setuptools' get_requires_for_build_sdist hook adds only `setup_requires`, which only these files can declare.
_SETUPTOOLS_BACKEND = "setuptools.build_meta"
_SETUP_REQUIRES_FILES = ("setup.py", "setup.cfg")


def _lacks_requirements(builder: ProjectBuilder, source_dir: Path) -> bool:
    """Whether this interpreter lacks what the backend needs to build an sdist: the static `requires` of
    [build-system], and what the backend's get_requires_for_build_sdist hook adds. For setuptools without a
    setup.py or setup.cfg the hook adds nothing, so it is not run: it is a process that imports setuptools
    (~0.5 CPU-s, about half of a small trainer's build)."""
    from build import check_dependency

    if not _hook_adds_nothing(source_dir):
        return bool(builder.check_dependencies("sdist"))
    return any(next(check_dependency(req), None) is not None for req in builder.build_system_requires)


def _hook_adds_nothing(source_dir: Path) -> bool:
    if any((source_dir / name).exists() for name in _SETUP_REQUIRES_FILES):
        return False
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    try:
        table = tomllib.loads((source_dir / "pyproject.toml").read_text(encoding="utf-8")).get("build-system")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # ProjectBuilder read it; whatever this is, the hook decides
    return isinstance(table, dict) and table.get("build-backend") == _SETUPTOOLS_BACKEND


def _captured_runner(cmd: Sequence[str], cwd: str | None = None,
                     extra_environ: Mapping[str, str] | None = None) -> None:
    """Run a backend hook quietly, keeping its output for the error message if it fails."""
    import subprocess

    env = dict(os.environ)
    env.update(extra_environ or {})
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)


def _tail(exc: BaseException | None, lines: int = 15) -> str:
    output = getattr(exc, "output", None) or getattr(exc, "stdout", None)
    if not output:
        return ""
    text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
    tail = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n" + "\n".join(f"  | {line}" for line in tail)


__all__ = ["run_backend"]
