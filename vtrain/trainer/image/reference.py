"""Image references (``HOST[:PORT]/REPO[:TAG][@DIGEST]``) as Docker reads them, and how to reach a host.

A first component with a ``.`` or a ``:`` (or ``localhost``) is the registry; otherwise the image
is on Docker Hub (``ubuntu`` is ``registry-1.docker.io/library/ubuntu:latest``). Loopback hosts
(``localhost``, ``127.0.0.0/8``, ``::1``) are spoken to over plain HTTP, as Docker does; every other
registry over HTTPS.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from vtrain.errors import PackagingError

DOCKER_HUB = "registry-1.docker.io"
#: The longest image name (registry host and repository) Docker's reference grammar takes (its
#: NameTotalLengthMax), and so the longest reference: a name, a :tag (128) and an @sha256: digest (71).
MAX_NAME = 255
MAX_REFERENCE = MAX_NAME + 1 + 128 + 1 + 71
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HOST = re.compile(r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
                   r"|\[[0-9a-fA-F:]+\])(?::[0-9]+)?")


def port_problem(text: str) -> str | None:
    """What is wrong with the registry port of image reference `text` (TCP ports are 1 to 65535), or None."""
    first, slash, _ = text.strip().partition("/")
    found = re.fullmatch(r"(?:\[[0-9a-fA-F:]+\]|[^:\[\]]+):([0-9]+)", first) if slash else None
    if found is None or 1 <= int(found[1]) <= 65535:
        return None
    return f"registry port {found[1]} in {first!r} is not a TCP port (1 to 65535)"


@dataclass(frozen=True)
class ImageRef:
    registry: str  # host[:port] as written, Docker Hub's API host for hub images
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What to ask the registry for: the digest when pinned, else the tag (latest by default)."""
        return self.digest or self.tag or "latest"

    def with_tag(self, tag: str) -> ImageRef:
        return replace(self, tag=tag, digest=None)

    def with_digest(self, digest: str) -> ImageRef:
        return replace(self, digest=digest)

    def __str__(self) -> str:
        text = f"{self.registry}/{self.repository}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_reference(text: str, *, what: str = "image") -> ImageRef:
    """`text` as an :class:`ImageRef`; a malformed one is a one-line PackagingError (see :func:`reference_problem`)."""
    found = _parse(text)
    if isinstance(found, str):
        raise PackagingError(f"{what} {_quoted(text)}: {found}")
    return found


def reference_problem(text: str, *, what: str = "image") -> str | None:
    """What is wrong with image reference `text` ("image 'X': ..."), or None: the one check of every value that
    names an image (a job file's image URIs, a serving image, a base, a push target, an upload to the emulator).
    Bounded (a text over :data:`MAX_REFERENCE` characters is refused before it is parsed; the text is shown
    escaped and cut), and where the fix is plain (a scheme, a space, upper case) the message ends with the
    nearest valid reference."""
    found = _parse(text)
    return f"{what} {_quoted(text)}: {found}" if isinstance(found, str) else None


def _quoted(text: str) -> str:
    from vtrain.foreign import printable

    return "'" + printable(text, limit=120) + "'"


def _parse(text: str) -> ImageRef | str:
    """The reference, or what is wrong with it (a phrase to follow "image 'X': ")."""
    if not text:
        return "an image reference is empty; e.g. us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG"
    if len(text) > MAX_REFERENCE:
        return (f"it is {len(text):,} characters; an image reference is at most {MAX_REFERENCE} (a name of at most "
                f"{MAX_NAME}, a :tag of at most 128, an @sha256: digest)")
    problems = [problem for fix, problem in _PLAIN_MISTAKES if fix(text) != text]
    if not problems:
        return _grammar(text)
    fixed = text
    for fix, _ in _PLAIN_MISTAKES:  # every plain fix at once: the nearest valid reference, when there is one
        fixed = fix(fixed)
    return f"{problems[0]}; try {_quoted(fixed)}" if fixed and isinstance(_grammar(fixed), ImageRef) else problems[0]


def _no_scheme(text: str) -> str:
    return text.split("://", 1)[1] if "://" in text else text


def _no_space(text: str) -> str:
    """`text` stripped when only its ends had whitespace; "" (no fix to offer) when its inside has some."""
    def clean(part: str) -> bool:
        return all(ch.isprintable() and not ch.isspace() for ch in part)

    if clean(text):
        return text
    return text.strip() if clean(text.strip()) else ""


def _lower(text: str) -> str:
    """The reference with everything but its tag lower-cased (a tag may have upper case, nothing else may)."""
    name, at, digest = text.partition("@")
    head, slash, last = name.rpartition("/")
    last_name, colon, tag = last.partition(":")
    return head.lower() + slash + last_name.lower() + colon + tag + at + digest.lower()


#: Mistakes with a plain fix, in the order they are looked for: each is (the fix, what is wrong).
_PLAIN_MISTAKES: tuple[tuple[Callable[[str], str], str], ...] = (
    (_no_scheme, "an image reference has no scheme (http://, https://, docker://): it starts with the registry "
                 "host"),
    (_no_space, "it has whitespace or a control character in it, which no image reference has"),
    (_lower, "it has upper-case letters: an image's registry host and repository are lower-case (only a tag may "
             "have upper case)"),
)


def _grammar(text: str) -> ImageRef | str:
    raw = text
    digest = None
    if "@" in raw:
        raw, digest = raw.split("@", 1)
        if not _DIGEST.fullmatch(digest):
            return "the digest after @ must be sha256: and 64 hex digits"
    first, _, rest = raw.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, path = first, rest
        if not _HOST.fullmatch(registry):
            return f"{_quoted(registry)} is not a registry host[:port]"
        problem = port_problem(raw)
        if problem:
            return problem
    else:
        registry, path = DOCKER_HUB, raw
        if "/" not in path:
            path = f"library/{path}"
    tag = None
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        path, tag = path.rsplit(":", 1)
        if not _TAG.fullmatch(tag):
            return f"tag {_quoted(tag)} is not valid (letters, digits, _ . -; at most 128)"
    if not _REPOSITORY.fullmatch(path):
        return (f"repository {_quoted(path)} is not valid (lowercase letters, digits and separators . _ - between "
                "them, components split by /)")
    name = raw.rsplit(":", 1)[0] if tag else raw
    if len(name) > MAX_NAME:
        return f"its name is {len(name)} characters; an image name is at most {MAX_NAME}"
    return ImageRef(registry=registry, repository=path, tag=tag, digest=digest)


def parse_repository(text: str) -> ImageRef:
    """A push target: HOST[:PORT]/REPO with no tag or digest (vtrain names the tag)."""
    ref = parse_reference(text, what="image repository")
    if ref.tag or ref.digest:
        raise PackagingError(f"image repository {text!r}: give it without a tag or digest; vtrain tags each image "
                             "with the hash of what goes into it")
    return ref


def is_loopback(registry: str) -> bool:
    host = registry.rsplit(":", 1)[0] if not registry.startswith("[") else registry.split("]")[0] + "]"
    return host in ("localhost", "[::1]") or bool(re.fullmatch(r"127\.[0-9]+\.[0-9]+\.[0-9]+", host))


def trusted_realm(registry: str, realm: str) -> bool:
    """The token service is the registry's own: its host, or a host in the registry host's parent domain
    (``auth.docker.io`` for ``registry-1.docker.io``); for a loopback registry, a loopback host."""
    host = (urlsplit(realm).hostname or "").lower()
    mine = registry.rsplit(":", 1)[0].strip("[]").lower() if not registry.startswith("[") else \
        registry.split("]")[0].strip("[").lower()
    if is_loopback(registry):
        return is_loopback(host if ":" not in host else f"[{host}]")
    if host == mine:
        return True
    parent = mine.split(".", 1)[1] if "." in mine else ""
    return "." in parent and not mine.replace(".", "").isdigit() and host.endswith("." + parent)


def base_url(registry: str) -> str:
    """``http://`` for a loopback registry, ``https://`` for any other."""
    return f"{'http' if is_loopback(registry) else 'https'}://{registry}"
