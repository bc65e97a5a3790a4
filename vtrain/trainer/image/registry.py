"""A small client for the OCI distribution API (v2), over requests; no Docker daemon.

What vtrain needs and no more: read a manifest (OCI or Docker v2 schema 2, lists and indexes
too) and a config blob; ask whether a blob exists (HEAD); mount a blob from another repository of
the same registry; upload a blob monolithically or in chunks (POST, then PATCH…, then PUT with
the digest), from bytes, a file or a stream from another registry; put a manifest.

Authentication follows the registry's ``WWW-Authenticate`` challenge: ``Bearer realm=…,
service=…,scope=…`` fetches a token from the realm (with the credentials, when there are any,
as basic auth), ``Basic`` sends the credentials on every request. Credentials come from a
callable ``credentials(registry) -> (user, password) | None``, asked at most once per client; for
Artifact Registry that is ``("oauth2accesstoken", <google-auth access token>)``.

Every attempt waits at most :func:`vtrain.network.attempt_timeout` to connect and for each read;
transient failures (connection errors, timeouts, 429, 500/502/503/504) are retried with backoff
for at most :func:`vtrain.network.deadline`, with a progress line before each retry. What cannot
be done is one :class:`~vtrain.errors.PackagingError` line: the registry unreachable, access
refused (401/403), anything else the registry answered, with its own error message.

``sent`` counts the blob bytes this client sent, the figure the tests and the benchmark report.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, TypeAlias
from urllib.parse import urljoin

import requests

from vtrain import network
from vtrain.errors import PackagingError
from vtrain.trainer.image.config import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST
from vtrain.trainer.image.reference import base_url, is_loopback

Credentials = Callable[[str], "tuple[str, str] | None"]
#: A fresh body for each attempt: bytes, or a callable that opens a readable stream.
Body: TypeAlias = "bytes | Callable[[], BinaryIO] | None"
ACCEPT = ", ".join((OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST))
_TRANSIENT_STATUS = {429, 500, 502, 503, 504}
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
MAX_ATTEMPTS = 5


class _Transient(Exception):
    """One attempt failed in a way worth another (a transient status or a network error)."""

    def __init__(self, why: str, cause: BaseException | None = None, *, answered: bool = False) -> None:
        super().__init__(why)
        self.cause = cause
        self.answered = answered  # the registry answered (a 5xx or 429), it was not unreachable


class _Counted:
    """A readable stream that adds what is read from it to `client.sent`; has a length for requests."""

    def __init__(self, raw: Any, size: int, client: RegistryClient) -> None:
        self.raw, self.size, self.client = raw, size, client

    def __len__(self) -> int:
        return self.size

    def close(self) -> None:
        self.raw.close()

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.raw.read(n, decode_content=False) if hasattr(self.raw, "stream") else self.raw.read(n)
        self.client.sent += len(data)
        return data


class RegistryClient:
    """One registry: ``RegistryClient("us-docker.pkg.dev", credentials)``."""

    def __init__(self, registry: str, credentials: Credentials | None = None, *,
                 chunk_size: int | None = None, session: requests.Session | None = None) -> None:
        self.registry = registry
        self.url = base_url(registry)
        self.chunk_size = chunk_size  # None: one PUT per blob
        self.sent = 0
        self._credentials = credentials
        self._login: tuple[str, str] | None | bool = False  # False: not asked yet
        self._tokens: dict[str, str] = {}
        self._basic = False
        self.session = session or requests.Session()
        if is_loopback(registry):
            self.session.trust_env = False  # never send loopback traffic through a proxy
        self.timeout = network.attempt_timeout()

    # --- one request, with the auth dance ---------------------------------------------------------

    def _user(self) -> tuple[str, str] | None:
        if self._login is False:
            self._login = self._credentials(self.registry) if self._credentials else None
        return self._login or None  # type: ignore[return-value]

    def _auth_headers(self, scopes: tuple[str, ...]) -> dict[str, str]:
        token = self._tokens.get(" ".join(scopes))
        if token:
            return {"Authorization": f"Bearer {token}"}
        return {}

    def _token(self, challenge: str, scopes: tuple[str, ...]) -> None:
        kind = challenge.split(" ", 1)[0].lower()
        fields = dict(_CHALLENGE.findall(challenge))
        if kind == "basic":
            if self._user() is None:
                raise self._refused(401, "it asks for a user name and password and none were given")
            self._basic = True
            return
        if kind != "bearer" or "realm" not in fields:
            raise PackagingError(f"registry {self.registry}: unsupported authentication challenge {challenge!r}")
        params: list[tuple[str, str]] = [("service", fields["service"])] if "service" in fields else []
        params += [("scope", s) for s in scopes]
        try:
            answer = self.session.get(fields["realm"], params=params, auth=self._user(), timeout=self.timeout)
        except requests.RequestException as err:
            raise _Transient(network.network_reason(err, self.timeout), err) from err
        if answer.status_code in (401, 403):
            whose = "the credentials" if self._user() is not None else "an anonymous token"
            raise self._refused(answer.status_code, f"the token service refused {whose}")
        if answer.status_code in _TRANSIENT_STATUS:
            raise _Transient(f"its token service answered {answer.status_code}", answered=True)
        try:
            data = answer.json() if answer.status_code == 200 else None
        except ValueError:
            data = None
        token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise PackagingError(f"registry {self.registry}: its token service at {fields['realm']} gave no token "
                                 f"({answer.status_code})")
        self._tokens[" ".join(scopes)] = token

    def _refused(self, status: int, why: str) -> PackagingError:
        given = "" if self._user() is None else " (credentials were sent)"
        word = "unauthorized" if status == 401 else "forbidden"
        return PackagingError(f"registry {self.registry} refused access ({status} {word}): {why}{given}; "
                              "check the credentials and the repository's permissions")

    def request(self, method: str, url: str, scopes: tuple[str, ...], *, body: Body = None,
                headers: dict[str, str] | None = None, stream: bool = False) -> requests.Response:
        """One attempt (after at most one authentication round); a transient failure raises _Transient."""
        full = url if url.startswith(("http://", "https://")) else f"{self.url}{url}"
        for round_ in (0, 1):
            sent_headers = {**self._auth_headers(scopes), **(headers or {})}
            data = body() if callable(body) else body
            try:
                answer = self.session.request(method, full, data=data, headers=sent_headers, stream=stream,
                                              timeout=self.timeout, allow_redirects=method == "GET",
                                              auth=self._user() if self._basic else None)
            except requests.RequestException as err:
                raise _Transient(network.network_reason(err, self.timeout), err) from err
            finally:
                if data is not None and not isinstance(data, bytes) and hasattr(data, "close"):
                    data.close()
            if answer.status_code == 401 and round_ == 0:
                self._token(answer.headers.get("WWW-Authenticate", ""), scopes)
                continue
            if answer.status_code in (401, 403):
                raise self._refused(answer.status_code, _message(answer) or "access denied")
            if answer.status_code in _TRANSIENT_STATUS:
                raise _Transient(f"{answer.status_code} {_message(answer) or answer.reason}", answered=True)
            return answer
        raise AssertionError("unreachable")

    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """`fn` (one attempt) until it succeeds, for at most the network deadline and MAX_ATTEMPTS."""
        start, wait = time.monotonic(), 0.5
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return fn()
            except _Transient as err:
                spent = time.monotonic() - start
                if attempt == MAX_ATTEMPTS or spent + wait > network.deadline():
                    tried = f"gave up after {attempt} attempts in {spent:.0f} s"
                    if err.answered:
                        raise PackagingError(f"registry {self.registry} could not {what}: it answered {err} "
                                             f"({tried}); try again later") from None
                    raise PackagingError(
                        f"cannot reach registry {self.registry} to {what} ({err}; {tried}); check the address, "
                        f"the network and any proxy (HTTPS_PROXY); {network.TIMEOUT_ENV} sets the seconds to wait "
                        "per attempt") from None
                network.note(f"registry {self.registry}: {what}: {err}; retrying")
                time.sleep(wait)
                wait = min(wait * 2, 8.0)
        raise AssertionError("unreachable")

    def _failed(self, what: str, answer: requests.Response) -> PackagingError:
        return PackagingError(f"registry {self.registry}: {what} failed: {answer.status_code} "
                              f"{_message(answer) or answer.reason}")

    # --- the operations --------------------------------------------------------------------------

    def manifest(self, repository: str, reference: str) -> tuple[str, bytes, str] | None:
        """(media type, bytes, digest) of a manifest, or None when the registry has none by that name."""
        def attempt() -> tuple[str, bytes, str] | None:
            answer = self.request("GET", f"/v2/{repository}/manifests/{reference}", _pull(repository),
                                  headers={"Accept": ACCEPT})
            if answer.status_code == 404:
                return None
            if answer.status_code != 200:
                raise self._failed(f"reading manifest {repository}:{reference}", answer)
            body = answer.content
            kind = answer.headers.get("Content-Type", "").split(";")[0].strip()
            return kind, body, f"sha256:{hashlib.sha256(body).hexdigest()}"

        return self.call(f"read manifest {repository}:{reference}", attempt)  # type: ignore[no-any-return]

    def blob(self, repository: str, digest: str, limit: int = 16 << 20) -> bytes:
        """A small blob (a config) read whole, its digest checked."""
        def attempt() -> bytes:
            answer = self.request("GET", f"/v2/{repository}/blobs/{digest}", _pull(repository), stream=True)
            if answer.status_code != 200:
                raise self._failed(f"reading blob {digest[:19]} of {repository}", answer)
            data: bytes = answer.raw.read(limit + 1, decode_content=True)
            if len(data) > limit or f"sha256:{hashlib.sha256(data).hexdigest()}" != digest:
                raise PackagingError(f"registry {self.registry}: blob {digest} of {repository} is not what its "
                                     "digest says")
            return data

        return self.call(f"read blob {digest[:19]}", attempt)  # type: ignore[no-any-return]

    def open_blob(self, repository: str, digest: str) -> Any:
        """A blob's bytes as a stream (urllib3's raw response), for a copy to another registry."""
        answer = self.request("GET", f"/v2/{repository}/blobs/{digest}", _pull(repository), stream=True)
        if answer.status_code != 200:
            raise self._failed(f"reading blob {digest[:19]} of {repository}", answer)
        return answer.raw

    def has_blob(self, repository: str, digest: str) -> bool:
        def attempt() -> bool:
            answer = self.request("HEAD", f"/v2/{repository}/blobs/{digest}", _push(repository))
            if answer.status_code == 404:
                return False
            if answer.status_code >= 400:
                raise self._failed(f"looking for blob {digest[:19]} in {repository}", answer)
            return True

        return self.call(f"look for blob {digest[:19]}", attempt)  # type: ignore[no-any-return]

    def mount(self, repository: str, digest: str, source: str) -> bool:
        """Link a blob of `source` (same registry) into `repository` without sending it; False when the
        registry would not (it then opened an upload, which is cancelled)."""
        def attempt() -> bool:
            scopes = (*_push(repository), *_pull(source))
            answer = self.request("POST", f"/v2/{repository}/blobs/uploads/?mount={digest}&from={source}", scopes)
            if answer.status_code == 201:
                return True
            if answer.status_code == 202 and answer.headers.get("Location"):
                self.request("DELETE", urljoin(self.url + "/", answer.headers["Location"]), scopes)
                return False
            raise self._failed(f"mounting blob {digest[:19]} from {source} into {repository}", answer)

        return self.call(f"mount blob {digest[:19]}", attempt)  # type: ignore[no-any-return]

    def upload(self, repository: str, digest: str, size: int, opener: Callable[[], BinaryIO]) -> None:
        """Send a blob: POST for an upload URL, then one PUT with the digest, or PATCHes of `chunk_size`
        bytes and a closing PUT. A transient failure starts the upload over."""
        def attempt() -> None:
            scopes = _push(repository)
            answer = self.request("POST", f"/v2/{repository}/blobs/uploads/", scopes)
            if answer.status_code != 202 or not answer.headers.get("Location"):
                raise self._failed(f"starting the upload of {digest[:19]} to {repository}", answer)
            location = urljoin(self.url + "/", answer.headers["Location"])
            octets = {"Content-Type": "application/octet-stream"}
            if self.chunk_size is None or size <= self.chunk_size:
                answer = self.request("PUT", _with_digest(location, digest), scopes, headers=octets,
                                      body=lambda: _Counted(opener(), size, self))  # type: ignore[arg-type,return-value]
            else:
                with opener() as stream:
                    for start, chunk in _chunks(stream, self.chunk_size):
                        headers = {**octets, "Content-Range": f"{start}-{start + len(chunk) - 1}"}
                        answer = self.request("PATCH", location, scopes, headers=headers, body=chunk)
                        self.sent += len(chunk)
                        if answer.status_code != 202:
                            raise self._failed(f"uploading {digest[:19]} to {repository}", answer)
                        location = urljoin(self.url + "/", answer.headers.get("Location", location))
                answer = self.request("PUT", _with_digest(location, digest), scopes, body=b"")
            if answer.status_code != 201:
                raise self._failed(f"finishing the upload of {digest[:19]} to {repository}", answer)

        self.call(f"upload blob {digest[:19]}", attempt)

    def put_manifest(self, repository: str, tag: str, media_type: str, body: bytes) -> str:
        """Tag the image: the manifest goes last, once every blob it names is there. Returns its digest."""
        def attempt() -> str:
            answer = self.request("PUT", f"/v2/{repository}/manifests/{tag}", _push(repository),
                                  headers={"Content-Type": media_type}, body=body)
            if answer.status_code not in (200, 201):
                raise self._failed(f"putting manifest {repository}:{tag}", answer)
            return answer.headers.get("Docker-Content-Digest") or f"sha256:{hashlib.sha256(body).hexdigest()}"

        return self.call(f"put manifest {repository}:{tag}", attempt)  # type: ignore[no-any-return]


def _pull(repository: str) -> tuple[str, ...]:
    return (f"repository:{repository}:pull",)


def _push(repository: str) -> tuple[str, ...]:
    return (f"repository:{repository}:pull,push",)


def _with_digest(location: str, digest: str) -> str:
    return f"{location}{'&' if '?' in location else '?'}digest={digest}"


def _chunks(stream: BinaryIO, size: int) -> Iterable[tuple[int, bytes]]:
    offset = 0
    while True:
        chunk = stream.read(size)
        if not chunk:
            return
        yield offset, chunk
        offset += len(chunk)


def _message(answer: requests.Response) -> str:
    """The registry's own error message (`{"errors": [{"code", "message"}]}`), when it gave one."""
    try:
        errors = answer.json().get("errors") or []
    except ValueError:
        return ""
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    return str(first.get("message") or first.get("code") or "")
