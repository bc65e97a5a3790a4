"""Which wheels a base image can run: its C library, as manylinux / musllinux platform tags.

A wheel tagged ``manylinux_2_28_x86_64`` needs glibc 2.28 or newer; ``musllinux_1_2_x86_64`` needs
musl 1.2. pip takes the tags literally (it widens only the legacy ``manylinux2014`` to 2010 and 1),
so :func:`platform_tags` spells out every tag a C library allows, newest first: for glibc 2.36 that
is ``manylinux_2_36`` down to ``manylinux_2_5`` plus the legacy names. Resolving for
``manylinux2014`` alone, as vtrain once did, silently picked older releases (or none: numpy 2.4's
cp311 wheels are ``manylinux_2_28``).

Where the C library comes from, first that answers:
- the job's ``trainer.build.platform`` (a tag such as ``manylinux_2_35_x86_64``);
- a prebuilt Vertex TensorFlow image: :data:`PREBUILT_PLATFORM`, the glibc floor of the distributions
  Google builds them on (Ubuntu 20.04 and Debian 11 both have 2.31), so never a wheel they cannot load;
- the base itself (:func:`read_libc`): its layers streamed bottom-up (never stored) until one holds
  ``libc.so.6`` (glibc: the version from its banner, "... release version 2.36.", or from a
  ``libc-2.31.so`` name) or ``ld-musl-ARCH.so.1`` (musl: 1.2 when ``/etc/os-release`` says Alpine
  3.13 or newer, else 1.1). The answer is cached by the base's config digest, so a base is read once.
"""

from __future__ import annotations

import json
import lzma
import os
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtrain.errors import PackagingError
from vtrain.foreign import printable
from vtrain.trainer.image.settings import ImageSettings
from vtrain.userpaths import cache_folder

#: Prebuilt Vertex TensorFlow training images: glibc 2.31 (see the module docstring).
PREBUILT_PLATFORM = "manylinux_2_31_x86_64"
_ARCHES = {"amd64": "x86_64", "arm64": "aarch64", "x86_64": "x86_64", "aarch64": "aarch64"}
_TAG = re.compile(r"(?:manylinux_(?P<glibc>2_[0-9]+)|(?P<legacy>manylinux2014|manylinux2010|manylinux1)"
                  r"|musllinux_(?P<musl>1_[0-9]+))_(?P<arch>x86_64|aarch64)")
_LEGACY = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_GLIBC_BANNER = re.compile(rb"GNU C Library[^\n\x00]{0,200}?release version ([0-9]+)\.([0-9]+)")
_GLIBC_NAME = re.compile(r"libc-([0-9]+)\.([0-9]+)\.so$")
#: The most of libc.so.6 read for its banner (glibc's is ~2 MB).
_MAX_LIBC = 16 << 20
_OS_RELEASE = ("etc/os-release", "usr/lib/os-release")


@dataclass(frozen=True)
class Libc:
    family: str  # glibc | musl
    major: int
    minor: int

    def tag(self, arch: str) -> str:
        """The newest platform tag this C library runs on `arch` (x86_64, aarch64)."""
        kind = "manylinux" if self.family == "glibc" else "musllinux"
        return f"{kind}_{self.major}_{self.minor}_{arch}"


def platform_problem(text: str) -> str | None:
    """Why `text` is not a platform tag vtrain can resolve for; None when it is one."""
    if _TAG.fullmatch(text.strip()) is None:
        return (f"'{printable(text)}' is not a wheel platform tag such as manylinux_2_35_x86_64 (glibc 2.35), "
                "manylinux2014_x86_64 or musllinux_1_2_x86_64 (x86_64 or aarch64)")
    return None


def platform_tags(tag: str) -> tuple[str, ...]:
    """Every tag a base whose newest is `tag` runs, newest first (pip takes each literally)."""
    found = _TAG.fullmatch(tag.strip())
    if found is None:
        raise PackagingError(platform_problem(tag) or tag)
    arch = found["arch"]
    if found["musl"]:
        minor = int(found["musl"].split("_")[1])
        return tuple(f"musllinux_1_{m}_{arch}" for m in range(minor, 0, -1))
    top = _LEGACY[found["legacy"]][1] if found["legacy"] else int(found["glibc"].split("_")[1])
    tags = [f"manylinux_2_{m}_{arch}" for m in range(top, 4, -1)]
    for name, (_, minor) in _LEGACY.items():
        if top >= minor and (name == "manylinux2014" or arch == "x86_64"):
            tags.append(f"{name}_{arch}")
    return tuple(tags)


def describe_tags(tags: tuple[str, ...] | list[str]) -> str:
    """The tags in a few words: the newest and what it implies."""
    if not tags:
        return "this machine's platform"
    newest = tags[0]
    found = _TAG.fullmatch(newest)
    if found is None or len(tags) == 1:
        return ", ".join(tags)
    if found["musl"]:
        return f"{newest} and older (musl {found['musl'].replace('_', '.')})"
    glibc = found["glibc"].replace("_", ".") if found["glibc"] else f"2.{_LEGACY[found['legacy']][1]}"
    return f"{newest} and older manylinux tags (glibc {glibc})"


def arch_of(config: dict[str, Any]) -> str:
    """The wheel architecture of an image config (amd64 → x86_64)."""
    arch = str(config.get("architecture") or "amd64")
    if arch not in _ARCHES:
        raise PackagingError(f"the base image's architecture '{printable(arch)}' has no manylinux wheels vtrain can "
                             "resolve for (amd64 or arm64)")
    return _ARCHES[arch]


class _Stream:
    """A blob response as a file for tarfile's stream mode: the stored (compressed) bytes."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def read(self, n: int = -1) -> bytes:
        if hasattr(self.raw, "stream"):  # urllib3: the bytes as stored, not decoded
            return bytes(self.raw.read(n, decode_content=False))
        return bytes(self.raw.read(n))


def _glibc_from(member: tarfile.TarInfo, tar: tarfile.TarFile) -> Libc | None:
    name = member.name.rsplit("/", 1)[-1]
    named = _GLIBC_NAME.fullmatch(name)
    if named and (member.isfile() or member.issym()):
        return Libc("glibc", int(named[1]), int(named[2]))
    linked = _GLIBC_NAME.fullmatch(member.linkname.rsplit("/", 1)[-1]) if member.issym() else None
    if name == "libc.so.6" and linked:  # glibc before 2.34: libc.so.6 -> libc-2.31.so
        return Libc("glibc", int(linked[1]), int(linked[2]))
    if name == "libc.so.6" and member.isfile() and member.size <= _MAX_LIBC:
        handle = tar.extractfile(member)
        if handle is not None:
            found = _GLIBC_BANNER.search(handle.read(_MAX_LIBC))
            if found:
                return Libc("glibc", int(found[1]), int(found[2]))
    return None


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The members of a stream-mode tar one at a time, none kept: tarfile keeps every member it read, so a
    layer of millions of tiny entries would otherwise fill memory (the layer's bytes are bounded, not its count)."""
    while (member := tar.next()) is not None:
        yield member
        tar.members.clear()  # type: ignore[attr-defined]  # typeshed leaves it out; tarfile has kept it for decades


def _scan(layers: Iterator[tuple[str, Callable[[], Any]]], setting: str = ImageSettings.platform) -> Libc | None:
    """The C library of the first layer (bottom-up) that has one. Each layer read is read to its end before its
    answer counts (a registry's stream checks its digest there: :class:`~vtrain.trainer.image.answers.BlobReader`),
    so no answer comes from a layer that is not what its digest says."""
    alpine: tuple[int, int] | None = None
    for media_type, opener in layers:
        if "zstd" in media_type:
            continue  # not readable here; a lower or higher layer may still say
        stream = opener()
        musl = False
        found: Libc | None = None
        try:
            with tarfile.open(fileobj=_Stream(stream), mode="r|*") as tar:  # type: ignore[call-overload]
                for member in _members(tar):
                    name = member.name.lstrip("./")
                    if name in _OS_RELEASE and member.isfile() and member.size < 65536:
                        handle = tar.extractfile(member)
                        text = handle.read().decode("utf-8", "replace") if handle else ""
                        if re.search(r"^ID=\"?alpine", text, re.MULTILINE):
                            version = re.search(r"^VERSION_ID=\"?([0-9]+)\.([0-9]+)", text, re.MULTILINE)
                            alpine = (int(version[1]), int(version[2])) if version else (0, 0)
                    elif re.fullmatch(r"(?:usr/)?lib(?:64)?/ld-musl-[a-z0-9_]+\.so\.1", name):
                        musl = True
                    elif "/" in name and (found := _glibc_from(member, tar)) is not None:
                        break
            drain = getattr(stream, "drain", None)
            if drain is not None:
                drain()  # the rest of the layer: its digest is checked at its end, before the answer is used
        except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError) as err:
            raise PackagingError(f"cannot read a layer of the base image to find its C library: {err}; set "
                                 f"{setting} (e.g. manylinux_2_35_x86_64)") from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if found is not None:
            return found
        if musl:
            return Libc("musl", 1, 2 if alpine is not None and alpine >= (3, 13) else 1)
    return None


def read_libc(layers: Sequence[tuple[str, str, Callable[[], Any]]], image: str, config_digest: str, *,
              cache: Path | None = None, setting: str = ImageSettings.platform) -> Libc:
    """The base's C library from its layers, (media type, digest, opener) bottom-up; cached by the
    base's config digest. None found is one line that says how to state it (`setting`)."""
    entry = cache_folder("image-bases", cache) / f"{config_digest.replace(':', '-')}.json"
    try:
        known = json.loads(entry.read_text())
        return Libc(str(known["family"]), int(known["major"]), int(known["minor"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = _scan(((media, opener) for media, _, opener in layers), setting)
    if found is None:
        raise PackagingError(f"cannot tell which C library base image {printable(image)} has (no libc.so.6 or "
                             f"ld-musl in its layers), so not which wheels it runs; set {setting}, e.g. "
                             "manylinux_2_35_x86_64 for glibc 2.35")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"family": found.family, "major": found.major, "minor": found.minor}))
        os.replace(tmp, entry)
    except OSError:
        pass
    return found
