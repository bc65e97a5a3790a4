"""Google-style API errors, shaped as the real Vertex AI REST endpoint shapes them.

The client (google-api-core) turns `{"error": {"code", "message", "status", "details"}}`
plus the HTTP status into its exception classes, and reads `ErrorInfo` details into
`exc.reason` / `exc.metadata`; vtrain's backend relies on both, so the emulator sends both.
"""

from __future__ import annotations

from typing import Any

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
DOMAIN = "aiplatform.googleapis.com"


class ApiError(Exception):
    """An error answer: HTTP status, canonical status name, message, details."""

    def __init__(self, http: int, status: str, message: str, details: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.http = http
        self.status = status
        self.message = message
        self.details = details or []

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.http, "message": self.message, "status": self.status}
        if self.details:
            error["details"] = self.details
        return {"error": error}


def invalid_argument(message: str, violations: list[tuple[str, str]] | None = None) -> ApiError:
    details = []
    if violations:
        details.append(
            {
                "@type": BAD_REQUEST,
                "fieldViolations": [{"field": f, "description": d} for f, d in violations],
            }
        )
    return ApiError(400, "INVALID_ARGUMENT", message, details)


def failed_precondition(message: str) -> ApiError:
    return ApiError(400, "FAILED_PRECONDITION", message)


def not_found(message: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", message)


def permission_denied(permission: str, resource: str, domain: str = DOMAIN) -> ApiError:
    """The exact wording IAM uses, including the '(or it may not exist)' hedge."""
    message = f"Permission '{permission}' denied on resource '//{domain}/{resource}' (or it may not exist)."
    info = {
        "@type": ERROR_INFO,
        "reason": "IAM_PERMISSION_DENIED",
        "domain": "iam.googleapis.com",
        "metadata": {"permission": permission, "resource": resource},
    }
    return ApiError(403, "PERMISSION_DENIED", message, [info])


def quota_exceeded(metric: str, project: str, region: str) -> ApiError:
    """A resource quota (not a request rate): retrying does not help, a quota increase does."""
    message = f"The following quota metrics exceed quota limits: {metric}"
    details: list[dict[str, Any]] = [
        {
            "@type": QUOTA_FAILURE,
            "violations": [
                {
                    "subject": f"project:{project}",
                    "description": f"Quota {metric} exceeded in region {region}.",
                }
            ],
        },
        {
            "@type": ERROR_INFO,
            "reason": "RESOURCE_QUOTA_EXCEEDED",
            "domain": DOMAIN,
            "metadata": {"quota_metric": metric, "region": region, "consumer": f"projects/{project}"},
        },
    ]
    return ApiError(429, "RESOURCE_EXHAUSTED", message, details)


TRANSIENT = {
    429: ("RESOURCE_EXHAUSTED", "Too many requests; please retry."),
    500: ("INTERNAL", "Internal error encountered."),
    503: ("UNAVAILABLE", "The service is currently unavailable."),
    504: ("DEADLINE_EXCEEDED", "The request timed out."),
}


def transient(code: int) -> ApiError:
    status, message = TRANSIENT[code]
    return ApiError(code, status, message)


def internal(message: str) -> ApiError:
    return ApiError(500, "INTERNAL", message)
