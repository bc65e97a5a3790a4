"""`vtrain local` of an image job in containers, and the image's build and push. Run by hand, as root (not a
test; needs docker-registry, runc, umoci):

    PYTHONPATH=. python benchmarks/image_local.py [--repeat 5] [--tf]

1. Container start overhead: a one-replica `trainer.build` job whose trainer prints one line, on a base of
   this machine's python3.11 (its libraries and the stdlib a start needs) pushed to a fresh docker-registry
   on 127.0.0.1; `vtrain local` with ``containers="always"`` (runc on the unpacked image) against
   ``containers="never"`` (the image's layers on this machine's Python), after one warm-up run of each
   (the rootfs unpacked, the layers cached). Reported: the whole call (build the layers, read the base's
   manifest, run, reap) and the replica's own seconds, median of --repeat runs; and the first container
   run, which pulls and unpacks.
2. With --tf: a TensorFlow base made from this machine's site-packages (what `import tensorflow, tf_keras`
   and vtrain's runtime load, /usr/lib/python3.11, and the libraries ldd lists for them), then the keras
   template (trainer.build on that base, no requirements) built and pushed with vtrain's own build
   (:func:`vtrain.trainer.image.build.build_and_push`): cold (empty layer cache, empty repository), the
   same files again, and a one-line change to trainer/task.py; time, bytes sent and each layer's size.
   With --tf-run also: the template run, chief and one worker, in containers and on this machine's
   Python, the wall time of each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.trainer.image_helpers import (  # noqa: E402
    make_trainer,
    push_base,
    python_rootfs_entries,
    start_registry,
    stop_registry,
)
from vtrain.jobfile.load import load_config  # noqa: E402
from vtrain.local.runner import run_local  # noqa: E402
from vtrain.trainer.image.layers import Entry  # noqa: E402

JOB = """name: bench-local
region: us-central1
trainer:
  package: {package}
  module: trainer.task
  image: {base}
  build:
    repository: {host}/team/trainer
    python_version: "3.11"
cluster:
  chief: {{machine_type: n1-standard-4}}
"""


def timed_run(job: Path, cache: Path, out: Path, containers: str) -> tuple[float, float]:
    start = time.perf_counter()
    handle = run_local(load_config(job, target="local"), cache_dir=cache, output_dir=out, containers=containers,
                       keep=False)
    state = handle.wait(timeout=600)
    if state != "JOB_STATE_SUCCEEDED":
        sys.exit(f"{containers}: {state}: {handle.error}")
    return time.perf_counter() - start, float(handle.summary["seconds"])


def start_overhead(tmp: Path, host: str, repeat: int) -> None:
    make_trainer(tmp / "t", body="print('hello from the replica')\n")
    job = tmp / "job.yaml"
    job.write_text(JOB.format(package=tmp / "t", base=f"{host}/base/python:base", host=host))
    cache = tmp / "cache"
    cold, _ = timed_run(job, cache, tmp / "out-cold", "always")
    rows = {}
    for mode in ("always", "never"):
        timed_run(job, cache, tmp / f"out-warm-{mode}", mode)
        runs = [timed_run(job, cache, tmp / f"out-{mode}-{i}", mode) for i in range(repeat)]
        rows[mode] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    print(f"first container run (pull nothing: base on 127.0.0.1; unpack {du(cache / 'containers' / 'rootfs')}): "
          f"{cold:.2f} s")
    for mode, label in (("always", "container (runc)"), ("never", "host Python")):
        call, replica = rows[mode]
        print(f"{label:<18} whole call {call:6.2f} s   replica {replica:6.2f} s   (median of {repeat})")
    print(f"container start overhead: {rows['always'][1] - rows['never'][1]:+.2f} s per replica start, "
          f"{rows['always'][0] - rows['never'][0]:+.2f} s per `vtrain local` call")


def du(path: Path) -> str:
    done = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True, check=False)
    return (done.stdout.split() or ["?"])[0]


def tf_entries(work: Path) -> list[Entry]:
    """python3.11 + its whole stdlib + the site-packages TensorFlow, tf_keras and vtrain's runtime load, at
    /usr/local/lib/python3.11/dist-packages (Debian's python3.11 site dir), + the libraries ldd lists."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p, "tensorflow").is_dir()))
    probe = ("import sys, json\nimport tensorflow, tf_keras\nfrom vtrain import runtime\n"
             f"sp = {str(site) + '/'!r}\n"
             "print(json.dumps(sorted({m.__file__[len(sp):].split('/')[0] for m in list(sys.modules.values()) "
             "if getattr(m, '__file__', None) and m.__file__.startswith(sp)})))")
    done = subprocess.run(["/usr/bin/python3.11", "-c", probe], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{REPO}", "TF_CPP_MIN_LOG_LEVEL": "3"})
    tops = set(json.loads(done.stdout.strip().splitlines()[-1])) | {p.name for p in site.glob("*.libs")}
    entries: list[Entry] = []
    sos: list[Path] = [Path("/usr/bin/python3.11")]
    for top in sorted(tops):
        root = site / top
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        for f in files:
            if "/include/" in str(f) or f.suffix in (".h", ".pyc"):
                continue
            entries.append((f"usr/local/lib/python3.11/dist-packages/{f.relative_to(site)}", f,
                            os.access(f, os.X_OK)))
            if ".so" in f.name:
                sos.append(f)
    std = Path("/usr/lib/python3.11")
    for f in std.rglob("*"):
        if f.is_file() and not f.is_symlink() and "__pycache__" not in f.parts and "test" not in f.parts:
            entries.append((str(f).lstrip("/"), f, False))
            if f.suffix == ".so":  # lib-dynload's extension modules: _ctypes needs libffi, _ssl libssl, ...
                sos.append(f)
    libs: set[str] = set()
    for i in range(0, len(sos), 50):
        listed = subprocess.run(["ldd", *map(str, sos[i:i + 50])], capture_output=True, text=True, check=False)
        for line in listed.stdout.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 3 else parts[0] if parts else ""
            if path.startswith("/") and os.path.isfile(path) and not path.startswith(str(site)):
                libs.add(path)
    have = {name for name, _, _ in entries}
    for lib in sorted(libs):
        if lib.lstrip("/") not in have:
            entries.append((lib.lstrip("/"), Path(os.path.realpath(lib)), True))
    entries += [("usr/bin/python3.11", Path("/usr/bin/python3.11"), True),
                ("usr/bin/python3", Path("/usr/bin/python3.11"), True)]
    seen: dict[str, Entry] = {}
    for entry in entries:
        seen.setdefault(entry[0], entry)
    return list(seen.values())


def build_push(tmp: Path, host: str, client: object) -> None:
    from vtrain.trainer.image.build import build_and_push
    from vtrain.trainer.image.config import ImageSpec

    start = time.perf_counter()
    entries = tf_entries(tmp)
    push_base(client, "base/tf", entries, tmp,  # type: ignore[arg-type]
              env=["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHON_VERSION=3.11", "LANG=C.UTF-8"])
    base_blob = tmp / "base-base_tf.tar.gz"
    print(f"TF base: {len(entries):,} files, layer {base_blob.stat().st_size / 1e6:,.0f} MB compressed, built and "
          f"pushed in {time.perf_counter() - start:.0f} s")
    trainer = tmp / "keras"
    shutil.copytree(REPO / "trainer_templates" / "keras", trainer)
    spec = ImageSpec(base=f"{host}/base/tf:base", repository=f"{host}/team/keras", module="trainer.task",
                     python_version="3.11", python="python3")
    cache = tmp / "layer-cache"
    for step in ("cold", "unchanged", "one-line change"):
        if step == "one-line change":
            task = trainer / "trainer" / "task.py"
            task.write_text(task.read_text() + "\n# a one-line change\n")
        began = time.perf_counter()
        pushed = build_and_push(spec, trainer, credentials=None, base_credentials=None, cache=cache)
        took = time.perf_counter() - began
        layers = ", ".join(f"{b['role']} {int(b['size']):,} B {b['action']}" for b in pushed.blobs  # type: ignore[call-overload]
                           if b["role"] != "base")
        print(f"{step:<16} {took:6.2f} s  sent {pushed.sent:>10,} B  [{layers}]")


KERAS_JOB = """name: bench-keras
region: us-central1
trainer:
  package: {package}
  module: trainer.task
  image: {host}/base/tf:base
  build:
    repository: {host}/team/keras
    python_version: "3.11"
  args: [--epochs=1, --steps-per-epoch=5]
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 1}}
"""


def keras_run(tmp: Path, host: str) -> None:
    """The keras template, chief + one worker (MultiWorkerMirroredStrategy), in containers and on this
    machine's Python: both must succeed; the wall time of each."""
    job = tmp / "keras.yaml"
    job.write_text(KERAS_JOB.format(package=tmp / "keras", host=host))
    for mode in ("always", "never"):
        call, replicas = timed_run(job, tmp / "keras-cache", tmp / f"keras-out-{mode}", mode)
        print(f"keras template, 2 replicas, containers={mode}: whole call {call:.1f} s, replicas {replicas:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tf", action="store_true", help="also build a TensorFlow base and push the keras template")
    parser.add_argument("--tf-run", action="store_true", help="with --tf: also run the keras template (2 replicas) "
                        "in containers and on this machine's Python")
    opts = parser.parse_args()
    for tool in ("docker-registry", "runc", "umoci"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed")
    entries = python_rootfs_entries()
    if entries is None:
        sys.exit("no /usr/bin/python3.11 to make a base image from")
    python = next(path for name, path, _ in entries if name == "usr/bin/python3.11")
    entries.append(("usr/bin/python3", python, True))
    with tempfile.TemporaryDirectory(prefix="vtrain-bench-") as tmp_text:
        tmp = Path(tmp_text)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "xdg")
        registry = start_registry(tmp / "registry")
        try:
            push_base(registry.client(), "base/python", entries, tmp,
                      env=["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHON_VERSION=3.11"])
            start_overhead(tmp, registry.host, opts.repeat)
            if opts.tf:
                build_push(tmp, registry.host, registry.client())
                if opts.tf_run:
                    keras_run(tmp, registry.host)
        finally:
            stop_registry(registry)


if __name__ == "__main__":
    main()
