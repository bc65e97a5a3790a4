"""Trainer directory → content-hashed sdist → staging (gs:// or a local directory).

Why content-hashed: the sdist is named after a hash of the selected files (:mod:`vtrain.trainer.select`),
so ``vtrain render`` can print the final ``packageUris`` (:func:`planned_uri`) by reading the files,
building nothing, and an unchanged trainer is never uploaded twice.

Why the sdist holds every selected file: a build backend keeps only some of them (setuptools drops
a root ``data.csv`` that no package or ``MANIFEST.in`` names), and which ones only a build can tell.
So vtrain adds the selected files the backend left out to its sdist, under the sdist's top folder:
the sdist holds the selection, and its name is a function of the selection alone. Installing it is
unchanged (pip builds the wheel with the backend, which installs what it would have installed; the
added files ride along in the sdist only). Changing a file the backend does not package therefore
gives a new name and a new upload: that file is in the sdist. A symlink that leads out of the folder
is not selected (:mod:`vtrain.trainer.select`), so a dataset linked beside the sources changes
nothing (issue 20, class 14).

Why build from a filtered copy: a build backend picks files by its own rules (setuptools reads
MANIFEST.in, git file finders, package data). Building from a temporary copy that holds only the
selected files (``.gitignore``/``.vtrainignore`` applied, junk and VCS data dropped) guarantees
that nothing excluded can reach the sdist, whatever the backend does.

Vertex replicas also need vtrain's runtime (``vtrain.runtime``), the second ``packageUris`` entry:
:mod:`vtrain.trainer.runtime_sdist`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from vtrain.errors import PackagingError
from vtrain.foreign import printable
from vtrain.trainer.backend import run_backend
from vtrain.trainer.credentials import check_contents, credential_reason
from vtrain.trainer.entrymodule import entry_module_problem, syntax_problem
from vtrain.trainer.runtime_sdist import runtime_entries, runtime_name, write_runtime
from vtrain.trainer.select import (
    Scan,
    check_package_dir,
    hash_entries,
    open_regular,
    readable_errors,
    select_files,
)
from vtrain.trainer.staging import StagedObject, StagingTarget, check_target, lookup, parse_staging, stage
from vtrain.userpaths import describe_oserror

if TYPE_CHECKING:
    from google.cloud import storage


def scan_package(package_dir: Path, *, skip: Iterable[Path] = ()) -> Scan:
    """Select the files that will be packaged (excludes applied) and hash them all; reads only.

    Anything the walk cannot read (a directory or file this user may not read, a path past the
    OS's length limit) is a one-line PackagingError, never a silently smaller package; so is a
    selected file whose name is not UTF-8, which no sdist (a tar of UTF-8 names) can carry.
    """
    scan = check_contents(select_files(package_dir, skip=skip))
    with readable_errors(scan.root):
        scan.digest = hash_entries(((rel, scan.root / rel) for rel in scan.files), states=scan.states)
    return scan


def dist_name(package_dir: Path) -> str:
    """The sdist file-name prefix: [project].name normalized as PEP 625 wants, else the dir name."""
    name = ""
    pyproject = Path(package_dir) / "pyproject.toml"
    if pyproject.is_file():
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10
            import tomli as tomllib
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise PackagingError(f"{pyproject}: not valid TOML ({err})") from err
        except OSError as err:
            raise PackagingError(f"cannot read {pyproject}: {describe_oserror(err)}") from err
        project = data.get("project")
        if isinstance(project, dict) and isinstance(project.get("name"), str):
            name = project["name"]
    name = name or Path(package_dir).absolute().name
    normalized = re.sub(r"[^a-z0-9_]+", "_", re.sub(r"[-_.]+", "_", name).lower()).strip("_")
    return normalized or "trainer"


def _local_skips(target: StagingTarget) -> list[Path]:
    # A local staging directory inside the trainer must not be packaged, or every build would
    # change the hash of the next one.
    return [target.directory] if target.directory is not None else []


def planned_uri(package_dir: Path, staging: str, *, skip: Iterable[Path] = ()) -> str:
    """The URI the trainer sdist will have once staged. Sends nothing and builds nothing: reads the selected
    files to hash them. `skip`: paths that are not the trainer's (the job file)."""
    target = parse_staging(staging)
    return target.uri_for(sdist_name(scan_package(package_dir, skip=[*skip, *_local_skips(target)])))


def sdist_name(scan: Scan) -> str:
    """The trainer sdist's file name, for a :func:`scan_package` scan (the hash of the selection)."""
    return f"{dist_name(scan.root)}-{scan.digest}.tar.gz"


def check_module(scan: Scan, module: str) -> None:
    """The entry module must run with `python -m` once installed, and its package must compile
    (:mod:`vtrain.trainer.entrymodule`: the same check `validate` makes)."""
    problem = entry_module_problem(scan.files, module, scan.root)
    if problem is None:
        with readable_errors(scan.root):
            problem = syntax_problem(scan.root, scan.files, module)
    if problem:
        raise PackagingError(problem)


def refuse_credentials(scan: Scan, fix: str = "list them in .vtrainignore, or pass --allow-credentials") -> None:
    """A PackagingError listing every file that looks like a secret, if any (the sdist and the image alike):
    nothing is built or sent. Names are shown escaped (they are the folder's, not vtrain's). `fix`: how to
    leave them out, where the files were chosen."""
    if not scan.credentials:
        return
    lines = [f"  {printable(rel)}: {why}" for rel, why in scan.credentials]
    n = len(lines)
    raise PackagingError(
        f"refusing to package {n} file{'s' if n != 1 else ''} in {printable(str(scan.root))} that look like "
        f"credentials ({fix}):\n" + "\n".join(lines)
    )


def build_sdist(
    package_dir: Path,
    out_dir: Path,
    *,
    allow_credentials: bool = False,
    isolation: bool | None = None,
    skip: Iterable[Path] = (),
    modules: Iterable[str] = (),
) -> Path:
    """Build the trainer into ``out_dir/{dist_name}-{hash}.tar.gz``: the hash of the selected files, which the
    sdist holds all of (:func:`planned_uri`'s name). Each of `modules` must be among the files the build
    backend itself packaged (:func:`check_kept`), or nothing is written."""
    scan = check_contents(select_files(package_dir, skip=skip))
    if not allow_credentials:
        refuse_credentials(scan)
    sweep_stale_builds()
    return _build_scan(scan, dist_name(scan.root), Path(out_dir), isolation, modules)[0]


#: Temporary build trees are named `vtrain-KIND-PID-…`: one whose PID is dead was left by a killed vtrain.
_STALE_BUILD = re.compile(r"^vtrain-(?:build|dist|runtime|dry-run)-([0-9]+)-")


def temp_prefix(kind: str) -> str:
    return f"vtrain-{kind}-{os.getpid()}-"


def sweep_stale_builds() -> list[Path]:
    """Remove the build trees that killed vtrain processes left in the temporary directory."""
    from vtrain.proctree import sweep_stale

    return sweep_stale(Path(tempfile.gettempdir()), _STALE_BUILD)


def _build_scan(scan: Scan, name: str, out_dir: Path, isolation: bool | None,
                modules: Iterable[str] = ()) -> tuple[Path, list[str]]:
    """Build the sdist from a copy of the selected files, then add the selected files the backend left out:
    (the sdist, the paths the backend's own sdist held)."""
    with tempfile.TemporaryDirectory(prefix=temp_prefix("build")) as tmp:
        src = Path(tmp) / "src"
        with readable_errors(scan.root):
            for rel in scan.files:
                dest = src / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                with open_regular(scan.root / rel) as fh, open(dest, "wb") as out:
                    shutil.copyfileobj(fh, out, 1 << 20)
        built = run_backend(src, Path(tmp) / "dist", isolation=isolation)
        kept = sdist_members(built)
        for module in modules:
            check_kept(kept, module)
        # The copies are what was built: hashing them, not the originals, names exactly this sdist.
        digest = hash_entries((rel, src / rel) for rel in scan.files)
        out_dir.mkdir(parents=True, exist_ok=True)
        final = out_dir / f"{name}-{digest}.tar.gz"
        complete_sdist(built, src, [rel for rel in scan.files if rel not in set(kept)], final)
    return final, kept


def complete_sdist(built: Path, src: Path, missing: list[str], final: Path) -> None:
    """`built` (the backend's sdist) as `final`, with the files `missing` from it (paths under `src`) added under
    its top folder, in order, after its own members. A backend's sdist has one top folder (``NAME-VERSION/``)."""
    if not missing:
        shutil.move(built, final)
        return
    with tarfile.open(built) as tar:
        members = tar.getmembers()
        tops = {m.name.split("/", 1)[0] for m in members}
        if len(tops) != 1:
            raise PackagingError(f"the build backend wrote an sdist with {len(tops)} top-level entries, not one "
                                 "NAME-VERSION folder")
        top = tops.pop()
        with tarfile.open(final, "w:gz", format=tarfile.PAX_FORMAT) as out:
            for member in members:
                out.addfile(member, tar.extractfile(member) if member.isfile() else None)
            mtime = max((m.mtime for m in members), default=0)
            for rel in missing:
                path = src / rel
                info = tarfile.TarInfo(f"{top}/{rel}")
                st = path.stat()
                info.size = st.st_size
                info.mode = 0o755 if st.st_mode & 0o111 else 0o644
                info.mtime = mtime
                with open(path, "rb") as fh:
                    out.addfile(info, fh)


# --- the whole step -----------------------------------------------------------------------------


def sdist_members(sdist: Path) -> list[str]:
    """Paths inside an sdist, without its top-level ``name-version/`` directory."""
    with tarfile.open(sdist) as tar:
        return sorted(m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name)


def build_and_stage(
    package_dir: Path,
    staging: str,
    module: str | None,
    *,
    allow_credentials: bool = False,
    progress: bool = True,
    client: storage.Client | None = None,
    isolation: bool | None = None,
    skip: Iterable[Path] = (),
    builds: Path | None = None,
) -> list[StagedObject]:
    """Build the trainer and runtime sdists and stage both: ``[trainer, runtime]``.

    Everything a user can get wrong is checked before the first upload: the package directory,
    its build file, the entry module, credentials among the files, the staging location and
    write access to it, and that both builds succeed. Only then is anything sent.

    `builds` (:func:`builds_dir`: ``sdists/`` in vtrain's cache, where `vtrain local` stages): a trainer sdist
    of the planned name kept there is staged as it is, not built again (the name is the hash of the same
    selection), and a new build is kept there, with the list of the files the backend itself packaged
    (``NAME.backend.json``), so the entry module is checked against it for every job, built now or not.
    """
    target = parse_staging(staging)
    scan = check_contents(select_files(package_dir, skip=[*skip, *_local_skips(target)]))
    if module is not None:
        check_module(scan, module)
    if not allow_credentials:
        refuse_credentials(scan)
    if target.kind == "gcs" and client is None:
        from vtrain.trainer.staging import default_client

        client = default_client()
    check_target(target, client)
    sweep_stale_builds()
    runtime = runtime_entries()
    runtime_sdist = runtime_name(runtime)
    with tempfile.TemporaryDirectory(prefix=temp_prefix("dist")) as tmp:
        built: dict[str, Path] = {}
        with readable_errors(scan.root):
            scan.digest = hash_entries((rel, scan.root / rel) for rel in scan.files)
        trainer_name = sdist_name(scan)
        # Content-addressed names: what is already staged needs neither a build nor an upload.
        known = {name: lookup(target, name, client) for name in (trainer_name, runtime_sdist)}
        kept = parse_staging(str(builds)) if builds is not None else None  # where builds are kept, as staged
        backend = _backend_files(kept, trainer_name) if kept is not None else None
        if module is not None and backend is not None:  # what the build of these files packaged, staged or not
            check_kept(backend, module)
        if known[trainer_name] is None:
            # built before, with its list: not built again
            earlier = _built_before(kept, trainer_name, Path(tmp)) if kept is not None and backend is not None else None
            if earlier is not None:
                built[trainer_name] = earlier
            else:
                sdist, backend = _build_scan(scan, dist_name(scan.root), Path(tmp), isolation,
                                             [module] if module is not None else ())
                if sdist.name != trainer_name:  # a file changed between the hash and the build's copy of it
                    trainer_name = sdist.name
                    known[trainer_name] = lookup(target, trainer_name, client)
                built[trainer_name] = sdist
                if kept is not None:
                    _keep(kept, sdist, backend, copy=kept != target)
        if known[runtime_sdist] is None:
            built[runtime_sdist] = write_runtime(runtime, runtime_sdist, Path(tmp))
        # Every build succeeded: only now send anything.
        return [
            known[name] or stage(built[name], target, progress=progress, client=client)
            for name in (trainer_name, runtime_sdist)
        ]


def builds_dir() -> Path:
    """Where trainer sdists are kept once built (``sdists/`` in vtrain's cache; `vtrain local` stages there)."""
    from vtrain.userpaths import cache_folder

    return cache_folder("sdists")


#: The most a kept ``NAME.backend.json`` may hold; a bigger one is not read (the sdist is built again).
_MAX_BACKEND_LIST = 8 << 20


def _backend_files(kept: StagingTarget, name: str) -> list[str] | None:
    """The files the backend packaged when it built the sdist `name`, as kept in `kept`; None when there is no
    such list, or it does not read as a list of paths."""
    path = kept.local_dir / f"{name}.backend.json"
    try:
        with open_regular(path) as fh:
            data = json.loads(fh.read(_MAX_BACKEND_LIST + 1))
    except (OSError, ValueError, PackagingError):
        return None
    if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
        return None
    return data


def _built_before(kept: StagingTarget, name: str, into: Path) -> Path | None:
    """A copy, in `into`, of the sdist `name` that an earlier build kept in `kept` (where `vtrain local` and
    `stage` put it); None when there is none or it does not read as an sdist. A copy, so that a `vtrain cache
    clear` meanwhile cannot cut it short."""
    copy = into / name
    try:
        with open_regular(kept.local_dir / name) as fh, open(copy, "wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
        sdist_members(copy)
    except (OSError, EOFError, tarfile.TarError, zlib.error, PackagingError):
        return None
    return copy


def _keep(kept: StagingTarget, sdist: Path, backend: list[str], *, copy: bool) -> None:
    """Keep a new build in `kept` (`copy`: unless it was staged there) with the list of what the backend
    packaged. A cache that cannot be written keeps nothing, and says nothing: the build itself succeeded."""
    with contextlib.suppress(PackagingError, OSError):
        if copy:
            (kept.local_dir / sdist.name).unlink(missing_ok=True)  # one there did not read: replaced
            stage(sdist, kept, progress=False)
        listing = kept.local_dir / f"{sdist.name}.backend.json"
        partial = listing.with_name(f".{listing.name}.{os.getpid()}.partial")
        try:
            partial.write_text(json.dumps(backend), encoding="utf-8")
            os.replace(partial, listing)
        finally:
            partial.unlink(missing_ok=True)


def check_kept(members: Iterable[str], module: str) -> None:
    """The build backend packaged the entry module (`members`: the paths its sdist holds): a backend can leave
    files out, and vtrain's additions to the sdist ride along without being installed."""
    if entry_module_problem(list(members), module) is not None:
        raise PackagingError(
            f"the build backend left trainer module {module!r} out of the sdist: list its package "
            "in pyproject.toml ([tool.setuptools] packages) or add an __init__.py"
        )


def describe(objects: list[StagedObject]) -> list[dict[str, object]]:
    """Plain data for ``-o json``: role, uri, uploaded, size."""
    roles = ["trainer", "runtime"]
    return [{"role": roles[i] if i < 2 else "extra", **obj.to_dict()} for i, obj in enumerate(objects)]


__all__ = [
    "Scan",
    "StagedObject",
    "build_and_stage",
    "builds_dir",
    "build_sdist",
    "check_contents",
    "check_module",
    "check_kept",
    "check_package_dir",
    "credential_reason",
    "complete_sdist",
    "dist_name",
    "refuse_credentials",
    "planned_uri",
    "run_backend",
    "scan_package",
    "select_files",
    "sdist_members",
    "sdist_name",
    "stage",
    "sweep_stale_builds",
    "temp_prefix",
]
