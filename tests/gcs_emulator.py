"""pytest plugin: a real Cloud Storage API on 127.0.0.1 (gcp-storage-emulator), for any test.

`gcs_server` (session) runs one in-memory emulator in this process on a free port and stops it at
the end. `gcs` (per test) wipes it, points STORAGE_EMULATOR_HOST at it, and hands out real
google-cloud-storage clients with anonymous credentials:

    def test_upload(gcs):
        bucket = gcs.create_bucket("staging")
        gcs.client().bucket("staging").blob("x").upload_from_string(b"...")
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

PROJECT = "vtrain-test"


@dataclass
class GcsEmulator:
    host: str  # http://127.0.0.1:PORT, the value for STORAGE_EMULATOR_HOST
    server: Any

    def client(self) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project=PROJECT,
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.host},
        )

    def create_bucket(self, name: str, location: str = "US-CENTRAL1") -> Any:
        bucket = self.client().create_bucket(name, location=location)
        self.server._storage.buckets[name].update(location=location.upper(), locationType=_location_type(location))
        return bucket

    def object_names(self, bucket: str) -> list[str]:
        return sorted(blob.name for blob in self.client().list_blobs(bucket))


def _location_type(location: str) -> str:
    """Cloud Storage's locationType: US, EU, ASIA are multi-regions; NAM4, EUR4, ASIA1, … dual-regions."""
    text = location.lower()
    if text in ("us", "eu", "asia"):
        return "multi-region"
    return "region" if "-" in text else "dual-region"


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GcsEmulator]:
    from gcp_storage_emulator.server import create_server

    # Port 0: the OS picks a free port at bind time, so there is no race with other processes.
    # The emulator does not report it, hence the peek at its HTTP server.
    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    try:
        port = server._api._httpd.server_address[1]
        yield GcsEmulator(host=f"http://127.0.0.1:{port}", server=server)
    finally:
        server.stop()


@pytest.fixture
def gcs(gcs_server: GcsEmulator, monkeypatch: pytest.MonkeyPatch) -> GcsEmulator:
    gcs_server.server.wipe()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    return gcs_server
