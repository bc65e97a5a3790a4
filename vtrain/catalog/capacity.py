"""How a job gets its machines: Scheduling.strategy (on demand, Spot, flex-start) and reservations.

Every value of Scheduling.Strategy and of ReservationAffinity.Type is a row here, either with the job file's
word for it or refused with the reason (deprecated, "should not be used"). A specific reservation is named
by one of three resource names (``ReservationAffinity.values``: "the resource name of the reservation,
reservation block, or reservation sub-block"), whose paths are Compute Engine's
(``reservationBlocks``/``reservationSubBlocks`` in its Discovery document): :data:`RESERVATION_FORMS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vtrain.catalog import sources as src
from vtrain.catalog.sources import Source


@dataclass(frozen=True)
class EnumValue:
    """An API enum value: the job file's word for it (None: not written in a job file) or why not."""

    enum: str
    word: str | None
    reason: str = ""
    source: Source = src.SCHEDULING

    def as_dict(self) -> dict[str, object]:
        return {"name": self.enum, "job_file": self.word, "reason": self.reason or None, **self.source.as_dict()}


#: Scheduling.Strategy. maxWaitDuration applies to FLEX_START: 0 waits indefinitely, left out 24 hours.
STRATEGIES: tuple[EnumValue, ...] = (
    EnumValue("STRATEGY_UNSPECIFIED", None, "the default: Vertex reads it as STANDARD (leave strategy out)"),
    EnumValue("ON_DEMAND", None, "deprecated in the API; STANDARD (strategy: standard) replaces it"),
    EnumValue("LOW_COST", None, "deprecated in the API; SPOT (strategy: spot) replaces it"),
    EnumValue("STANDARD", "standard"),
    EnumValue("SPOT", "spot"),
    EnumValue("FLEX_START", "flex_start"),
)
STRATEGY_ENUM: dict[str, str] = {v.word: v.enum for v in STRATEGIES if v.word}
MAX_WAIT_DEFAULT_S = 24 * 3600  # maxWaitDuration left out; 0 waits indefinitely (sources.SCHEDULING)

#: ReservationAffinity.Type.
AFFINITIES: tuple[EnumValue, ...] = (
    EnumValue("TYPE_UNSPECIFIED", None, "the API says it should not be used", src.RESERVATION_AFFINITY),
    EnumValue("NO_RESERVATION", "none", source=src.RESERVATION_AFFINITY),
    EnumValue("ANY_RESERVATION", "any", source=src.RESERVATION_AFFINITY),
    EnumValue("SPECIFIC_RESERVATION", "specific", source=src.RESERVATION_AFFINITY),
)
AFFINITY_ENUM: dict[str, str] = {v.word: v.enum for v in AFFINITIES if v.word}
RESERVATION_KEY = "compute.googleapis.com/reservation-name"


@dataclass(frozen=True)
class ReservationForm:
    """A resource name a SPECIFIC_RESERVATION may name: its Compute Engine path template and pattern."""

    name: str
    template: str
    pattern: re.Pattern[str]
    source: Source = src.COMPUTE_DISCOVERY

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "form": self.template, **self.source.as_dict()}


_SEGMENT = r"[^/\s]+"
_RESERVATION = rf"projects/{_SEGMENT}/zones/{_SEGMENT}/reservations/{_SEGMENT}"
RESERVATION_FORMS: tuple[ReservationForm, ...] = (
    ReservationForm("reservation", "projects/PROJECT/zones/ZONE/reservations/RESERVATION",
                    re.compile(rf"^{_RESERVATION}$")),
    ReservationForm("reservation block", "projects/PROJECT/zones/ZONE/reservations/RESERVATION/reservationBlocks/BLOCK",
                    re.compile(rf"^{_RESERVATION}/reservationBlocks/{_SEGMENT}$")),
    ReservationForm("reservation sub-block", "projects/PROJECT/zones/ZONE/reservations/RESERVATION/"
                    "reservationBlocks/BLOCK/reservationSubBlocks/SUBBLOCK",
                    re.compile(rf"^{_RESERVATION}/reservationBlocks/{_SEGMENT}/reservationSubBlocks/{_SEGMENT}$")),
)


def reservation_form(name: str) -> ReservationForm | None:
    """The form a reservation name has; None when it is none of the three."""
    return next((f for f in RESERVATION_FORMS if f.pattern.match(name)), None)


__all__ = ["AFFINITIES", "AFFINITY_ENUM", "MAX_WAIT_DEFAULT_S", "RESERVATION_FORMS", "RESERVATION_KEY",
           "STRATEGIES", "STRATEGY_ENUM", "EnumValue", "ReservationForm", "reservation_form"]
