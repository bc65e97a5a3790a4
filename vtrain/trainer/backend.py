"""Running a trainer's own PEP 517 build backend, quietly, its output kept for the error it may become."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from vtrain.errors import PackagingError


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
                isolation = bool(builder.check_dependencies("sdist"))
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
