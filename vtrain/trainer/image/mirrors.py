"""Registry mirrors: every pull vtrain makes from a mirror where ``VTRAIN_REGISTRY_MIRRORS`` names one.

A prebuilt image for ``--runtime image``, a ``trainer.build`` or launcher base, a container pool's image: each
is read through :func:`pull_client`, which reads ``VTRAIN_REGISTRY_MIRRORS`` (``HOST=MIRROR[,HOST=MIRROR]``, e.g.
``us-docker.pkg.dev=127.0.0.1:5000``). A registry named there is read from its mirror, the same repository path
under it, as containerd's and docker's registry mirrors serve pulls. The mirror gets the credentials asked for
the mirror's own host, never the mirrored registry's (a Google token is not sent to a mirror). Pushes always go
to the registry named.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from vtrain.errors import PackagingError
from vtrain.foreign import printable
from vtrain.trainer.image.reference import _HOST
from vtrain.trainer.image.registry import Credentials, RegistryClient

MIRRORS_ENV = "VTRAIN_REGISTRY_MIRRORS"


def mirrors(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """VTRAIN_REGISTRY_MIRRORS as {registry: mirror}; a malformed entry is a one-line PackagingError."""
    raw = (os.environ if env is None else env).get(MIRRORS_ENV, "").strip()
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        host, sep, mirror = item.partition("=")
        host, mirror = host.strip(), mirror.strip().removeprefix("http://").removeprefix("https://").rstrip("/")
        if not sep or not _HOST.fullmatch(host) or not _HOST.fullmatch(mirror):
            raise PackagingError(f"{MIRRORS_ENV}: {printable(item, limit=120)!r} is not HOST=MIRROR (e.g. "
                                 "us-docker.pkg.dev=127.0.0.1:5000; several separated by commas)")
        out[host] = mirror
    return out


def pull_client(registry: str, credentials: Credentials | None = None, *,
                env: Mapping[str, str] | None = None) -> RegistryClient:
    """The client to pull from `registry`: its mirror's when VTRAIN_REGISTRY_MIRRORS names one (asked with the
    mirror's own credentials), else its own."""
    mirror = mirrors(env).get(registry)
    if mirror is None:
        return RegistryClient(registry, credentials)
    client = RegistryClient(mirror, credentials)
    client.mirror_of = registry
    return client



__all__ = ["MIRRORS_ENV", "mirrors", "pull_client"]
