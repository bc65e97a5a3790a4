"""IAM's service-account calls, as `vtrain submit`'s preflight makes them (v1 REST):

    GET  /v1/projects/-/serviceAccounts/EMAIL                       the account, or 404
    POST /v1/projects/-/serviceAccounts/EMAIL:testIamPermissions    {"permissions": [granted…]}

As on iam.googleapis.com, `-` stands for "the project in the email", an unknown account is
404 NOT_FOUND ("Unknown service account"), testIamPermissions answers with the subset of the
asked permissions the caller holds (`{}` when none), and an account of a project in
`deny_projects` is 403 for the caller. `accounts` None: every well-formed account exists and
the caller holds every permission on it (the emulator's usual permissive default); a mapping:
exactly these accounts, each with the permissions the caller holds on it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from vtrain.emulator.errors import ApiError, invalid_argument, not_found, permission_denied
from vtrain.emulator.wire import check_fields, json_body

_ACCOUNT = re.compile(r"^/v1/projects/([^/]+)/serviceAccounts/([^/:]+)(:testIamPermissions)?$")
_EMAIL = re.compile(
    r"^[a-z0-9-]+@([a-z0-9-]+)\.iam\.gserviceaccount\.com$|^[0-9]+-compute@developer\.gserviceaccount\.com$"
)
DOMAIN = "iam.googleapis.com"


def handles(path: str) -> bool:
    return bool(_ACCOUNT.match(path))


def route(
    command: str,
    path: str,
    body: bytes,
    accounts: Mapping[str, frozenset[str]] | None,
    deny_projects: set[str],
) -> dict[str, Any]:
    match = _ACCOUNT.match(path)
    if match is None:
        raise not_found(f"The requested URL {path} was not found on this server.")
    project, email, test = match.groups()
    resource = f"projects/{project}/serviceAccounts/{email}"
    found = _EMAIL.match(email)
    if found is None:
        raise invalid_argument(f"Invalid form of account ID {email}. Should be [Gaia ID |Email |Unique ID |] of the "
                               "account")
    owner = found.group(1) or project
    if owner in deny_projects or project in deny_projects:
        verb = "actAs" if test else "get"
        raise permission_denied(f"iam.serviceAccounts.{verb}", resource, domain=DOMAIN)
    if accounts is not None and email not in accounts:
        raise not_found("Unknown service account")
    if test:
        if command != "POST":
            raise not_found(f"Method {command} not found for {path}.")
        request = check_fields(json_body(body, "TestIamPermissionsRequest"), {"permissions": "strings"},
                               "TestIamPermissionsRequest")
        asked = request.get("permissions", [])
        granted = [p for p in asked if accounts is None or p in accounts[email]]
        return {"permissions": granted} if granted else {}
    if command != "GET":
        raise not_found(f"Method {command} not found for {path}.")
    account_project = owner if owner != "-" else "unknown"
    unique = str(int(hashlib.sha256(email.encode()).hexdigest()[:16], 16))[:21]
    return {
        "name": f"projects/{account_project}/serviceAccounts/{email}",
        "projectId": account_project,
        "uniqueId": unique,
        "email": email,
        "etag": "MDEwMjE5MjA=",
        "oauth2ClientId": unique,
    }


__all__ = ["ApiError", "handles", "route"]
