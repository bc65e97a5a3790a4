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

Trust (issue 29): the client believes only a registry. Before anything else it asks ``/v2/``,
which must answer 200 or 401 with the ``Docker-Distribution-API-Version`` header (a web server that
answers 200 to everything is "not a registry", and nothing is pushed); a digest a registry names
(``Docker-Content-Digest``) must be the one sent or asked for, and a manifest fetched by digest must
hash to it. Credentials go only to the registry's own URLs (scheme, host and port) and to a token
service on its host or domain, never over plain http except to this machine; an upload
``Location`` on another host gets no Authorization header (and one over plain http to another
machine is refused). Every body is read bounded (a manifest 4 MiB, a token answer 1 MiB, an error
64 KiB: a 4 GiB answer costs no memory), and an error body of any shape (the OCI ``errors`` list,
another JSON shape, HTML, text, bytes) becomes one printable line (:func:`vtrain.foreign.printable`).
Every blob, a manifest and a config included, is read through one
:class:`~vtrain.trainer.image.answers.BlobReader`: at most its declared size, within a time bound,
checked against its digest before its last byte is handed over (:meth:`RegistryClient.open_blob` as a
stream, :meth:`~RegistryClient.save_blob` into a file, :meth:`~RegistryClient.blob` whole).

``sent`` counts the blob bytes this client sent, the figure the tests and the benchmark report.
Every pull goes through :func:`vtrain.trainer.image.mirrors.pull_client` (registry mirrors).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias
from urllib.parse import urljoin, urlsplit

import requests

from vtrain import network
from vtrain.errors import PackagingError
from vtrain.foreign import printable
from vtrain.trainer.image import answers
from vtrain.trainer.image.answers import digest_problem, size_problem
from vtrain.trainer.image.config import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST
from vtrain.trainer.image.reference import base_url, is_loopback, trusted_realm

Credentials = Callable[[str], "tuple[str, str] | None"]
#: A fresh body for each attempt: bytes, or a callable that opens a readable stream.
Body: TypeAlias = "bytes | Callable[[], BinaryIO] | None"
ACCEPT = ", ".join((OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST))
_TRANSIENT_STATUS = {429, 500, 502, 503, 504}
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
MAX_ATTEMPTS = 5
API_VERSION_HEADER = "Docker-Distribution-API-Version"
DIGEST_HEADER = "Docker-Content-Digest"
#: The most a registry answer may hold: a manifest (the distribution registry's own limit is 4 MiB),
#: a token service's answer (an error body: :data:`~vtrain.trainer.image.answers.ERROR_LIMIT`).
MANIFEST_LIMIT = 4 << 20
TOKEN_LIMIT = 1 << 20
#: The most an image config may hold (configs are a few kB; a base's history can make one ~100 kB).
CONFIG_LIMIT = 16 << 20


class _Transient(Exception):
    """One attempt failed in a way worth another (a transient status or a network error)."""

    def __init__(self, why: str, cause: BaseException | None = None, *, answered: bool = False) -> None:
        super().__init__(why)
        self.cause = cause
        self.answered = answered  # the registry answered (a 5xx or 429), it was not unreachable

    @classmethod
    def of(cls, why: str, cause: BaseException) -> _Transient:
        """A body cut off part-way: the registry answered, the transfer broke (BlobReader's network_error)."""
        return cls(why, cause, answered=True)


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

    mirror_of: str | None = None  # the registry this client stands in for (mirrors.pull_client)

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
        self._verified = False  # /v2/ answered as a registry does
        self._withheld = ""  # a token service that was not given the credentials, and why
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

    def _own(self, url: str) -> bool:
        """`url` is on this registry (same scheme, host and port): the only place credentials go."""
        mine, theirs = urlsplit(self.url), urlsplit(url)
        return (theirs.scheme, theirs.netloc.lower()) == (mine.scheme, mine.netloc.lower())

    def _refuse_plain_http(self, url: str, what: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.netloc)):
            raise PackagingError(f"registry {self.registry}: {what} {printable(url, limit=200)} is not https "
                                 "(plain http only to this machine); refusing to send anything there")

    def _verify(self) -> None:
        """Before anything else is sent: /v2/ must answer as an OCI registry does (200, or 401 with a
        challenge) with the ``Docker-Distribution-API-Version`` header. A web server that answers 200 to
        everything, a proxy's login page or a typo'd host is refused here, with nothing pushed."""
        try:
            answer = self.session.get(f"{self.url}/v2/", timeout=self.timeout, stream=True, allow_redirects=False)
        except requests.RequestException as err:
            raise _Transient(network.network_reason(err, self.timeout), err) from err
        with answer:
            if answer.status_code in _TRANSIENT_STATUS:
                raise _Transient(f"{answer.status_code} {answers.message(answer) or printable(answer.reason or '')}",
                                 answered=True)
            version = answer.headers.get(API_VERSION_HEADER, "")
        if answer.status_code not in (200, 401) or not version.strip().startswith("registry/2"):
            said = f"with {API_VERSION_HEADER}: {printable(version, limit=60)}" if version else \
                f"without the {API_VERSION_HEADER} header every registry sends"
            raise PackagingError(f"{self.registry} is not a registry: GET /v2/ answered {answer.status_code} {said}; "
                                 "check the host of the image repository (nothing was sent)")
        self._verified = True

    def _token(self, challenge: str, scopes: tuple[str, ...]) -> None:
        kind = challenge.split(" ", 1)[0].lower()
        fields = dict(_CHALLENGE.findall(challenge))
        if kind == "basic":
            if self._user() is None:
                raise self._refused(401, "it asks for a user name and password and none were given")
            self._basic = True
            return
        if kind != "bearer" or "realm" not in fields:
            raise PackagingError(f"registry {self.registry}: unsupported authentication challenge "
                                 f"{printable(challenge, limit=200)!r}")
        realm = fields["realm"]
        self._refuse_plain_http(realm, "its token service")
        params: list[tuple[str, str]] = [("service", fields["service"])] if "service" in fields else []
        params += [("scope", s) for s in scopes]
        # The user's credentials go to the registry's own token service only (its host, or a host of its
        # domain such as auth.docker.io for registry-1.docker.io); any other gets an anonymous request.
        login = self._user() if trusted_realm(self.registry, realm) else None
        if login is None and self._user() is not None:
            self._withheld = (f"the credentials were not sent to the token service {printable(realm, limit=200)}: "
                              "it is not on the registry's host or domain")
        try:
            answer = self.session.get(realm, params=params, auth=login, timeout=self.timeout, stream=True,
                                      allow_redirects=False)
        except requests.RequestException as err:
            raise _Transient(network.network_reason(err, self.timeout), err) from err
        with answer:
            if answer.status_code in (401, 403):
                whose = "the credentials" if login is not None else "an anonymous token"
                raise self._refused(answer.status_code, f"the token service refused {whose}")
            if answer.status_code in _TRANSIENT_STATUS:
                raise _Transient(f"its token service answered {answer.status_code}", answered=True)
            data = answers.parse_json(answers.read(answer, TOKEN_LIMIT, self.registry, "its token service's answer")) \
                if answer.status_code == 200 else None
        token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
        if not isinstance(token, str) or not token or not token.isascii() or not token.isprintable():
            raise PackagingError(f"registry {self.registry}: its token service at {printable(realm, limit=200)} gave "
                                 f"no token ({answer.status_code})")
        self._tokens[" ".join(scopes)] = token

    def _refused(self, status: int, why: str) -> PackagingError:
        given = "" if self._user() is None else " (credentials were sent)"
        if self._withheld:
            given = f" ({self._withheld})"
        word = "unauthorized" if status == 401 else "forbidden"
        return PackagingError(f"registry {self.registry} refused access ({status} {word}): {why}{given}; "
                              "check the credentials and the repository's permissions")

    def request(self, method: str, url: str, scopes: tuple[str, ...], *, body: Body = None,
                headers: dict[str, str] | None = None, stream: bool = True) -> requests.Response:
        """One attempt (after at most one authentication round); a transient failure raises _Transient.

        The answer is always streamed: its body is read by the caller, bounded. Credentials (a token,
        basic auth) go only to this registry's own URLs: an upload `Location` on another host gets none,
        and one over plain http (not to this machine) is refused."""
        full = url if url.startswith(("http://", "https://")) else f"{self.url}{url}"
        own = self._own(full)
        if not own:
            self._refuse_plain_http(full, "the upload location")
        if not self._verified:
            self._verify()
        for round_ in (0, 1):
            sent_headers = {**(self._auth_headers(scopes) if own else {}), **(headers or {})}
            data = body() if callable(body) else body
            try:
                answer = self.session.request(method, full, data=data, headers=sent_headers, stream=True,
                                              timeout=self.timeout, allow_redirects=method == "GET",
                                              auth=self._user() if self._basic and own else None)
            except requests.RequestException as err:
                raise _Transient(network.network_reason(err, self.timeout), err) from err
            finally:
                if data is not None and not isinstance(data, bytes) and hasattr(data, "close"):
                    data.close()
            if answer.status_code == 401 and round_ == 0 and own:
                challenge = answer.headers.get("WWW-Authenticate", "")
                answers.discard(answer)
                self._token(challenge, scopes)
                continue
            if answer.status_code in (401, 403):
                raise self._refused(answer.status_code, answers.message(answer) or "access denied")
            if answer.status_code in _TRANSIENT_STATUS:
                raise _Transient(f"{answer.status_code} {answers.message(answer) or printable(answer.reason or '')}",
                                 answered=True)
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
                              f"{answers.message(answer) or printable(answer.reason or '', limit=200)}")

    def _digest_answered(self, answer: requests.Response, expected: str, what: str) -> None:
        """A registry that names a digest must name the one sent (or asked for): else it is not storing it."""
        said = answer.headers.get(DIGEST_HEADER)
        if said is not None and said.strip() != expected:
            raise PackagingError(f"registry {self.registry}: {what}: it answered digest {printable(said, limit=80)}, "
                                 f"not {expected}; it does not hold what was sent")

    # --- the operations --------------------------------------------------------------------------

    def manifest(self, repository: str, reference: str) -> tuple[str, bytes, str] | None:
        """(media type, bytes, digest) of a manifest, or None when the registry has none by that name.
        Read bounded (MANIFEST_LIMIT); one asked for by digest must hash to it."""
        def attempt() -> tuple[str, bytes, str] | None:
            answer = self.request("GET", f"/v2/{repository}/manifests/{reference}", _pull(repository),
                                  headers={"Accept": ACCEPT})
            with answer:
                if answer.status_code == 404:
                    return None
                if answer.status_code != 200:
                    raise self._failed(f"reading manifest {repository}:{reference}", answer)
                by_digest = digest_problem(reference) is None
                body = answers.BlobReader(answer, registry=self.registry, what=f"manifest {repository}:{reference}",
                                          digest=reference if by_digest else None, size=None, limit=MANIFEST_LIMIT,
                                          network_error=_Transient.of).read_all()
            digest = f"sha256:{hashlib.sha256(body).hexdigest()}"
            self._digest_answered(answer, reference if by_digest else digest,
                                  f"reading manifest {repository}:{reference}")
            kind = answer.headers.get("Content-Type", "").split(";")[0].strip()
            return kind, body, digest

        return self.call(f"read manifest {repository}:{reference}", attempt)  # type: ignore[no-any-return]

    def blob(self, repository: str, digest: str, size: int | None = None, limit: int = CONFIG_LIMIT) -> bytes:
        """A small blob (a config) read whole: at most `size` bytes (its descriptor's; unknown: `limit`), within
        the time bound, its digest checked; retried as any call."""
        def attempt() -> bytes:
            with self._open(repository, digest, size, limit, retried=True) as reader:
                return reader.read_all()

        return self.call(f"read blob {digest[:19]}", attempt)  # type: ignore[no-any-return]

    def open_blob(self, repository: str, digest: str, size: int) -> answers.BlobReader:
        """A blob's bytes as stored, as a stream (a base layer scanned for its C library, or copied to another
        registry): never more than its declared `size`, within the time bound, and the last read checks the
        digest before it returns. Opening is retried as any call; a transfer that breaks later is one line."""
        return self.call(f"read blob {digest[:19]}",  # type: ignore[no-any-return]
                         lambda: self._open(repository, digest, size, answers.MAX_BLOB, retried=False))

    def save_blob(self, repository: str, digest: str, size: int, path: Path) -> Path:
        """A blob into the file `path` (a layer pulled into the cache): streamed through the bounded reader into
        a temporary file beside it, renamed into place only once the digest matched; retried (from the start)
        when the transfer breaks. The file is never there unverified."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.part")

        def attempt() -> Path:
            try:
                with self._open(repository, digest, size, answers.MAX_BLOB, retried=True) as reader:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with open(tmp, "wb") as out:
                        while chunk := reader.read():
                            out.write(chunk)
                os.replace(tmp, path)
            except OSError as err:
                raise PackagingError(f"cannot write blob {digest[:19]} of {repository} to {path}: "
                                     f"{err.strerror or err}") from None
            finally:
                tmp.unlink(missing_ok=True)
            return path

        return self.call(f"read blob {digest[:19]}", attempt)  # type: ignore[no-any-return]

    def _open(self, repository: str, digest: str, size: int | None, limit: int, *,
              retried: bool) -> answers.BlobReader:
        """One GET of a blob, as a bounded reader; `retried`: a transfer broken part-way is a _Transient (the
        attempt is retried whole), else one PackagingError line."""
        bad = digest_problem(digest) or (size_problem(size, limit) if size is not None else None)
        if bad:
            raise PackagingError(f"registry {self.registry}: blob of {repository}: {bad}")
        answer = self.request("GET", f"/v2/{repository}/blobs/{digest}", _pull(repository))
        if answer.status_code != 200:
            with answer:
                raise self._failed(f"reading blob {digest[:19]} of {repository}", answer)
        return answers.BlobReader(answer, registry=self.registry, what=f"blob {digest[:19]} of {repository}",
                                  digest=digest, size=size, limit=limit,
                                  network_error=_Transient.of if retried else None)

    def has_blob(self, repository: str, digest: str) -> bool:
        def attempt() -> bool:
            answer = self.request("HEAD", f"/v2/{repository}/blobs/{digest}", _push(repository))
            with answer:
                if answer.status_code == 404:
                    return False
                if answer.status_code != 200:
                    raise self._failed(f"looking for blob {digest[:19]} in {repository}", answer)
            self._digest_answered(answer, digest, f"looking for blob {digest[:19]} in {repository}")
            return True

        return self.call(f"look for blob {digest[:19]}", attempt)  # type: ignore[no-any-return]

    def mount(self, repository: str, digest: str, source: str) -> bool:
        """Link a blob of `source` (same registry) into `repository` without sending it; False when the
        registry would not (it then opened an upload, which is cancelled)."""
        def attempt() -> bool:
            scopes = (*_push(repository), *_pull(source))
            answer = self.request("POST", f"/v2/{repository}/blobs/uploads/?mount={digest}&from={source}", scopes)
            with answer:
                if answer.status_code == 201:
                    self._digest_answered(answer, digest, f"mounting blob {digest[:19]} into {repository}")
                    return True
                if answer.status_code == 202 and answer.headers.get("Location"):
                    answers.discard(answer)
                    with self.request("DELETE", urljoin(self.url + "/", answer.headers["Location"]), scopes) as gone:
                        answers.discard(gone)
                    return False
                raise self._failed(f"mounting blob {digest[:19]} from {source} into {repository}", answer)

        return self.call(f"mount blob {digest[:19]}", attempt)  # type: ignore[no-any-return]

    def upload(self, repository: str, digest: str, size: int, opener: Callable[[], BinaryIO]) -> None:
        """Send a blob: POST for an upload URL, then one PUT with the digest, or PATCHes of `chunk_size`
        bytes and a closing PUT. A transient failure starts the upload over. The registry must answer
        201 and, when it names a digest, the one sent."""
        def attempt() -> None:
            scopes = _push(repository)
            with self.request("POST", f"/v2/{repository}/blobs/uploads/", scopes) as answer:
                if answer.status_code != 202 or not answer.headers.get("Location"):
                    raise self._failed(f"starting the upload of {digest[:19]} to {repository}", answer)
                answers.discard(answer)
            location = urljoin(self.url + "/", answer.headers["Location"])
            octets = {"Content-Type": "application/octet-stream"}
            if self.chunk_size is None or size <= self.chunk_size:
                answer = self.request("PUT", _with_digest(location, digest), scopes, headers=octets,
                                      body=lambda: _Counted(opener(), size, self))  # type: ignore[arg-type,return-value]
            else:
                with opener() as stream:
                    for start, chunk in _chunks(stream, self.chunk_size):
                        headers = {**octets, "Content-Range": f"{start}-{start + len(chunk) - 1}"}
                        with self.request("PATCH", location, scopes, headers=headers, body=chunk) as answer:
                            self.sent += len(chunk)
                            if answer.status_code != 202:
                                raise self._failed(f"uploading {digest[:19]} to {repository}", answer)
                            answers.discard(answer)
                        location = urljoin(self.url + "/", answer.headers.get("Location", location))
                answer = self.request("PUT", _with_digest(location, digest), scopes, body=b"")
            with answer:
                if answer.status_code != 201:
                    raise self._failed(f"finishing the upload of {digest[:19]} to {repository}", answer)
                answers.discard(answer)
            self._digest_answered(answer, digest, f"uploading {digest[:19]} to {repository}")

        self.call(f"upload blob {digest[:19]}", attempt)

    def put_manifest(self, repository: str, tag: str, media_type: str, body: bytes) -> str:
        """Tag the image: the manifest goes last, once every blob it names is there. Returns its digest
        (the hash of what was sent; a registry that names another is refused)."""
        digest = f"sha256:{hashlib.sha256(body).hexdigest()}"

        def attempt() -> str:
            with self.request("PUT", f"/v2/{repository}/manifests/{tag}", _push(repository),
                              headers={"Content-Type": media_type}, body=body) as answer:
                if answer.status_code != 201:
                    raise self._failed(f"putting manifest {repository}:{tag}", answer)
                answers.discard(answer)
            self._digest_answered(answer, digest, f"putting manifest {repository}:{tag}")
            return digest

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
