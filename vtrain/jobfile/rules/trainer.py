"""The trainer source, its prebuilt image, and the distribution strategy."""

from __future__ import annotations

import re
from pathlib import Path

from vtrain import catalog
from vtrain.constants import MAX_PACKAGE_URIS
from vtrain.errors import PackagingError
from vtrain.jobfile.config import JobConfig, PoolConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import (
    _MODULE,
    Rules,
    pool_path,
    with_suggestion,
)
from vtrain.jobfile.rules.job import check_gcs
from vtrain.jobfile.yamlpos import PathKey, format_path
from vtrain.userpaths import describe_oserror, path_problem

# --------------------------------------------------------------------------- trainer and images


def check_trainer(r: Rules, config: JobConfig) -> None:
    t = config.trainer
    sources = [name for name, on in (("package", t.package is not None), ("package_uris", bool(t.package_uris)),
                                      ("container", t.container is not None)) if on]
    if len(sources) != 1:
        what = "none" if not sources else " and ".join(sources)
        r.add(("trainer",), f"the trainer needs exactly one of package, package_uris or container (found {what})")
        return
    if t.build is not None and (t.container is not None or t.package is None):
        other = "container" if t.container is not None else "package_uris"
        r.add(("trainer", "build"), f"trainer.build builds an image from trainer.package; it cannot go with "
                                    f"trainer.{other} (a prebuilt image, or packages already built): drop one")
    pools = [p for p in config.pools() if p.role != "reduction_server"]
    for pool in pools:
        if pool.container is None and t.container is None:
            continue
        for key in ("module", "image"):
            if getattr(pool, key) is not None:
                own = "its own container" if pool.container is not None else "trainer.container"
                r.add(pool_path(pool, key), f"{key} is for python-package pools, and this pool runs {own}; set "
                                            f"{format_path(pool_path(pool, 'container', 'command'))} instead")
    check_image_references(r, config)
    check_arch(r, config)
    modules = [(pool_path(p, "module"), p.module) for p in pools if p.container is None and p.module is not None]
    for path, module in modules:
        if not _MODULE.match(module):
            r.add(path, f"'{module}' is not a Python module path like trainer.task")
    if t.container is not None:
        for key in ("module", "image"):
            if getattr(t, key) is not None:
                r.add(("trainer", key), f"trainer.{key} is for python-package trainers; a container runs its own "
                                        "entrypoint (set trainer.container.command instead)")
        return
    uses_module = any(p.container is None and p.module is None for p in pools)
    if not t.module and uses_module:
        r.add(("trainer", "module"), "python-package trainers need trainer.module, the `python -m` target, "
                                     "e.g. trainer.task")
    elif t.module and not _MODULE.match(t.module):
        r.add(("trainer", "module"), f"'{t.module}' is not a Python module path like trainer.task")
    for i, uri in enumerate(t.package_uris):
        check_gcs(r, ("trainer", "package_uris", i), uri)
    if len(t.package_uris) > MAX_PACKAGE_URIS:
        r.add(("trainer", "package_uris"), f"at most {MAX_PACKAGE_URIS} package URIs, got {len(t.package_uris)}")
    if t.package is not None:
        check_package_dir(r, t.package, [(("trainer", "module"), t.module), *modules])
        if config.staging_bucket is None and r.target == "vertex" and t.build is None:
            r.add(("trainer", "package"), "a local trainer package is staged before submitting: set "
                                          "staging_bucket: gs://BUCKET/staging")
    check_image(r, config)
    if t.package is not None:
        check_image_python(r, config, t.package)
    if t.build is not None and t.package is not None:
        check_build(r, config)


def check_package_dir(r: Rules, package: Path, modules: list[tuple[PathKey, str | None]]) -> None:
    """The package path is a value of the job file (exit 2); what the disk says of it is the machine's (exit 1).
    Each (path, module) is a `python -m` target the package must hold: trainer.module and the pools' own."""
    bad = path_problem(str(package))
    if bad:
        r.add(("trainer", "package"), f"the trainer package path {bad}")
        return
    try:
        _check_package_contents(r, package, modules)
    except OSError as err:  # a parent directory this user may not search, say
        raise PackagingError(f"cannot look at trainer package {package}: {describe_oserror(err)}") from None


def _check_package_contents(r: Rules, package: Path, modules: list[tuple[PathKey, str | None]]) -> None:
    path = ("trainer", "package")
    if not package.is_dir():
        if package.is_symlink():
            r.add(path, f"trainer package {package} is a symlink that leads nowhere (a loop, or a missing "
                        "target); point trainer.package at the real directory")
            return
        r.add(path, f"trainer package directory not found: {package}; set trainer.package to the directory "
                    "holding pyproject.toml (a relative path starts at the job file's directory)")
        return
    if not (package / "pyproject.toml").is_file() and not (package / "setup.py").is_file():
        r.add(path, f"{package} has no pyproject.toml or setup.py; it must be an installable Python package")
        return
    from vtrain.errors import PackagingError
    from vtrain.trainer.entrymodule import entry_module_problem, syntax_problem
    from vtrain.trainer.packaging import dist_name
    from vtrain.trainer.select import readable_errors, select_files

    try:
        dist_name(package)  # reads pyproject.toml as the build will
    except PackagingError as err:
        if isinstance(err.__cause__, OSError):
            raise  # unreadable: the machine's state, not something to fix in the job file
        r.add(path, f"{err}; fix the file so the package can be built")
        return
    firsts: dict[str, PathKey] = {}
    for where, m in modules:
        if m and _MODULE.match(m):
            firsts.setdefault(m, where)  # each module checked once, reported at its first key
    if not firsts:
        return
    # The files `package` and `submit` will build from, judged by the very check they run.
    files = select_files(package).files
    for module, where in firsts.items():
        problem = entry_module_problem(files, module, package)
        if problem is not None and " not found" in problem:
            found = _package_modules(package)
            hint = did_you_mean(module, found) or (f" modules found: {', '.join(found[:5])}" if found else "")
            problem = with_suggestion(problem, hint)
        if problem is None:
            with readable_errors(package):  # unreadable: PackagingError, exit 1, as `package` says it
                problem = syntax_problem(package, files, module)
        if problem is not None:
            r.add(where, problem)


def _package_modules(package: Path) -> list[str]:
    """Dotted names of the Python modules in a trainer package, for did-you-mean (bounded walk)."""
    found: list[str] = []
    for root in (package, package / "src"):
        for file in sorted(root.glob("*/**/*.py"))[:200]:
            rel = file.relative_to(root).with_suffix("")
            parts = rel.parts[:-1] if rel.name in ("__init__", "__main__") else rel.parts
            if parts and all(_MODULE.match(part) for part in parts):
                found.append(".".join(parts))
    return list(dict.fromkeys(found))


def check_image(r: Rules, config: JobConfig) -> None:
    """trainer.image against the python-package pools that take it, then each pool's own `image`."""
    python = [p for p in config.pools() if p.role != "reduction_server" and p.container is None]
    build = config.trainer.build is not None  # then an image is the base of the one vtrain builds
    if config.trainer.image is not None:
        _check_image(r, ("trainer", "image"), config.trainer.image, [p for p in python if p.image is None], build)
    for pool in python:
        if pool.image is not None:
            _check_image(r, pool_path(pool, "image"), pool.image, [pool], build)


def check_image_references(r: Rules, config: JobConfig) -> None:
    """Every field that holds an image reference, through the one reference grammar (bounded, ports included):
    trainer.container.image_uri and each pool's, trainer.image and each pool's `image` when they are not a
    prebuilt alias (with trainer.build any image is a base), and model.serving_image when it is a URI."""
    found: list[tuple[PathKey, str, str]] = []
    if config.trainer.container is not None:
        found.append((("trainer", "container", "image_uri"), config.trainer.container.image_uri, "image"))
    found += [(pool_path(p, "container", "image_uri"), p.container.image_uri, "image") for p in config.pools()
              if p.container is not None and p.container is not config.trainer.container]
    build = config.trainer.build is not None
    what = "base image" if build else "image"
    images = [(("trainer", "image"), config.trainer.image)] + [(pool_path(p, "image"), p.image) for p in config.pools()]
    found += [(path, image, what) for path, image in images
              if image and (build or "/" in image) and not catalog.IMAGE_ALIAS_RE.match(image)]
    serving = config.model.serving_image if config.model is not None else None
    if serving is not None and "/" in serving:
        found.append((("model", "serving_image"), serving, "serving image"))
    for path, image, noun in found:
        check_reference(r, path, image, noun)


def _check_image(r: Rules, path: PathKey, image: str, pools: list[PoolConfig], build: bool) -> None:
    alias = catalog.IMAGE_ALIAS_RE.match(image)
    uri = catalog.PREBUILT_URI_RE.match(image)
    where = format_path(path)
    if alias is None and uri is None:
        if build:  # any image may be the base of one vtrain builds: check_image_references reads it
            pass
        elif "/" not in image:
            v, tpu = catalog.DEFAULT_TF_VERSION, catalog.default_tf_version("tpu")
            r.add(path, f"'{image}' is neither a prebuilt image alias nor an image URI; use "
                        f"tf-cpu.{v}, tf-gpu.{v}, tf-tpu.{tpu}, or tf.{v} to pick per pool")
        else:
            own = "cluster.<pool>.container" if path[0] == "cluster" else "trainer.container"
            r.add(path, "python-package trainers run on a Vertex prebuilt image "
                        f"(…-docker.pkg.dev/vertex-ai/training/tf-…); for your own image use {own}, or "
                        "trainer.build to build one on this base", "warning")
        return
    match = alias or uri
    assert match is not None
    family, version = match["family"], match["version"]
    families = [family] if family else sorted({p.hardware for p in pools})
    for fam in families:
        known = catalog.PREBUILT_TF[fam]
        if version not in known:
            ordered = sorted(known, key=catalog.tf_version_tuple)
            r.add(path, f"no prebuilt tf-{fam} image for TensorFlow {version.replace('-', '.')}; "
                        f"available: {', '.join(ordered)}; e.g. tf-{fam}.{ordered[-1]}")
            return
    if family is None:
        return
    for pool in pools:
        need = pool.hardware
        if need != family:
            r.add(path, f"tf-{family} image but cluster.{pool.role} runs on {need.upper()}; use "
                        f"tf-{need}.{version}, or tf.{version} to pick the right image per pool"
                        + (f" ({where})" if path[0] == "cluster" else ""))
            return


def image_pythons(config: JobConfig) -> dict[str, str]:
    """The Python (MAJOR.MINOR) of each image the trainer's package runs on, with the image's name: the catalog's
    prebuilt rows, or trainer.build.python_version for another base; images of unknown Python left out."""
    t = config.trainer
    found: dict[str, str] = {}
    for pool in config.pools():
        if pool.role == "reduction_server" or pool.container is not None:
            continue
        image = pool.image or t.image
        row = catalog.prebuilt_image(image, pool.hardware)
        python = t.build.python_version if t.build is not None and t.build.python_version else None
        python = python or (row.python if row is not None else None)
        if python and re.fullmatch(r"3\.[0-9]+", python.strip()):
            found.setdefault(python.strip(), row.alias if row is not None else str(image))
    return found


def check_image_python(r: Rules, config: JobConfig, package: Path) -> None:
    """Issue 42: every trainer file parsed with the grammar of the image's Python, and its imports held against
    that Python's standard library (tomllib on 3.10, distutils on 3.12), offline, with file:line."""
    if any(p.path == "trainer.package" and p.severity == "error" for p in r.problems):
        return  # the package path is said wrong already (and may be one the OS cannot even look at)
    try:
        if not package.is_dir():
            return
    except OSError:
        return
    pythons = image_pythons(config)
    if not pythons:
        return
    from vtrain.trainer.imagepython import python_problems
    from vtrain.trainer.select import select_files

    try:
        files = select_files(package).files
    except (PackagingError, OSError):
        return  # check_package_dir said why, or `package` will
    for python, image in sorted(pythons.items(), key=lambda item: catalog.tf_version_tuple(
            item[0].replace(".", "-"))):
        for problem in python_problems(package, files, python, image):
            r.add(("trainer", "package"), f"{package / problem.file}:{problem.line}: {problem.message}")


def check_arch(r: Rules, config: JobConfig) -> None:
    """Arm machines (A4X: NVIDIA Grace) run aarch64 images, and Vertex's prebuilt images are x86_64 only: a
    python-package pool there is refused (its replicas would fail to start); trainer.build builds for aarch64
    on an Arm base; a container of the user's gets a reminder."""
    t = config.trainer
    for pool in config.pools():
        row = catalog.MACHINES.get(pool.machine_type)
        if row is None or row.arch == catalog.X86 or pool.role == "reduction_server":
            continue
        cpu = f"{row.name} runs on Arm ({row.arch}: NVIDIA Grace CPUs; {catalog.sources.A4X_ARM.url})"
        if pool.container is not None or (t.container is not None and t.build is None):
            path = pool_path(pool, "container", "image_uri") if pool.container is not None else \
                ("trainer", "container", "image_uri")
            r.warn(path, f"{cpu}: the image must have a linux/arm64 variant, or every replica fails to start")
            continue
        image = pool.image or t.image
        where = pool_path(pool, "image") if pool.image else ("trainer", "image") if t.image else \
            pool_path(pool, "machine_type")
        prebuilt = catalog.prebuilt_image(image, pool.hardware)
        if prebuilt is not None:
            fix = ("set trainer.image to a base with a linux/arm64 variant (NVIDIA's TensorFlow containers have one)"
                   if t.build is not None else
                   "build an arm64 image with trainer.build on a base with a linux/arm64 variant, or use a "
                   "container image built for linux/arm64")
            r.add(where, f"{cpu}, and the prebuilt image {prebuilt.alias} is built for {prebuilt.arch} only "
                         f"(no Arm variant is published): every replica would fail to start; {fix}")
        elif t.build is not None and t.build.platform and not t.build.platform.strip().endswith(f"_{row.arch}"):
            r.add(("trainer", "build", "platform"), f"{cpu}, and trainer.build.platform is {t.build.platform}; "
                                                    f"use a {row.arch} tag (manylinux_2_NN_{row.arch}) or leave "
                                                    "platform out to read it from the base")
    bases: dict[str, set[str]] = {}
    if t.build is not None:
        for pool in config.pools():
            row = catalog.MACHINES.get(pool.machine_type)
            if row is not None and pool.role != "reduction_server" and pool.container is None:
                bases.setdefault(config.base_image(pool), set()).add(row.arch)
    for base, arches in bases.items():
        if len(arches) > 1:
            r.add(("trainer", "build"), f"pools on Arm and x86_64 machines share the base {base}, and trainer.build "
                                        "makes one image per base: give the Arm pools an `image` of their own")


# --------------------------------------------------------------------------- strategy


def check_strategy(r: Rules, config: JobConfig) -> None:
    """The cluster fits the strategy: what each row of vtrain.strategies says it needs, refuses or wastes."""
    row = config.strategy
    name = row.name
    path = ("distribution_strategy",)
    replicas = config.training_replicas()
    has_workers = config.workers is not None and bool(config.workers.replicas)
    is_tpu = catalog.is_tpu_machine(config.chief.machine_type)
    has_ps = config.parameter_servers is not None and bool(config.parameter_servers.replicas)
    generation = catalog.tpu_generation(config.chief.machine_type, config.chief.accelerator)
    if generation is not None and (row.auto or row.tpu) and not catalog.TPU_MEMORY[generation].tensorflow:
        where = path if path in r.config.positions.values else ("cluster", "chief", "machine_type")
        r.warn(where, f"{config.chief.machine_type} is a TPU {generation} VM, and Google documents TensorFlow on "
                      f"Vertex TPU VMs for v2, v3 and v5e only ({catalog.sources.TPU_TRAINING.url}): a TensorFlow "
                      "trainer may not find the TPU there; use a ct5lp-hightpu-* (v5e) machine, or try it on the "
                      "TPU before a long run")
    if row.auto:
        return
    if is_tpu and not row.tpu:
        r.add(path, f"the chief is a TPU machine, so the strategy must be tpu (or auto), not {name}")
    elif row.tpu and not is_tpu:
        r.add(path, f"strategy {name} needs a TPU machine (cloud-tpu, ct4p-*, ct5p-*, ct5lp-*, ct6e-*) for the chief")
    elif row.parameter_servers == "needs" and not has_ps:
        r.add(path, f"strategy {name} needs cluster.parameter_servers; add them or use multi_worker_mirrored")
    elif row.own_cluster_rules:
        return  # checked by its own rules (vtrain.jobfile.rules.dtensor, .horovod)
    elif has_ps and row.parameter_servers != "needs":
        r.add(path, f"the cluster has parameter servers, so the strategy must be parameter_server (or auto), "
                    f"not {name}")
    elif row.hosts == "many" and not has_workers:
        r.add(path, f"strategy {name} needs cluster.workers; add workers or use mirrored")
    elif row.hosts == "one" and replicas != 1:
        r.add(path, f"strategy {name} runs on one machine but chief + workers have {replicas} replicas; "
                    "use multi_worker_mirrored")
    elif row.local_gpus == "many" and config.chief.gpus < 2:
        r.warn(path, f"{name} on {config.chief.gpus or 'no'} GPU(s) does not distribute anything; "
                     "one_device is equivalent")
    elif row.local_gpus == "one" and config.chief.gpus > 1:
        r.warn(path, f"{name} uses 1 of the chief's {config.chief.gpus} GPUs; use mirrored")




# --------------------------------------------------------------------------- trainer.build


def check_reference(r: Rules, path: PathKey, text: str, what: str) -> None:
    """`text` through the one image reference grammar; a problem is said at `path` (file:line:key)."""
    from vtrain.trainer.image.reference import reference_problem

    problem = reference_problem(text, what=what)
    if problem is not None:
        r.add(path, problem)


def check_build(r: Rules, config: JobConfig) -> None:
    """The repository's form and region, and the requirements (files read here, as the build reads them)."""
    from vtrain.jobfile.assemble import is_requirements_file
    from vtrain.trainer.image.libc import platform_problem
    from vtrain.trainer.image.reference import parse_repository
    from vtrain.trainer.image.requirements import read_requirements

    build = config.trainer.build
    assert build is not None
    path = ("trainer", "build")
    try:
        target = parse_repository(build.repository)
    except PackagingError as err:
        example = "" if "; try '" in str(err) else f"; e.g. {config.region}-docker.pkg.dev/PROJECT/REPO/NAME"
        r.add((*path, "repository"), f"{err}{example}")
    else:
        check_registry_region(r, (*path, "repository"), target.registry, config.region)
    if build.python_version is not None and not re.fullmatch(r"3\.[0-9]+", build.python_version.strip()):
        r.add((*path, "python_version"), f"'{build.python_version}' is not a Python version MAJOR.MINOR such as 3.10")
    elif build.python_version is not None:
        found = {catalog.prebuilt_python(catalog.executor_image_uri(pool.image or config.trainer.image,
                                                                    pool.hardware, config.region))
                 for pool in config.pools() if pool.role != "reduction_server" and pool.container is None}
        named = {py for py in found if py is not None}
        if named and build.python_version.strip() not in named:
            r.warn((*path, "python_version"), f"the base image's name says Python {', '.join(sorted(named))}, not "
                                              f"{build.python_version}: wheels built for another Python may not "
                                              "import; leave python_version out for a prebuilt base")
    if build.platform is not None and (problem := platform_problem(build.platform)) is not None:
        r.add((*path, "platform"), problem)
    root = config.source.parent if config.source is not None else None
    for i, entry in enumerate(build.requirements):
        try:
            read_requirements([entry], [is_requirements_file(entry)], root=root)
        except PackagingError as err:
            at = (*path, "requirements", i) if (*path, "requirements", i) in config.positions.values else \
                (*path, "requirements")
            r.add(at, str(err))


#: REGION-docker.pkg.dev (Artifact Registry), or a multi-region us/europe/asia; gcr.io's hosts are multi-regions.
_ARTIFACT_REGISTRY = re.compile(r"^(?P<location>[a-z0-9-]+)-docker\.pkg\.dev$")
_GCR = {"gcr.io": "us", "us.gcr.io": "us", "eu.gcr.io": "europe", "asia.gcr.io": "asia"}


def check_registry_region(r: Rules, path: tuple[str, ...], registry: str, region: str) -> None:
    """A warning when every replica would pull the image from another region (slow starts, egress charges)."""
    found = _ARTIFACT_REGISTRY.match(registry)
    location = found["location"] if found else _GCR.get(registry)
    if location is None:
        return
    if location in ("us", "europe", "asia"):
        if catalog.multi_region(region) == location:
            return
    elif location == region:
        return
    r.warn(path, f"the image is pushed to {registry} ({location}); the job runs in {region}: every replica pulls "
                 f"it across regions (slower starts, egress charges); use {region}-docker.pkg.dev/…")
