"""Who may talk to the emulator: the real clients on this machine, never a web page.

`vtrain emulator --run-jobs` runs whatever a created job names, so a request the emulator takes
is code it runs. A web page the user visits can reach 127.0.0.1 in two ways, and both are closed
here, before the body is read:

- **A cross-origin "simple" request** (a form, `fetch(..., {mode: "no-cors"})`, `sendBeacon`):
  the browser sends it with no CORS preflight when its Content-Type is text/plain, form-encoded
  or multipart. Every such request carries `Origin` (and, in current browsers, `Sec-Fetch-Site`),
  which no real client sends (aiplatform_v1 and the SDK use `requests`, gcloud uses httplib2):
  a request with an `Origin`, or with `Sec-Fetch-Site` other than `none` (the user typed the URL),
  is refused with 403. A POST body must also be JSON (`Content-Type: application/json`, or no
  Content-Type at all); anything else is a 400. A page cannot send application/json cross-origin
  without a preflight, and the emulator answers no preflight (OPTIONS is a 404, no CORS headers).
- **DNS rebinding**: a page's own host name is made to resolve to 127.0.0.1, so its requests are
  same-origin to the browser. They still name the page's host in `Host`: only loopback hosts
  (`127.0.0.0/8`, `localhost`, `[::1]`, any port) are served, as a real client names them.

Other users of the same machine can reach 127.0.0.1 too; against them `--token` (off by default)
makes every path start with `/TOKEN`, which all the real clients send when their endpoint is
`http://127.0.0.1:PORT/TOKEN` (the REST transport and gcloud keep an endpoint's path), as Jupyter
prints its URL with a token.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from email.message import Message

from vtrain.emulator.errors import ApiError, invalid_argument

_HOST = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[^:\[\]]+))(?::(?P<port>[0-9]{1,5}))?$")
_JSON_TYPES = ("application/json",)
#: Sec-Fetch-Site values a browser sends for a request a page made (`none`: the user typed the URL).
_PAGE_SITES = ("cross-site", "same-site", "same-origin")
TOKEN_ALPHABET = re.compile(r"^[A-Za-z0-9_-]{16,128}$")


def forbidden(message: str) -> ApiError:
    return ApiError(403, "PERMISSION_DENIED", message)


def loopback_host(value: str) -> bool:
    """A Host header naming this machine's loopback interface (any port)."""
    match = _HOST.match(value.strip())
    if match is None:
        return False
    name = match["v6"] or match["name"] or ""
    if name.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_sender(headers: Message) -> None:
    """403 for a request a browser page made or a host that is not this machine's loopback."""
    hosts = headers.get_all("Host") or []
    if len(hosts) > 1:
        raise invalid_argument("Bad Request: more than one Host header.")
    if hosts and not loopback_host(hosts[0]):
        raise forbidden(
            f"The emulator serves loopback hosts only (127.0.0.1, localhost, [::1]), not Host '{hosts[0][:100]}': "
            "a request naming another host is a browser page behind DNS rebinding."
        )
    origin = headers.get("Origin")
    if origin is not None:
        raise forbidden(
            f"The emulator does not serve browser pages (Origin '{origin[:100]}'): a web page could "
            "otherwise make it run code. Real clients send no Origin header."
        )
    site = (headers.get("Sec-Fetch-Site") or "").strip().lower()
    if site in _PAGE_SITES:
        raise forbidden(f"The emulator does not serve requests a web page makes (Sec-Fetch-Site: {site}).")


def check_content_type(command: str, headers: Message) -> None:
    """A POST body is JSON: text/plain, forms and multipart (what a page can send unasked) are a 400."""
    if command != "POST":
        return
    value = headers.get("Content-Type")
    if value is None:
        return
    media = value.split(";", 1)[0].strip().lower()
    if media not in _JSON_TYPES:
        raise invalid_argument(
            f"Invalid JSON payload received. Content-Type '{value[:100]}' is not application/json."
        )


def new_token() -> str:
    return secrets.token_urlsafe(24)


def strip_token(path: str, token: str | None) -> str:
    """The path without its `/TOKEN` prefix; 403 when a token is required and this one is not it (not
    401: the clients would take that as expired credentials and try to refresh them)."""
    if token is None:
        return path
    head, sep, rest = path[1:].partition("/")
    if not sep or not secrets.compare_digest(head.encode(), token.encode()):
        raise forbidden(
            "Request is missing the emulator's token: use the endpoint `vtrain emulator --token` printed "
            "(http://127.0.0.1:PORT/TOKEN).",
        )
    return "/" + rest


__all__ = ["TOKEN_ALPHABET", "check_content_type", "check_sender", "loopback_host", "new_token", "strip_token"]
