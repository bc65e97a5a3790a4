"""Projects as Vertex names them: resource names carry the project *number*, requests may name the ID.

Vertex AI answers with `projects/PROJECT_NUMBER/locations/...` whatever the request named (the
SDK's own log lines show `projects/123456789012/locations/us-central1/customJobs/...`), and takes
either on input. The emulator gives every project ID a stable 12-digit number (a hash, so the same
ID has the same number in every run) and maps both to one store key. A project the emulator was
told does not exist (`known` set, `vtrain emulator --projects`) is IAM's 403 "(or it may not
exist)", as Vertex answers for a project it cannot see, not a 404.
"""

from __future__ import annotations

import hashlib
from typing import Any

from vtrain.emulator.errors import DOMAIN, permission_denied


def project_number(project: str) -> str:
    """The number Vertex names `project` by: a number stays itself, an ID gets a stable 12-digit one."""
    if project.isascii() and project.isdigit():
        return project
    return str(10**11 + int(hashlib.sha256(project.encode()).hexdigest()[:12], 16) % (9 * 10**11))


def canonical(name: str) -> str:
    """`projects/ID/rest` → `projects/NUMBER/rest` (the form the store keys and answers use)."""
    head, sep, rest = name.partition("/")
    if head != "projects" or not sep:
        return name
    project, sep, tail = rest.partition("/")
    return f"projects/{project_number(project)}{sep}{tail}"


def exists(project: str, known: frozenset[str] | None) -> bool:
    """None: every project exists (the default); else only the named IDs (or their numbers)."""
    return known is None or project in known or project in {project_number(p) for p in known}


def authorize(server: Any, project: str, resource: str, permission: str, domain: str = DOMAIN) -> None:
    """IAM's 403 for a project the caller may not use (`deny_projects`) or that does not exist, and for
    a permission the caller lacks everywhere (`Emulator.deny_permissions`)."""
    if (project in server.deny_projects or not exists(project, server.known_projects)
            or permission in server.denied_permissions):  # fmt: skip
        raise permission_denied(permission, resource, domain=domain)


__all__ = ["authorize", "canonical", "exists", "project_number"]
