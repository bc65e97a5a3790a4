"""Registry credentials from the environment: Google's registries take an OAuth access token.

Artifact Registry (``LOCATION-docker.pkg.dev``) and Container Registry (``gcr.io`` and its regional
hosts) accept the user ``oauth2accesstoken`` with an access token from Application Default
Credentials as the password (what ``gcloud auth configure-docker`` sets up for Docker). Any other
registry gets no credentials from here (anonymous; a token service may still hand out a pull
token); a caller with its own passes its own callable to the registry client.
"""

from __future__ import annotations

import re

from vtrain.errors import PackagingError

GOOGLE_USER = "oauth2accesstoken"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_GOOGLE = re.compile(r"(?:[a-z0-9-]+-docker\.pkg\.dev|(?:[a-z]+\.)?gcr\.io)(?::[0-9]+)?")


def is_google_registry(registry: str) -> bool:
    return bool(_GOOGLE.fullmatch(registry.lower()))


def google_credentials(registry: str) -> tuple[str, str]:
    """(``oauth2accesstoken``, a fresh access token) from Application Default Credentials."""
    import google.auth
    from google.auth import exceptions as gexc
    from google.auth.transport.requests import Request

    try:
        credentials, _ = google.auth.default(scopes=[SCOPE])
        credentials.refresh(Request())
    except gexc.DefaultCredentialsError as err:
        raise PackagingError(f"no Google Cloud credentials to push to {registry}: run "
                             "`gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS") from err
    except (gexc.RefreshError, gexc.TransportError) as err:
        why = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
        raise PackagingError(f"cannot get a Google access token to push to {registry}: {why}") from err
    return GOOGLE_USER, str(credentials.token)


def default_credentials(registry: str) -> tuple[str, str] | None:
    """Google's token for a Google registry, nothing for any other."""
    return google_credentials(registry) if is_google_registry(registry) else None
