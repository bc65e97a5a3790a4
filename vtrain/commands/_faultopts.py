"""`--fault` and `--restart-policy` of `vtrain local` (issue 11), in one place with their grammar.

`vtrain local` takes both; the emulator takes the same faults from a job's `vtrain-fault` labels
(:func:`vtrain.local.faults.specs_from_labels`), spelled by :class:`FaultType`'s grammar.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


class FaultType(click.ParamType):  # type: ignore[type-arg]  # click 8.1 (allowed) cannot subscript it
    """`REPLICA:KIND@WHEN` → :class:`vtrain.local.faults.FaultSpec`; a bad one is a usage error."""

    name = "REPLICA:KIND@WHEN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from vtrain.errors import FaultSpecError
        from vtrain.local.faults import FaultSpec, parse_fault

        if isinstance(value, FaultSpec):
            return value
        try:
            return parse_fault(str(value))
        except FaultSpecError as err:
            self.fail(str(err), param, ctx)


FAULT = FaultType()

fault_option: Callable[[Any], Any] = click.option(
    "--fault",
    "faults",
    type=FAULT,
    multiple=True,
    help="Inject a fault (repeatable): REPLICA:KIND@WHEN. KIND: kill (SIGKILL), preempt[:GRACE] (SIGTERM, "
    "SIGKILL after GRACE, default 30s, as a Spot VM), stop:SECONDS (SIGSTOP, then SIGCONT), late (start the "
    "replica WHEN after the others, as a VM Vertex brings up later). WHEN: a duration after the replica's "
    "process started (30s, 2m) or step:N once it reported step N. "
    "E.g. worker-1:kill@30s, chief-0:preempt@step:200, worker-0:late@15s.",
)

restart_policy_option: Callable[[Any], Any] = click.option(
    "--restart-policy",
    type=click.Choice(["vertex", "never"]),
    default="vertex",
    show_default=True,
    help="vertex: restart a failed replica in place (5 times), then retry the whole job (3 times, unless "
    "scheduling.disable_retries), as Vertex AI does; a permanent error fails at once. never: the first "
    "failed replica fails the job (for debugging).",
)
