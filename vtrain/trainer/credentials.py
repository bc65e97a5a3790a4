"""Which of a trainer's selected files look like secrets: refused by `package`, `submit` and `local`.

Judged by class, so that a new file of a known kind is caught without a rule of its own: names
(dotenv files, keys and key stores, ``.npmrc``, ``.pypirc``, ``.netrc``, AWS's ``credentials``,
gcloud's databases…), the same names with a backup, swap or autosave suffix (``.env~``,
``x.pem.bak``, ``.credentials.json.swp``, ``#.env#``), any file under a directory that holds logins
(``.ssh/``, ``.gnupg/``, ``.aws/``, ``.config/gcloud/``, ``.docker/``…), a selected symlink by the
name of what it points to, and content signatures (a private key, a service-account key, gcloud
user credentials) in files up to :data:`CONTENT_SCAN_LIMIT`, streamed: credential files are small,
and a 3 GB dataset is not read for them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from vtrain.trainer.select import Scan, open_regular, readable_errors

#: Content signatures are looked for in files up to this size (credential files are small; a 3 GB dataset
#: is not read for them, nor is anything larger). Names are judged whatever the size.
CONTENT_SCAN_LIMIT = 16 << 20
_CHUNK = 1 << 20

# (file-name glob, why). Matched case-insensitively against the base name, and against it with a
# backup or swap suffix taken off (`.env~`, `x.pem.bak`, `.credentials.swp`).
_CREDENTIAL_NAMES: tuple[tuple[str, str], ...] = (
    (".env", "dotenv file"),
    (".env.*", "dotenv file"),
    (".envrc", "direnv file"),
    ("*.pem", "PEM key or certificate"),
    ("*.key", "private key"),
    ("*.ppk", "PuTTY key"),
    ("id_rsa*", "SSH key"),
    ("id_dsa*", "SSH key"),
    ("id_ecdsa*", "SSH key"),
    ("id_ed25519*", "SSH key"),
    ("*.p12", "PKCS#12 key store"),
    ("*.pfx", "PKCS#12 key store"),
    ("*.jks", "Java key store"),
    ("*.keystore", "key store"),
    ("*.kdbx", "password database"),
    ("credentials", "cloud credentials file (AWS's name)"),
    ("credentials.json", "credentials file"),
    ("credentials.db", "gcloud credentials"),
    ("access_tokens.db", "gcloud credentials"),
    ("application_default_credentials.json", "Google user credentials"),
    ("client_secret*.json", "OAuth client secret"),
    (".netrc", "login credentials"),
    ("_netrc", "login credentials"),
    (".git-credentials", "login credentials"),
    (".npmrc", "npm registry token"),
    (".pypirc", "PyPI upload credentials"),
    (".dockercfg", "Docker registry login"),
    (".htpasswd", "password file"),
    (".pgpass", "PostgreSQL passwords"),
)
# Directories whose every file is a secret (a path holding these parts in a row, at any depth).
_CREDENTIAL_DIRS: tuple[tuple[tuple[str, ...], str], ...] = (
    ((".ssh",), "SSH directory"),
    ((".gnupg",), "GnuPG keyring"),
    ((".aws",), "AWS credentials directory"),
    ((".config", "gcloud"), "gcloud credentials directory"),
    ((".azure",), "Azure credentials directory"),
    ((".kube",), "Kubernetes credentials directory"),
    ((".docker",), "Docker login directory"),
    ((".password-store",), "password store"),
)
_BACKUP_SUFFIXES = (".bak", ".backup", ".orig", ".old", ".save", ".swp", ".swo", ".swn", ".tmp", "~")
_HARMLESS_ENV = {".env.example", ".env.sample", ".env.template", ".env.dist"}
# Content signatures; split so that this file does not match itself.
_CREDENTIAL_CONTENT: tuple[tuple[re.Pattern[bytes], re.Pattern[bytes] | None, str], ...] = (
    (
        re.compile(rb'"type"\s*:\s*"service' rb'_account"'),
        re.compile(rb'"private' rb'_key"'),
        "service-account key",
    ),
    (
        re.compile(rb'"type"\s*:\s*"authorized' rb'_user"'),
        re.compile(rb'"refresh' rb'_token"'),
        "Google user credentials",
    ),
    (re.compile(rb"-----BEGIN [A-Z ]*PRIVATE" rb" KEY-----"), None, "private key"),
)
_OVERLAP = 256  # bytes carried from one chunk to the next, so a signature split by a chunk border is seen


def _unbackup(base: str) -> list[str]:
    """`base` and the names it is a backup, swap or autosave copy of: `.env~` → `.env`."""
    names = [base]
    name = base
    changed = True
    while changed:
        changed = False
        if len(name) > 2 and name.startswith("#") and name.endswith("#"):  # emacs autosave
            name, changed = name[1:-1], True
        for suffix in _BACKUP_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
                if suffix in (".swp", ".swo", ".swn") and name.startswith(".") and len(name) > 1:
                    names.append(name)  # vim's swap of `x.pem` is `.x.pem.swp`
                    name = name[1:]
        if changed:
            names.append(name)
    return names


def credential_name_reason(rel: str) -> str | None:
    """Why a path looks like a secret by its name or its directory, or None."""
    lowered = rel.lower()
    parts = lowered.split("/")
    dirs = parts[:-1]
    for seq, why in _CREDENTIAL_DIRS:
        n = len(seq)
        if any(tuple(dirs[i : i + n]) == seq for i in range(len(dirs) - n + 1)):
            return why
    names = _unbackup(parts[-1])
    if any(base in _HARMLESS_ENV for base in names):
        return None
    for base in names:
        for pattern, why in _CREDENTIAL_NAMES:
            if fnmatch.fnmatchcase(base, pattern):
                return why if base == parts[-1] else f"a backup of a {why}"
    return None


class _Signatures:
    """Content signatures of credentials, looked for in a file's bytes as they stream past."""

    def __init__(self) -> None:
        self.found = [[False, second is None] for _, second, _ in _CREDENTIAL_CONTENT]
        self.tail = b""

    def feed(self, chunk: bytes) -> None:
        window = self.tail + chunk
        for state, (first, second, _) in zip(self.found, _CREDENTIAL_CONTENT, strict=True):
            if not state[0] and first.search(window):
                state[0] = True
            if not state[1] and second is not None and second.search(window):
                state[1] = True
        self.tail = window[-_OVERLAP:]

    def reason(self) -> str | None:
        for (first, second), (_, _, why) in zip(self.found, _CREDENTIAL_CONTENT, strict=True):
            if first and second:
                return why
        return None


def credential_reason(rel: str, data: bytes) -> str | None:
    """Why a file looks like a secret, or None. Names first, then content signatures."""
    why = credential_name_reason(rel)
    if why:
        return why
    signatures = _Signatures()
    signatures.feed(data[:CONTENT_SCAN_LIMIT])
    return signatures.reason()


def content_reasons(scan: Scan, files: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """Files of `scan` (all by default) up to CONTENT_SCAN_LIMIT whose bytes carry a credential signature."""
    found: list[tuple[str, str]] = []
    with readable_errors(scan.root):
        for rel in scan.files if files is None else files:
            if (scan.root / rel).stat().st_size > CONTENT_SCAN_LIMIT:
                continue
            signatures = _Signatures()
            with open_regular(scan.root / rel) as fh:
                left = CONTENT_SCAN_LIMIT
                while left > 0 and (chunk := fh.read(min(_CHUNK, left))):
                    signatures.feed(chunk)
                    left -= len(chunk)
                    signatures.feed(chunk)
            why = signatures.reason()
            if why:
                found.append((rel, why))
    return found


def check_contents(scan: Scan) -> Scan:
    """`scan` with every selected file that looks like a secret in its credentials: by its name (a symlink
    by the name of what it points to, too), else by its content."""
    named: dict[str, str] = {}
    for rel in scan.files:
        why = credential_name_reason(rel) or (credential_name_reason(scan.links[rel]) if rel in scan.links else None)
        if why:
            named[rel] = why
    found = [*named.items(), *content_reasons(scan, [f for f in scan.files if f not in named])]
    scan.credentials = sorted({*scan.credentials, *found})
    return scan



__all__ = ["CONTENT_SCAN_LIMIT", "check_contents", "content_reasons", "credential_name_reason", "credential_reason"]
