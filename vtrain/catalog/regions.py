"""Regions where Vertex AI custom training runs, and the Artifact Registry multi-region nearest each.

The list is for did-you-mean and a warning, never a hard allow-list: it was written from Google's
locations page and not re-checked (sources.REGIONS is unverified), and Google adds regions.
"""

from __future__ import annotations

from vtrain.catalog import sources as src

REGIONS_SOURCE = src.REGIONS
REGIONS = (
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2",
    "us-west3", "us-west4", "northamerica-northeast1", "northamerica-northeast2",
    "southamerica-east1", "southamerica-west1", "europe-central2", "europe-north1",
    "europe-southwest1", "europe-west1", "europe-west2", "europe-west3", "europe-west4",
    "europe-west6", "europe-west8", "europe-west9", "europe-west12", "me-central1",
    "me-central2", "me-west1", "africa-south1", "asia-east1", "asia-east2", "asia-northeast1",
    "asia-northeast2", "asia-northeast3", "asia-south1", "asia-southeast1", "asia-southeast2",
    "australia-southeast1", "australia-southeast2",
)  # fmt: skip


def multi_region(region: str) -> str:
    """The Artifact Registry multi-region (us, europe, asia) nearest a Vertex region."""
    prefix = region.split("-", 1)[0]
    if prefix in {"europe", "me", "africa"}:
        return "europe"
    if prefix in {"asia", "australia"}:
        return "asia"
    return "us"


__all__ = ["REGIONS", "REGIONS_SOURCE", "multi_region"]
