"""The user's price file and what a job's cluster costs per hour by it.

vtrain ships no prices and never guesses one: every price comes from a file the user wrote
(`examples/prices.example.yaml` shows the format), and a price the cluster needs but the file
lacks is an error naming it. Errors speak of the file and its keys; the command that read the
path from a flag says which flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vtrain.errors import EstimateError

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig


@dataclass(frozen=True)
class Prices:
    """$/hour per machine type and per accelerator (enum names), as the user's file gives them."""

    path: str
    machines: dict[str, float] = field(default_factory=dict)
    accelerators: dict[str, float] = field(default_factory=dict)


def load_prices(path: str) -> Prices:
    """Read `machines:` and `accelerators:` ($/hour) from a price file; blank prices are left out."""
    from vtrain.catalog import normalize_accelerator
    from vtrain.jobfile.yamlpos import MAX_BYTES, load_plain
    from vtrain.userpaths import describe_oserror, read_bounded, shown

    try:
        text = read_bounded(path, MAX_BYTES).decode("utf-8")  # a FIFO must not hang it
        data = load_plain(text, path, what="a price file")  # the job file's limits: no alias bomb
    except FileNotFoundError:
        raise EstimateError(f"price file not found: {path}") from None
    except OSError as err:
        raise EstimateError(f"cannot read price file {path}: {describe_oserror(err)}") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise EstimateError(f"cannot read price file {path}: {shown(' '.join(str(err).split()))}") from None
    if not isinstance(data, dict):
        raise EstimateError(f"price file {path} must be a mapping with machines: and accelerators:")
    unknown = sorted(set(data) - {"currency", "machines", "accelerators"})
    if unknown:
        raise EstimateError(f"price file {path}: unknown key {shown(repr(unknown[0]))} (allowed: machines, "
                            "accelerators)")
    out: dict[str, dict[str, float]] = {}
    for section in ("machines", "accelerators"):
        table = data.get(section) or {}
        if not isinstance(table, dict):
            raise EstimateError(f"price file {path}: {section} must map names to $/hour")
        out[section] = {}
        written: dict[str, str] = {}
        for name, price in table.items():
            if price is None:
                continue  # left blank in the example: not a price
            too_big = isinstance(price, int) and price.bit_length() > 1000  # float() would overflow
            finite = not too_big and isinstance(price, int | float) and 0 <= price < float("inf")
            if isinstance(price, bool) or not finite:
                got = f"one of {price.bit_length()} bits" if too_big else shown(repr(price))
                raise EstimateError(f"price file {path}: {section}.{shown(str(name))} must be a number ≥ 0, got {got}")
            key = (normalize_accelerator(str(name)) or str(name)) if section == "accelerators" else str(name)
            if key in written:  # `a100` and NVIDIA_TESLA_A100 are one accelerator: which price is meant?
                raise EstimateError(f"price file {path}: {section}.{shown(str(name))} and "
                                    f"{section}.{shown(written[key])} both price {key}; keep one")
            written[key] = str(name)
            out[section][key] = float(price)
    return Prices(path, out["machines"], out["accelerators"])


def cluster_prices(prices: Prices, config: JobConfig, reducer_machine: str) -> tuple[float, float]:
    """($/h of all of pools 0+1 (a DiLoCo job: its learners), $/h of one reducer); every price must be in
    the file."""
    from vtrain.estimate.jobs import exchanging_pools

    machines, accelerators = prices.machines, prices.accelerators
    missing: list[str] = []
    total = 0.0
    for pool in exchanging_pools(config):
        per_replica = machines.get(pool.machine_type)
        if per_replica is None:
            missing.append(f"machines.{pool.machine_type}")
            per_replica = 0.0
        if pool.accelerator and pool.accelerator_count:
            acc = accelerators.get(pool.accelerator)
            if acc is None:
                missing.append(f"accelerators.{pool.accelerator}")
                acc = 0.0
            per_replica += acc * pool.accelerator_count
        total += per_replica * int(pool.replicas)
    if reducer_machine not in machines:
        missing.append(f"machines.{reducer_machine}")
    if missing:
        needed = ", ".join(dict.fromkeys(missing))
        raise EstimateError(
            f"price file {prices.path} has no price for {needed}; vtrain never guesses prices, add them"
        )
    return total, machines[reducer_machine]
