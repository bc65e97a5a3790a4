"""`vtrain estimate`: which parallelism for this model on this cluster, does it fit, and would a
Reduction Server pay?

The model lives in :mod:`vtrain.estimate`; this module turns flags into values (click
ParamTypes: a bad flag is a usage error naming it, exit 2), calls
:func:`vtrain.estimate.advise`, and prints. Money appears only from a price file the user wrote:
vtrain never ships or guesses prices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from vtrain.commands._options import UserPath, echo_json, output_option, set_option


class _LibraryValue(click.ParamType):  # type: ignore[type-arg]  # click 8.1 (allowed) cannot subscript it
    """A flag whose text a vtrain.estimate parser reads; its EstimateError becomes a click usage error."""

    def __init__(self, name: str, parse: Callable[[str], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        from vtrain.errors import EstimateError

        try:
            return self._parse(value)
        except EstimateError as err:
            self.fail(str(err), param, ctx)


def _params(text: str) -> int:
    from vtrain.estimate import parse_params

    return parse_params(text)


def _seconds(text: str) -> float:
    from vtrain.estimate import parse_seconds

    return parse_seconds(text)


def _size(text: str) -> float:
    from vtrain.estimate import parse_bytes

    return parse_bytes(text)


def _machine(text: str) -> str:
    from vtrain.catalog import ALL_MACHINE_TYPES, nic_gbps
    from vtrain.errors import EstimateError

    try:
        nic_gbps(text)
    except KeyError:
        import difflib

        near = difflib.get_close_matches(text, ALL_MACHINE_TYPES, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise EstimateError(f"unknown machine type {text!r}{hint}") from None
    return text


def _prices(path: str) -> Any:
    from vtrain.estimate import load_prices

    return load_prices(path)


PARAMS = _LibraryValue("count", _params)
DURATION = _LibraryValue("duration", _seconds)
SIZE = _LibraryValue("size", _size)
MACHINE = _LibraryValue("machine type", _machine)
PRICES = _LibraryValue("price file", _prices)


@click.command()
@click.argument("job_file", metavar="JOB.yaml", type=UserPath(dir_okay=False))
@click.option("--params", type=PARAMS, metavar="N", help="Model parameters: 340M, 1.3B, 7e9 (--from-run measures it).")
@click.option(
    "--from-run",
    "from_run",
    type=UserPath(file_okay=False),
    metavar="DIR",
    help="Fill the inputs from a rehearsal's profile: a run folder OUTPUT/vtrain-local/JOB_ID (flags still win).",
)
@click.option("--last", is_flag=True, help="--from-run the job's latest local run (its local base_output_dir).")
@click.option("--strict", is_flag=True, help="With --from-run: refuse a run of another job, an unreadable or "
              "incomplete profile, or a run that did not succeed, instead of warning.")
@click.option(
    "--utilisation",
    type=click.FloatRange(min=0, min_open=True, max=1),
    metavar="U",
    help="With --from-run: the share of the target's peak FLOPs a step reaches (default 0.4; 0.3 and 0.6 are "
    "also shown).",
)
@click.option(
    "--optimizer",
    type=click.Choice(["adam", "momentum", "sgd", "adafactor"]),
    default="adam",
    show_default=True,
    help="Optimizer, for its slots: adam 8 B/param, momentum 4, sgd and adafactor ~0.",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "mixed_bf16", "mixed_fp16"]),
    default="fp32",
    show_default=True,
    help="Numeric policy the model trains with (Keras mixed precision).",
)
@click.option(
    "--activations", type=SIZE, metavar="SIZE", help="Activation memory per replica under --precision (6GB, 512MiB)."
)
@click.option(
    "--batch-per-replica",
    type=click.IntRange(min=1),
    metavar="N",
    help="Examples per replica per step; with --activation-bytes-per-example.",
)
@click.option(
    "--activation-bytes-per-example",
    type=SIZE,
    metavar="SIZE",
    help="Activation memory of one example under --precision; with --batch-per-replica.",
)
@click.option(
    "--grad-dtype",
    type=click.Choice(["fp32", "bf16", "fp16"]),
    default="fp32",
    show_default=True,
    help="Dtype of the gradients exchanged (Keras all-reduces fp32 gradients, also under mixed policies).",
)
@click.option(
    "--step-compute",
    type=DURATION,
    metavar="DURATION",
    help="Compute time of one step (0.4s, 400ms). Without it: the communication-bound ceiling.",
)
@click.option(
    "--reducers",
    type=click.IntRange(min=1),
    help="Reducers to compare. Default: the job's reduction_server replicas, else the sizing rule.",
)
@click.option(
    "--reducer-machine",
    type=MACHINE,
    metavar="TYPE",
    help="Reducer machine type (also the DiLoCo syncer's). Default: the job's, else n1-highcpu-16.",
)
@click.option("--alpha", type=DURATION, default="30us", show_default=True, metavar="DURATION", help="Latency per hop.")
@click.option(
    "--inner-steps",
    "inner_steps",
    type=click.IntRange(min=1),
    multiple=True,
    metavar="H",
    help="DiLoCo inner steps to compare (repeatable). Default: 10, 100, 500.",
)
@click.option(
    "--regions",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Regions the training would span (more than one: only DiLoCo can sync across them).",
)
@click.option(
    "--prices",
    type=PRICES,
    metavar="FILE",
    help="YAML of $/hour per machine type and accelerator (see examples/prices.example.yaml).",
)
@click.option(
    "--plot",
    type=UserPath(dir_okay=False),
    help="Draw steps/sec against workers and memory per replica against the device to this PNG.",
)
@set_option
@output_option("text", "json")
def estimate(
    job_file: str,
    params: int | None,
    from_run: str | None,
    last: bool,
    strict: bool,
    utilisation: float | None,
    optimizer: str,
    precision: str,
    activations: float | None,
    batch_per_replica: int | None,
    activation_bytes_per_example: float | None,
    plot: str | None,
    overrides: tuple[str, ...],
    output: str,
    **options: Any,
) -> None:
    """Advise the parallelism for this job: memory per replica against the accelerator, precision,
    and ring all-reduce vs Reduction Server vs DiLoCo vs model parallel, with the numbers.

    An α–β model per step: ring 2(N−1)α + 2(N−1)/N·S/B over all N GPUs; reducers
    2α + max(S/B, n·S/(m·B_r)), each VM's NIC bandwidth and each device's memory from the catalog.

    --from-run DIR (or --last) fills the inputs from a rehearsal's profile (`vtrain local` writes it):
    each one measured, given (a flag: it wins) or assumed; the step's compute on a different
    accelerator from the measured FLOPs at --utilisation of its peak, shown at 30% and 60% too.
    """
    from vtrain import estimate as model
    from vtrain.jobfile.load import load_config

    if activations is not None and (batch_per_replica or activation_bytes_per_example):
        raise click.UsageError(
            "give --activations, or --batch-per-replica with --activation-bytes-per-example, not both"
        )
    if (batch_per_replica is None) != (activation_bytes_per_example is None):
        raise click.UsageError("--batch-per-replica and --activation-bytes-per-example go together")
    if batch_per_replica is not None and activation_bytes_per_example is not None:
        activations = batch_per_replica * activation_bytes_per_example
    rehearsed = from_run is not None or last
    if from_run is not None and last:
        raise click.UsageError("give --from-run DIR or --last, not both")
    if not rehearsed and params is None:
        raise click.UsageError("give --params N, or --from-run DIR / --last to measure it from a rehearsal")
    if not rehearsed and (strict or utilisation is not None):
        raise click.UsageError("--strict and --utilisation go with --from-run or --last")
    config = load_config(job_file, overrides, target="local")  # staging is irrelevant here
    inputs = model.Inputs(
        params=params or 1,
        optimizer=optimizer,
        precision=precision,
        activations=activations,
        grad_dtype=options["grad_dtype"],
        step_compute_s=options["step_compute"],
        reducers=options["reducers"],
        reducer_machine=options["reducer_machine"],
        alpha_s=options["alpha"],
        inner_steps=options["inner_steps"] or model.DEFAULT_INNER_STEPS,
        regions=options["regions"],
        prices=options["prices"],
    )
    if rehearsed:
        _from_run(config, inputs, job_file, from_run, strict, utilisation, plot, output)
        return
    report = model.advise(config, inputs, job_file)
    _show(config, report, plot, output, report.to_dict())


#: The flags a profile can measure, by their Inputs field.
_MEASURABLE = {"params": "params", "grad_dtype": "grad_dtype", "optimizer": "optimizer", "precision": "precision",
               "activations": "activations", "step_compute_s": "step_compute"}


def _from_run(config: Any, inputs: Any, job_file: str, from_run: str | None, strict: bool,
              utilisation: float | None, plot: str | None, output: str) -> None:
    """--from-run/--last: the flags the user typed win over the run's measurements, which win over defaults."""
    from pathlib import Path

    from vtrain.estimate import fromrun, rehearsal
    from vtrain.request.build import build_request
    from vtrain.runtime.profile_record import shape_hash

    ctx = click.get_current_context()
    typed = {param: ctx.get_parameter_source(param) == click.core.ParameterSource.COMMANDLINE
             for param in (*_MEASURABLE.values(), "batch_per_replica")}
    given = {field: getattr(inputs, field) for field, param in _MEASURABLE.items() if typed[param]}
    if typed["batch_per_replica"]:
        given["activations"] = inputs.activations
    path = Path(from_run) if from_run is not None else fromrun.last_run(config.base_output_dir)
    expected = shape_hash(_job_spec(config, build_request))
    run = fromrun.load_run(path, expected, strict)
    advice = rehearsal.advise_from_run(config, run, given, inputs, job_file, utilisation)
    _show(config, advice.report, plot, output, advice.to_dict(), rehearsal.format_from_run(advice) + "\n")


def _show(config: Any, report: Any, plot: str | None, output: str, data: dict[str, Any], head: str = "") -> None:
    """Plot, then the JSON (`data` and the study) or the text (`head`, the report, the study)."""
    from vtrain import estimate as model

    study = _study(config, report.est, report.money)  # a tuning job: × trials and waves
    if plot is not None:
        from vtrain.estimate.plot import plot_report

        plot_report(report, plot)
    if output == "json":
        echo_json({**data, "tuning": study})
        return
    from vtrain.foreign import printable_lines

    # The text quotes a run's profiles (replica and device names, their warnings): printable, line by line.
    if head:
        click.echo("\n".join(printable_lines(head)) + ("\n" if head.endswith("\n") else ""))
    for line in printable_lines(model.format_report(report)):
        click.echo(line)
    if study is not None:
        from vtrain.tuning.estimate import study_lines

        for line in study_lines(study):
            click.echo(line)
    if plot is not None:
        click.echo(f"plot: {plot}")


def _job_spec(config: Any, build_request: Any) -> Any:
    """The CustomJobSpec a run of this job got; package URIs do not enter the hash, so stand-ins do here (the
    image names do: planned)."""
    from vtrain.errors import VtrainError
    from vtrain.jobfile.artifacts import plan_artifacts

    try:
        return build_request(config, plan_artifacts(config)).body.get("jobSpec")
    except VtrainError:  # no staging location: a local package would be staged at `vtrain local`
        return build_request(config, ["-", "-"]).body.get("jobSpec")


def _study(config: Any, est: Any, money: Any) -> dict[str, Any] | None:
    """A tuning job: the trial's numbers for the exchange it would use, × trials and waves."""
    if config.tuning is None:
        return None
    from vtrain.tuning.estimate import study_estimate

    reducers = config.reduction_server is not None
    exchange = est.reduction_server if reducers else est.ring
    cost = None if money is None else (money.reduction_server_per_1000_steps if reducers else money.ring_per_1000_steps)
    return study_estimate(config.tuning, exchange, cost)
