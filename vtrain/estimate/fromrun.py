"""`vtrain estimate --from-run`: the advisor's inputs from a rehearsal's profile, each with its source.

A run folder (``OUTPUT/vtrain-local/JOB_ID``) holds ``profile/REPLICA.json`` from every replica
(:mod:`vtrain.runtime.profile_record`). Each input is **measured** (from the profile), **given**
(a flag, which always wins over a measurement) or **assumed** (the advisor's default). The one input a
CPU rehearsal cannot measure is the step's compute on the target accelerator: it is the measured
FLOPs per step over the target's peak (:data:`vtrain.GPU_PEAK_TFLOPS`) at a stated
utilisation, or the measured step time when the rehearsal ran on the target's kind of device.

What is wrong with a run is one line each, saying what the estimate falls back to; ``strict`` turns
the lines that mean "this may not be your job" (another job's profile, an unreadable version, a run
that did not succeed) into errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vtrain.constants import LOCAL_RUNS_DIR, MIN_TIMED_STEPS, PROFILE_FOLDER, PROFILE_VERSION
from vtrain.errors import EstimateError
from vtrain.estimate.memory import Device
from vtrain.estimate.peaks import GPU_PEAK_TFLOPS, TPU_PEAK_TFLOPS
from vtrain.estimate.profile import check_profile, read_profile
from vtrain.foreign import printable
from vtrain.foreign.data import Doc, Unreadable, kind, read_json, source_name

DEFAULT_UTILISATION = 0.4
UTILISATION_RANGE = (0.3, 0.6)
_GRAD = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_POLICY = {"float32": "fp32", "mixed_bfloat16": "mixed_bf16", "mixed_float16": "mixed_fp16"}
_SLOTS = {0: "sgd", 1: "momentum", 2: "adam"}
SUCCEEDED = "JOB_STATE_SUCCEEDED"
#: A run's result.json: a long run's steps make it a few MB.
RESULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Source:
    """Where one input came from, and the words that say so."""

    value: Any
    source: str  # measured | given | assumed
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "detail": self.detail}


@dataclass(frozen=True)
class Run:
    """A run folder's profiles: the chief's (or the first replica's) and all of them."""

    path: Path
    job_id: str | None
    state: str | None  # result.json's state; None: the run has not ended (or left none)
    profiles: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)

    @property
    def main(self) -> dict[str, Any]:
        return self.profiles.get("chief-0") or self.profiles[sorted(self.profiles)[0]]


def run_folder(path: Path) -> Path:
    """A run folder from what the user named: the run folder, its profile/, or a base output dir (its latest)."""
    if str(path).startswith("gs:/"):
        raise EstimateError(f"--from-run {path}: read from a local folder; copy a Vertex job's profiles first "
                            "(gcloud storage cp -r gs://BASE_OUTPUT_DIR/vtrain-profile/JOB_ID DIR)")
    if path.name == PROFILE_FOLDER and path.is_dir():
        return path.parent
    if (path / PROFILE_FOLDER).is_dir():
        return path
    latest = path / LOCAL_RUNS_DIR / "latest"
    if latest.is_dir():
        return latest.resolve()
    if not path.exists():
        raise EstimateError(f"--from-run {path}: no such folder")
    if any(path.glob("*-[0-9]*.json")):  # a Vertex job's vtrain-profile/JOB_ID, copied here: the profiles alone
        return path
    raise EstimateError(f"--from-run {path}: no {PROFILE_FOLDER}/ here; give a run folder "
                        f"(OUTPUT/{LOCAL_RUNS_DIR}/JOB_ID) whose trainer profiles itself (the templates do; "
                        "other trainers call runtime.profile or runtime.profile_callback)")


def last_run(base_output_dir: str | None) -> Path:
    """--last: the job's own latest local run (its base_output_dir must be a local folder)."""
    if not base_output_dir or "://" in base_output_dir:
        raise EstimateError(f"--last needs the job's base_output_dir to be a local folder (it is "
                            f"{base_output_dir or 'unset'}); give --from-run OUTPUT/{LOCAL_RUNS_DIR}/JOB_ID")
    latest = Path(base_output_dir) / LOCAL_RUNS_DIR / "latest"
    if not latest.is_dir():
        raise EstimateError(f"--last: {latest} does not exist: this job has no local run there yet "
                            f"(`vtrain local` it first, or give --from-run DIR)")
    return latest.resolve()


def load_run(path: Path, expected_hash: str | None, strict: bool = False) -> Run:
    """Read every profile of the run at `path`; refuse only what leaves nothing to measure (or `strict`)."""
    folder = run_folder(path)
    warnings: list[str] = []

    def problem(line: str) -> None:
        if strict:
            raise EstimateError(f"{line} (--strict)")
        warnings.append(line)

    profiles: dict[str, dict[str, Any]] = {}
    profiles_at = folder / PROFILE_FOLDER if (folder / PROFILE_FOLDER).is_dir() else folder
    for file in sorted(profiles_at.glob("*.json")):
        try:
            data = read_profile(file)
        except Unreadable as err:
            problem(f"{err}: not a profile; left out")
            continue
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version != PROFILE_VERSION:
            what = "an older" if not isinstance(version, int) or version < PROFILE_VERSION else "a newer"
            problem(f"{source_name(file)}: profile version {kind(version)} is from {what} vtrain (this one reads "
                    f"{PROFILE_VERSION}); left out, so its inputs fall back to flags and defaults")
            continue
        try:
            check_profile(data, source_name(file))
        except Unreadable as err:  # a profile of this format with a wrong number: no verdict rests on it
            raise EstimateError(f"--from-run: {err}") from None
        profiles[printable(str(data.get("replica") or file.stem), limit=100)] = data
    if not profiles:
        raise EstimateError(f"--from-run {source_name(folder)}: no readable profile in {source_name(profiles_at)}"
                            + (f" ({warnings[-1]})" if warnings else ""))
    state, result_problem = None, False
    if (folder / "result.json").exists():
        try:
            state = Doc(read_json(folder / "result.json", max_bytes=RESULT_MAX_BYTES),
                        source_name(folder / "result.json")).text("state", limit=100)
        except Unreadable as err:
            result_problem = True
            problem(f"{err}; the run is taken as one that has not ended")
    job_id = next(iter(profiles.values())).get("job_id")
    run = Run(folder, None if job_id is None else printable(job_id), state, profiles, warnings)
    found = run.main.get("config_hash")
    if expected_hash and found and found != expected_hash:
        problem(f"{folder} is a run of another job shape (profile config hash {printable(found)}, this job file's "
                f"{expected_hash}): its measurements are used as they are")
    if state is not None and state != SUCCEEDED:
        ended = printable(state.removeprefix("JOB_STATE_"))
        problem(f"{folder} ended {ended}: the measurements it reached are used")
    elif state is None and profiles_at != folder and not result_problem:
        # (a copied Vertex job's profiles have no result.json: "complete" says)
        problem(f"{folder} has no result.json (still running, or killed): the measurements it reached are used")
    incomplete = sorted(name for name, p in profiles.items() if not p.get("complete"))
    if incomplete:
        problem(f"{', '.join(incomplete)} wrote an incomplete profile (the process ended before training did)")
    return run


# --------------------------------------------------------------------------- inputs


def _peak_flops(device: Device, precision: str) -> float | None:
    """Peak FLOP/s of one replica's device from the catalog; None when the catalog lacks it."""
    from vtrain import catalog

    if device.kind == "gpu" and device.accelerator in GPU_PEAK_TFLOPS:
        fp32, half = GPU_PEAK_TFLOPS[device.accelerator]
        return (fp32 if precision == "fp32" else half) * 1e12
    if device.kind == "tpu" and device.accelerator in TPU_PEAK_TFLOPS:
        cores = catalog.TPU_MEMORY[device.accelerator].cores_per_chip
        return TPU_PEAK_TFLOPS[device.accelerator] * 1e12 / cores
    return None


def same_device(profile: dict[str, Any], device: Device) -> bool:
    """Did the rehearsal run on the target's kind of device (a CPU for a CPU pool, the same GPU model)?"""
    ran = profile.get("device") or {}
    if ran.get("kind") != device.kind:
        return False
    if device.kind != "gpu" or not device.accelerator:
        return True
    model = device.accelerator.removeprefix("NVIDIA_").removeprefix("TESLA_").split("_")[0]
    return model.lower() in str(ran.get("name", "")).lower().replace(" ", "_").split("_")


def _timed(profile: dict[str, Any]) -> tuple[float | None, int]:
    steps = profile.get("steps") or {}
    return steps.get("median_s"), int(steps.get("timed") or 0)


def _slowest(run: Run) -> tuple[str, float] | None:
    """The replica whose median step is slowest: a synchronous cluster goes at its pace."""
    times = [(name, _timed(p)[0]) for name, p in run.profiles.items()]
    known = [(name, t) for name, t in times if t is not None]
    return max(known, key=lambda row: row[1]) if known else None


def step_compute(run: Run, device: Device, precision: str, utilisation: float) -> tuple[float | None, str, list[str]]:
    """Seconds of compute per step on `device`, how it was found, and what fell back."""
    p = run.main
    lines: list[str] = []
    slowest = _slowest(run)
    if same_device(p, device):
        if slowest is not None:
            name, median = slowest
            steps = p.get("steps") or {}
            share = steps.get("input_wait_share")
            wait = f", input wait {share:.0%} of it" if isinstance(share, float) else ""
            return median, (f"median step after warm-up of {name} ({_timed(run.profiles[name])[1]} steps timed, p90 "
                            f"{run.profiles[name]['steps']['p90_s'] * 1e3:.1f} ms{wait}) on the same kind of device; "
                            "it includes the rehearsal's own exchange over localhost"), lines
        timed = _timed(p)[1]
        lines.append(f"only {timed} steps timed after warm-up (need {MIN_TIMED_STEPS}): no measured step time")
    flops = (p.get("flops") or {}).get("per_step")
    peak = _peak_flops(device, precision)
    if flops and peak:
        seconds = flops / (peak * utilisation)
        return seconds, (f"{flops:.4g} FLOPs per step (per replica) / ({peak / 1e12:g} TFLOPS peak of {device.name} "
                         f"× {utilisation:.0%} utilisation)"), lines
    if not flops:
        lines.append(f"the profile has no FLOPs ({(p.get('flops') or {}).get('note', 'not counted')})")
    elif peak is None:
        lines.append(f"the catalog has no peak FLOPs for {device.name}")
    lines.append("step compute falls back to --step-compute, else the communication-bound ceiling")
    return None, "", lines


def _optimizer(p: dict[str, Any]) -> tuple[str, str] | None:
    opt = p.get("optimizer")
    if not isinstance(opt, dict) or opt.get("slots_per_param") is None:
        return None
    slots = round(float(opt["slots_per_param"]))
    name = _SLOTS.get(min(slots, 2), "adam")
    called = printable(str(opt.get("name")))
    return name, f"{called}: {opt.get('slot_bytes')} B of slots = {opt['slots_per_param']:g} per parameter"


def measured_inputs(run: Run, device: Device, utilisation: float) -> tuple[dict[str, Source], list[str]]:
    """Every advisor input the profile holds, as measured Sources; and what it lacks, as lines."""
    p = run.main
    out: dict[str, Source] = {}
    lines: list[str] = []
    params = p.get("count_params")
    if isinstance(params, int) and params > 0:
        info = p.get("parameters") or {}
        out["params"] = Source(params, "measured", f"{info.get('trainable')} trainable + "
                                                   f"{info.get('non_trainable')} non-trainable (model.count_params())")
    by_dtype = (p.get("parameters") or {}).get("by_dtype") or {}
    trainable = {k: v.get("trainable", 0) for k, v in by_dtype.items() if v.get("trainable")}
    if trainable:
        top = max(trainable, key=lambda k: trainable[k])
        if top in _GRAD:
            out["grad_dtype"] = Source(_GRAD[top], "measured", f"{p.get('gradient_bytes')} B of gradients per step "
                                                                f"({top} variables)")
    precision = _POLICY.get(str(p.get("precision")))
    if precision:
        out["precision"] = Source(precision, "measured", f"Keras policy {p.get('precision')}")
    opt = _optimizer(p)
    if opt:
        out["optimizer"] = Source(opt[0], "measured", opt[1])
    per_example, examples = p.get("activation_bytes_per_example"), p.get("examples_per_step")
    replicas = int(p.get("replicas_in_sync") or 1)
    if isinstance(per_example, int) and isinstance(examples, int) and examples > 0:
        batch = examples // replicas
        out["activations"] = Source(float(per_example * batch), "measured",
                                    f"{per_example} B per example (layer outputs) × {batch} examples per replica")
    seconds, how, fallback = step_compute(run, device, precision or "fp32", utilisation)
    lines += fallback
    if seconds is not None:
        out["step_compute_s"] = Source(seconds, "measured", how)
    return out, lines


def memory_check(run: Run, model_state: float, model_total: float) -> dict[str, Any]:
    """The profile's memory next to the advisor's model of the same inputs.

    ``measured_state_bytes`` counts the variables (weights + gradients + slots); ``training_bytes`` is
    what the process held at its peak beyond what it held when the model was attached, plus the
    weights it already held then: on a GPU the device's peak itself. Both against the model's
    ``model_state_bytes`` and ``model_total_bytes`` (state + activations)."""
    p = run.main
    weights = sum(int(v.get("bytes", 0)) for v in ((p.get("parameters") or {}).get("by_dtype") or {}).values())
    slots = int((p.get("optimizer") or {}).get("slot_bytes") or 0)
    measured_state = weights + int(p.get("gradient_bytes") or 0) + slots
    mem = p.get("memory") or {}
    peak, baseline = mem.get("peak_bytes"), mem.get("baseline_bytes")
    training = None
    if isinstance(peak, int) and mem.get("kind") == "device":
        training = peak
    elif isinstance(peak, int) and isinstance(baseline, int):
        training = peak - baseline + weights
    return {
        "measured_state_bytes": measured_state,
        "model_state_bytes": model_state,
        "state_ratio": measured_state / model_state if model_state else None,
        "training_bytes": training,
        "model_total_bytes": model_total,
        "training_ratio": training / model_total if training is not None and model_total else None,
        "peak_bytes": peak,
        "peak_kind": mem.get("kind"),
        "baseline_bytes": baseline,
        "start_bytes": mem.get("start_bytes"),
    }


__all__ = ["DEFAULT_UTILISATION", "UTILISATION_RANGE", "Run", "Source", "last_run", "load_run", "measured_inputs",
           "memory_check", "run_folder", "same_device", "step_compute"]
