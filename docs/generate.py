"""The manual's generated parts: an mkdocs hook (mkdocs.yml `hooks:`) and a script.

Four reference pages hold a generated block between markers, committed so they read on GitHub too:
the job file (`vtrain schema --markdown`), errors and exit codes (vtrain/errors.py's tree and
vtrain/handle.py's table), environment variables (every name vtrain's code reads or sets, each with
what it means), the JSON Schema of `vtrain catalog --json`. The hook fails the build when a block differs
from what the code says now, or when
the code reads a variable this file does not describe; `python docs/generate.py` rewrites the
blocks. The SDK and `vtrain.runtime` pages are filled in at build time: one mkdocstrings entry per name of
the package's `__all__`, in the order of use SDK_SECTIONS and RUNTIME_SECTIONS give (the hook fails the build
on a public name neither places). docs/roles.py renders the docstrings' Sphinx roles as links.

This file is no page of the site (mkdocs.yml excludes it) and no part of the package.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vtrain.errors import VtrainError

REPO = Path(__file__).resolve().parents[1]
END = "<!-- end generated -->"
SDK_MARKER = "<!-- vtrain.__all__ -->"
RUNTIME_MARKER = "<!-- vtrain.runtime.__all__ -->"


# ---------------------------------------------------------------- errors and exit codes

def _first_paragraph(obj: object) -> str:
    """The first paragraph of a docstring, as Markdown that reads as the docstring's text (a `[` stays a
    bracket, not a link; vtrain/jobfile/reference.py's `markdown_text`, as the job file's table)."""
    from vtrain.jobfile.reference import markdown_text

    doc = inspect.getdoc(obj) or ""
    return markdown_text(" ".join(doc.split("\n\n", 1)[0].split())).replace("|", "\\|")


def _exit_code(cls: type[VtrainError]) -> str:
    from vtrain import errors

    if cls is errors.Interrupted:
        return f"{128 + signal.SIGINT} (Ctrl-C), {128 + signal.SIGTERM} (SIGTERM)"
    if issubclass(cls, errors.WaitTimeout):
        return str(errors.WAIT_TIMEOUT_EXIT_CODE)
    if issubclass(cls, errors.JobFailed):
        return "the job's end state (above)"
    return str(cls.exit_code)


def errors_block() -> str:
    """The exit codes table (vtrain/handle.py's states, the error classes' codes), then every class of
    vtrain/errors.py's tree, depth first."""
    from vtrain import errors, handle

    codes: dict[int, list[str]] = {
        0: ["the command did what it was asked; a job it waited for ended `JOB_STATE_SUCCEEDED`"],
        errors.VtrainError.exit_code: ["any other error: one line, no traceback"],
        errors.ConfigError.exit_code: [f"an invalid job file or command line (`{errors.ConfigError.__name__}`, "
                                       f"`{errors.UsageError.__name__}`)"],
        errors.WAIT_TIMEOUT_EXIT_CODE: ["a wait ran out while the job is still live (`--wait-timeout`; "
                                        "`status --exit-code` before the end)"],
        128 + signal.SIGINT: ["Ctrl-C stopped `package` or `submit` (`local` ends the job CANCELLED: "
                              f"{handle.EXIT_CODES[handle.CANCELLED]})"],
        128 + signal.SIGTERM: ["SIGTERM stopped `package` or `submit`"],
    }
    for state, code in handle.EXIT_CODES.items():
        if code:
            codes.setdefault(code, []).append(f"the job ended `{state}`")
    codes.setdefault(handle.OTHER_EXIT_CODE, []).append("any other end state")
    lines = ["| exit | when |", "|---|---|"]
    lines += [f"| {code} | {'; '.join(whens)} |" for code, whens in sorted(codes.items())]
    lines += ["", "| error | exit | what it means |", "|---|---|---|"]

    def walk(cls: type[errors.VtrainError], depth: int) -> None:
        indent = "&nbsp;" * 4 * (depth - 1) + "└ " if depth else ""
        lines.append(f"| {indent}`{cls.__name__}` | {_exit_code(cls)} | {_first_paragraph(cls)} |")
        for sub in sorted(cls.__subclasses__(), key=lambda c: c.__name__):
            if sub.__module__ == errors.__name__:
                walk(sub, depth + 1)

    walk(errors.VtrainError, 0)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- environment variables

#: Every environment variable vtrain reads or sets, by who sets it. The hook fails the build when the
#: code names one that is not here (add it), or when one here is named nowhere in vtrain/ (remove it).
ENVIRONMENT: dict[str, dict[str, str]] = {
    "You set (the CLI and the SDK read them)": {
        "VTRAIN_PROJECT": "The Google Cloud project, after `--project` and the job file's `project`; then "
                          "GOOGLE_CLOUD_PROJECT, then gcloud's configuration.",
        "VTRAIN_REGION": "The Vertex AI region, after `--region` and the job file's `region`; then "
                         "GOOGLE_CLOUD_REGION, gcloud's `ai/region`, then us-central1.",
        "VTRAIN_API_ENDPOINT": "The Vertex AI endpoint (as `--api-endpoint`): `host:port` or a URL; "
                               "`http://127.0.0.1:PORT` for `vtrain emulator`.",
        "VTRAIN_POLL": "Seconds between two asks for a job's state (and new log lines) while `submit --wait`, "
                       "`status --watch`, `logs --follow` or `timeline` follows it, as `--poll` (default 10); also "
                       "what a pipeline step's `vtrain submit --wait` uses. A second or less suits `vtrain emulator`.",
        "VTRAIN_NETWORK_TIMEOUT": "Seconds each attempt of a call to Vertex AI, Cloud Logging or Cloud Storage "
                                  "may take (default 30).",
        "VTRAIN_CONTAINER_RUNTIME": "The OCI runtime `vtrain local` runs image jobs' replicas with (`runc` or "
                                    "`crun`); unset, the first of them that can run a container here.",
        "VTRAIN_RUNTIME": "What a Python package job's replicas run on under `vtrain local`, `vtrain emulator "
                          "--run-jobs` and tuning trials when `--runtime` is `auto`: `stack` (the image's TensorFlow "
                          "and Python, the default for a prebuilt image), `image` (the prebuilt image itself, in "
                          "runc/crun) or `host` (this machine's Python and TensorFlow).",
        "VTRAIN_REGISTRY_MIRRORS": "`HOST=MIRROR[,HOST=MIRROR]`: every image vtrain pulls from HOST (a prebuilt "
                                   "image for `--runtime image`, a `trainer.build` base, a container pool's image) "
                                   "is read from MIRROR, the same repository path under it; e.g. "
                                   "`us-docker.pkg.dev=127.0.0.1:5000`.",
        "VTRAIN_CACHE_DIR": "Where `vtrain local` caches trainer environments, sdists and downloads "
                            "(default `$XDG_CACHE_HOME/vtrain`, else `~/.cache/vtrain`).",
        "VTRAIN_STATE_DIR": "Where `vtrain submit` keeps the ids of creates whose answer was lost "
                            "(default `$XDG_STATE_HOME/vtrain`, else `~/.local/state/vtrain`).",
        "GOOGLE_CLOUD_PROJECT": "The project, when neither `--project`, the job file nor VTRAIN_PROJECT names one.",
        "GOOGLE_CLOUD_REGION": "The region, after VTRAIN_REGION.",
        "GOOGLE_APPLICATION_CREDENTIALS": "A service account key file for Google's clients (else "
                                          "`gcloud auth application-default login`'s credentials).",
        "CLOUDSDK_CONFIG": "gcloud's configuration folder, read for the project and `ai/region` "
                           "(default `~/.config/gcloud`); CLOUDSDK_CORE_PROJECT and CLOUDSDK_AI_REGION beat "
                           "its files, as in gcloud.",
        "CLOUDSDK_ACTIVE_CONFIG_NAME": "Which gcloud configuration is active.",
        "STORAGE_EMULATOR_HOST": "Send Cloud Storage calls to an emulator (gcp-storage-emulator) instead.",
        "XDG_CACHE_HOME": "The base of the default VTRAIN_CACHE_DIR.",
        "XDG_STATE_HOME": "The base of the default VTRAIN_STATE_DIR.",
        "CI": "When set, `vtrain local`, `submit --wait` and `status --watch` print plain lines instead of "
              "the live view.",
        "TERM": "`dumb`: plain lines instead of the live view.",
    },
    "You set in the job's env (`trainer.env`, a pool's `env`); the runtime reads them in each replica": {
        "VTRAIN_MIXED_PRECISION": "Overrides `runtime.mixed_precision(policy)`: `auto`, `mixed_bfloat16`, "
                                  "`mixed_float16` or `float32`.",
        "VTRAIN_COLLECTIVE_TIMEOUT": "Seconds before a collective gives up, so a dead peer fails the job instead "
                                     "of hanging it (default 300; 0 turns it off); under `horovod` also how long "
                                     "the ranks may take to all make their first tensor.",
        "VTRAIN_PROFILE_DIR": "Where the rehearsal profile is written (default: the run folder; `0` or `off`: "
                              "nowhere).",
        "VTRAIN_STEP_LOG": "`0` turns off the step lines `report_step` logs on Vertex AI for `submit --wait`'s "
                           "view; `1` turns them on elsewhere (the emulator's `--run-jobs` does).",
        "VTRAIN_STEP_LOG_EVERY": "At most one step line every this many seconds per replica (default 5).",
        "VTRAIN_DILOCO_TOKEN": "The secret DiLoCo learners show the syncer (default: derived from CLOUD_ML_JOB_ID).",
        "VTRAIN_LOG_LEVEL": "The DiLoCo syncer's log level (default INFO).",
        "VTRAIN_LOCAL_DEVICES": "DTensor: how many devices each replica makes (`vtrain local` sets it for CPU "
                                "replicas; the job's own value wins).",
        "VTRAIN_EXPERIMENT_API_ENDPOINT": "Where the chief logs its Experiment Run (tests, `vtrain emulator`): that "
                                          "endpoint over REST with anonymous credentials, not Vertex AI's.",
    },
    "vtrain sets them in each replica (from the job file)": {
        "VTRAIN_DISTRIBUTION_STRATEGY": "The job file's `distribution_strategy`, which `runtime.strategy()` builds.",
        "VTRAIN_DTENSOR_MESH": "The `dtensor.mesh`, e.g. `batch=2,model=4`, for `runtime.dtensor_mesh()`.",
        "VTRAIN_DILOCO": "The job file's `diloco:` block as JSON.",
    },
    "`vtrain local` sets them in each replica (Vertex AI does not)": {
        "VTRAIN_RESTART_COUNT": "How often this replica was restarted in place in this attempt of the job.",
        "VTRAIN_JOB_ATTEMPT": "1, then 2 after a whole-job retry, and so on.",
        "VTRAIN_STATUS_FILE": "Where `runtime.report_step` writes the step this replica last finished "
                              "(the live view's step column).",
        "VTRAIN_FAULT_STEPS": "The steps at which a `step:N` fault is pending for this process: "
                              "`runtime.report_step` pauses at the first report at or past each (at most 3 s), so "
                              "the fault lands at that step.",
        "CUDA_VISIBLE_DEVICES": "The machine's GPUs split across the replicas.",
    },
    "`vtrain.runtime` sets them inside a replica, for TensorFlow": {
        "DTENSOR_CLIENT_ID": "DTensor: this replica's client index, derived by `runtime.dtensor_mesh()` from "
                             "TF_CONFIG (or CLUSTER_SPEC) unless already set.",
        "DTENSOR_NUM_CLIENTS": "DTensor: how many clients (the training replicas).",
        "DTENSOR_JOB_NAME": "DTensor: the clients' job name.",
        "DTENSOR_JOBS": "DTensor: every client's address, chief first.",
        "DTENSOR_GPU_USE_NCCL_COMMUNICATION": "DTensor on GPUs: collectives through NCCL (`1` unless set).",
        "TF_USE_LEGACY_KERAS": "`1`: `tf.keras` is tf_keras (Keras 2); `runtime.keras()` sets it under "
                               "multi-worker strategies, where Keras 3's model.fit fails.",
    },
    "Vertex AI sets them for a job with `experiment` and `experiment_run` (the SDK reads them)": {
        "AIP_EXPERIMENT_NAME": "The job's experiment; with AIP_EXPERIMENT_RUN_NAME, the chief's `vtrain.runtime` "
                               "logs the trainer's arguments as the run's params and its last reported metrics.",
        "AIP_EXPERIMENT_RUN_NAME": "The job's experiment run (its name or full context name).",
    },
    "Vertex AI sets them in each replica (`vtrain local` sets the same)": {
        "CLUSTER_SPEC": "Vertex's description of the cluster and of this replica's task.",
        "TF_CONFIG": "The cluster for TensorFlow (chief, worker, ps); only when the job has more than one replica.",
        "AIP_MODEL_DIR": "Where the chief saves the model (`base_output_dir`/model/).",
        "AIP_CHECKPOINT_DIR": "Where checkpoints go (`base_output_dir`/checkpoints/).",
        "AIP_TENSORBOARD_LOG_DIR": "Where TensorBoard logs go (`base_output_dir`/logs/).",
        "CLOUD_ML_JOB_ID": "The job's id.",
        "CLOUD_ML_TRIAL_ID": "A tuning trial's id.",
        "CLOUD_ML_HP_METRIC_FILE": "Where `runtime.report_metric` writes a tuning trial's metric "
                                   "(default /tmp/hypertune/output.metrics).",
    },
}

#: The names the scan counts as environment variables (quoted strings in vtrain/ equal to one).
_ENV_NAME = re.compile(r"^(?:(?:VTRAIN_|AIP_|CLOUD_ML_|CLOUDSDK_|GOOGLE_|DTENSOR_|XDG_)[A-Z0-9_]+|TF_CONFIG|"
                       r"CLUSTER_SPEC|STORAGE_EMULATOR_HOST|CUDA_VISIBLE_DEVICES|TF_USE_LEGACY_KERAS|CI|TERM)$")
#: String constants that look like a variable's name but are not one.
_NOT_ENV = {"VTRAIN_LABELS", "VTRAIN_IGNORE", "AIP_OUTPUT_DIRS"}


def _source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "vtrain").rglob("*.py")))


def environment_in_code(source: str) -> set[str]:
    """Every quoted string in vtrain/'s source that is an environment variable's name."""
    quoted = set(re.findall(r"[\"']([A-Z][A-Z0-9_]*)[\"']", source))
    return {name for name in quoted if _ENV_NAME.match(name)} - _NOT_ENV


def environment_problems() -> list[str]:
    """What ENVIRONMENT lacks (a name the code uses) or keeps too long (a name vtrain/ no longer has)."""
    documented = {name for group in ENVIRONMENT.values() for name in group}
    source = _source()
    words = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", source))
    problems = [f"vtrain/ uses {name}: describe it in docs/generate.py's ENVIRONMENT"
                for name in sorted(environment_in_code(source) - documented)]
    problems += [f"docs/generate.py's ENVIRONMENT describes {name}, which vtrain/ no longer names: remove it"
                 for name in sorted(documented - words)]
    return problems


def environment_block() -> str:
    lines: list[str] = []
    for group, names in ENVIRONMENT.items():
        lines += [f"## {group}", "", "| variable | meaning |", "|---|---|"]
        lines += [f"| `{name}` | {meaning} |" for name, meaning in names.items()]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- the pages and the hook

def _job_file_block() -> str:
    """`vtrain schema --markdown`'s output, as the command prints it."""
    from click.testing import CliRunner

    from vtrain.cli import cli

    result = CliRunner().invoke(cli, ["schema", "--markdown"])
    if result.exit_code:
        raise RuntimeError(f"vtrain schema --markdown failed: {result.output}")
    return result.stdout


def _catalog_schema_block() -> str:
    """The JSON Schema of `vtrain catalog --json`'s document, as a fenced block."""
    import json

    from vtrain.catalog.document import document_schema

    return f"```json\n{json.dumps(document_schema(), indent=2)}\n```\n"


def _horovod_block() -> str:
    """What of Horovod's API vtrain.horovod has, what it refuses and why, and Horovod's tests accounted for
    (vtrain/horovod/upstream.py, the one list the Horovod tests read too)."""
    from vtrain.horovod import upstream

    implemented = {}
    for module, ours in upstream.MODULES.items():
        path = REPO / ours.replace(".", "/")
        source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text(encoding="utf-8")
        # __all__ read from the source: importing the API modules would import TensorFlow into the docs build
        found = [node.value for node in ast.parse(source).body if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
        names = set(ast.literal_eval(found[0])) if found else set()
        implemented[module] = names | ({"callbacks"} if path.is_dir() and (path / "callbacks.py").is_file() else set())
    return upstream.markdown(implemented)


#: page -> (the marker its block starts after, the block's generator)
PAGES: dict[str, tuple[str, Callable[[], str]]] = {
    "docs/reference/catalog.md": ("<!-- generated by docs/generate.py from vtrain/catalog/document.py -->",
                                  _catalog_schema_block),
    "docs/reference/job-file.md": ("<!-- generated by vtrain schema --markdown -->", _job_file_block),
    "docs/reference/errors.md": ("<!-- generated by docs/generate.py from vtrain/errors.py -->", errors_block),
    "docs/reference/environment.md": ("<!-- generated by docs/generate.py from ENVIRONMENT -->", environment_block),
    "docs/guides/horovod.md": ("<!-- generated by docs/generate.py from vtrain/horovod/upstream.py -->",
                               _horovod_block),
}


def refreshed(page: str) -> tuple[str, str]:
    """The page as it is, and as it should be with its block generated now."""
    begin, generate = PAGES[page]
    text = (REPO / page).read_text(encoding="utf-8")
    if text.count(begin) != 1 or text.count(END) != 1:
        raise ValueError(f"{page} needs one {begin} … {END} block")
    head, rest = text.split(begin)
    _, tail = rest.split(END)
    return text, head + begin + "\n" + generate() + END + tail


def stale() -> list[str]:
    """One line per generated page that differs from the code, and per undescribed variable."""
    found = [f"{page} is stale: run `python docs/generate.py`" for page in PAGES if len(set(refreshed(page))) == 2]
    return found + environment_problems() + api_problems()


#: The SDK reference in the order a program uses it: each section's names, every name of `vtrain.__all__`
#: in one of them (the hook fails the build on a name left out, or one `__all__` no longer has).
SDK_SECTIONS: dict[str, list[str]] = {
    "Read a job file": ["load_config", "JobConfig"],
    "Build the request": ["plan_artifacts", "Artifacts", "build_request", "Request", "build_job", "build_job_dict",
                          "render"],
    "Run it here": ["run_local", "RunOptions", "run_local_tuning", "replay"],
    "Send it to Vertex AI": ["dry_run", "submit"],
    "Errors": ["VtrainError", "ConfigError", "PackagingError", "BackendError", "JobFailed"],
}

#: The `vtrain.runtime` reference (what a trainer calls) in the order a trainer meets it, as SDK_SECTIONS.
RUNTIME_SECTIONS: dict[str, list[str]] = {
    "The strategy and Keras": ["strategy", "keras", "is_chief", "info", "Info", "RuntimeMismatch"],
    "Where to write": ["model_dir", "checkpoint_dir", "tensorboard_dir", "save_model", "write_dir", "scratch_dir",
                       "remove_scratch", "join", "weights_checksum", "write_weights_record", "LOCAL_OUTPUT_DIR",
                       "WEIGHTS_FILE"],
    "Surviving restarts": ["backup_and_restore", "StepCheckpoints", "Checkpoints", "preemption_handler",
                           "report_step", "step_reporter", "restart_count", "job_attempt"],
    "Mixed precision": ["mixed_precision", "loss_scale_optimizer", "scale_loss", "unscale_gradients",
                        "choose_precision", "PrecisionDecision"],
    "Tuning and experiments": ["report_metric", "metric_reporter", "trial_id", "read_reports", "experiment_run"],
    "Profiling a rehearsal": ["profile_callback", "profile", "Profile"],
    "DiLoCo": ["diloco_callback", "diloco", "Diloco", "learner_shard"],
    "DTensor (model parallel)": ["dtensor_mesh", "ShardedCheckpoint", "MESH_ENV"],
    "The decision underneath": ["decide", "Decision", "choose_strategy", "detect_tpu", "DEFAULT_COLLECTIVE_TIMEOUT"],
}

#: page marker -> (the package whose `__all__` the page documents, its sections)
API_PAGES: dict[str, tuple[str, dict[str, list[str]]]] = {
    SDK_MARKER: ("vtrain", SDK_SECTIONS),
    RUNTIME_MARKER: ("vtrain.runtime", RUNTIME_SECTIONS),
}


def _public(package: str) -> list[str]:
    return [n for n in importlib.import_module(package).__all__ if not n.startswith("_")]


def api_problems(pages: dict[str, tuple[str, dict[str, list[str]]]] = API_PAGES) -> list[str]:
    """A public name no section places, a name placed twice, or a placed name the package no longer has."""
    problems = []
    for package, sections in pages.values():
        placed = [name for names in sections.values() for name in names]
        table = "SDK_SECTIONS" if package == "vtrain" else "RUNTIME_SECTIONS"
        problems += [f"{package}.__all__ has {name}: place it in docs/generate.py's {table}"
                     for name in dict.fromkeys(_public(package)) if name not in placed]
        problems += [f"docs/generate.py's {table} places {name}, which {package}.__all__ does not have: remove it"
                     for name in placed if name not in _public(package)]
        problems += [f"docs/generate.py's {table} places {name} twice" for name in dict.fromkeys(placed)
                     if placed.count(name) > 1]
    return problems


def api_directives(marker: str) -> str:
    """A section per group of the page's names, an mkdocstrings entry per name, named as a program calls it
    (`vtrain.build_job`, `runtime.strategy`)."""
    package, sections = API_PAGES[marker]
    module = importlib.import_module(package)
    shown = "runtime" if package == "vtrain.runtime" else package
    entries = []
    for section, names in sections.items():
        entries.append(f"## {section}\n")
        for name in names:
            obj = getattr(module, name)
            home = obj.__module__ if inspect.isclass(obj) or inspect.isroutine(obj) or hasattr(obj, "__wrapped__") \
                else package
            entries.append(f"::: {home}.{name}\n    options:\n      heading: {shown}.{name}\n"
                           f"      toc_label: {name}\n      heading_level: 3\n")
    return "\n".join(entries)


def sdk_directives() -> str:
    """The SDK page's entries (vtrain.__all__, in SDK_SECTIONS' order)."""
    return api_directives(SDK_MARKER)


def on_pre_build(config: Any) -> None:  # mkdocs hook
    from mkdocs.exceptions import PluginError

    sys.path.insert(0, str(REPO))
    problems = stale()
    if problems:
        raise PluginError("\n".join(problems))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:  # mkdocs hook
    for marker in API_PAGES:
        if marker in markdown:
            markdown = markdown.replace(marker, api_directives(marker))
    return markdown


def main() -> int:
    sys.path.insert(0, str(REPO))
    for page in PAGES:
        old, new = refreshed(page)
        if old != new:
            (REPO / page).write_text(new, encoding="utf-8")
            print(f"rewrote {page}")
    problems = environment_problems() + api_problems()
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    importlib.invalidate_caches()
    raise SystemExit(main())
