"""Hiding secrets in rendered requests and jobs (`render`, `submit --dry-run`, `status -o json`).

A rendered request is meant to be pasted into CI logs and tickets, so a secret must not survive
it under any name. Three rules, each replacing only the secret (``<redacted>``), never its key:

- by name: an env variable or an argument (``--token=X``, ``--password X``, ``db.password=X``)
  whose name says secret (token, secret, password, pw, key, credentials, auth, ...), and the same
  inside any text: ``password=X`` in a JDBC/ODBC URL or a libpq DSN, ``"token": "X"`` in a JSON
  argument, ``--password X`` within one argument, ``Bearer X``/``Basic X`` credentials;
- by shape, anywhere in the body: known key formats (Google API keys, OAuth tokens, AWS access
  keys, GitHub, GitLab, Slack, Hugging Face, Stripe/OpenAI-style keys, JWTs, PEM private keys)
  and the password of a ``scheme://user:password@host`` URL or a bare ``user:password@host``;
- by entropy, in env values, args and commands: a run of 24+ base64/base62 characters that mixes
  upper case, lower case and digits and looks random (high per-character entropy, frequent
  case/digit switches, no word-like pieces). Pure hex is left alone: commit SHAs and digests are
  hex, and are not secrets.

Under a secret name every value is hidden but an empty one and a boolean: a PIN is a number and a
password may look like a path. A name that says it holds a reference (``TOKEN_FILE``, ``KEY_PATH``,
``--password-file``) shows its value. :func:`redact` is the one redaction every output path uses
(`render`, `submit --dry-run`, `status`/`list -o json`, `diff`, `doctor`).
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"

# ---- by name ------------------------------------------------------------------------------
#: Words that make a name secret wherever they end a word (APITOKEN, db_password, GCP_CREDENTIALS).
_STRONG = ("token", "secret", "secrets", "password", "passwords", "passwd", "passphrase", "credential",
           "credentials", "apikey", "privatekey")  # fmt: skip
#: Words that make a name secret only as a whole word (--pass, X_AUTH).
_WEAK = {"pass", "pw", "pwd", "auth", "authorization", "bearer", "cookie", "creds", "dsn"}
#: "key" is a secret alone (KEY, --key) or after one of these (SSH_KEY, api-key), not in --sort-key.
_KEY_KINDS = {"api", "access", "secret", "private", "ssh", "signing", "encryption", "master", "client", "service",
              "account", "license", "auth", "session", "hmac", "gpg", "pgp", "deploy", "app", "admin", "root",
              "storage", "sa", "aws", "gcp", "openai", "wandb", "hf", "pat"}  # fmt: skip
#: A last word that names a property of the secret, not the secret (TOKEN_FILE, KEY_PATH, max_tokens is numeric).
#: Not "header": an X_AUTH_HEADER holds the credential itself.
_NOT_SECRET_SUFFIX = {"file", "path", "dir", "directory", "url", "uri", "name", "type", "id", "ttl",
                      "length", "len", "size", "count", "format", "expiry", "env", "version"}  # fmt: skip
#: A first word that makes the name an instruction about secrets, not a secret: a switch (--show-secrets,
#: --allow-credentials, NO_AUTH) whose "value" after it is the next word of a sentence or another flag.
#: Only verbs of a switch: SCAN_API_KEY or PRINT_TOKEN may name a service's key, and stays secret.
_ACTIONS = {"show", "allow", "hide", "no", "skip", "redact", "mask", "ignore"}
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(name)]


def is_secret_name(name: str) -> bool:
    """Does this env variable or argument name say its value is a secret?"""
    words = _words(name.rsplit(".", 1)[-1])
    if not words or words[-1] in _NOT_SECRET_SUFFIX or (len(words) > 1 and words[0] in _ACTIONS):
        return False
    if any(w in _WEAK or w.endswith(_STRONG) for w in words):
        return True
    return any(w == "key" and (i == 0 and len(words) == 1 or words[i - 1] in _KEY_KINDS) for i, w in enumerate(words))


def _plain(value: str) -> bool:
    """A value no name can make secret: empty, or a boolean word."""
    text = value.strip()
    return not text or text.lower() in ("true", "false", "yes", "no", "none", "null")


# ---- by shape -----------------------------------------------------------------------------
_KNOWN = re.compile(
    "|".join(
        (
            r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)",
            r"\bAIza[0-9A-Za-z_-]{35}",  # Google API key
            r"\bya29\.[0-9A-Za-z_-]{20,}",  # Google OAuth access token
            r"\b1//0[0-9A-Za-z_-]{30,}",  # Google OAuth refresh token
            r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",  # AWS access key id
            r"\bgh[pousr]_[0-9A-Za-z]{36,}",  # GitHub tokens
            r"\bgithub_pat_[0-9A-Za-z_]{22,}",
            r"\bglpat-[0-9A-Za-z_-]{20,}",  # GitLab
            r"\bxox[abposr]-[0-9A-Za-z-]{10,}",  # Slack tokens
            r"https://hooks\.slack\.com/services/[0-9A-Za-z/_-]+",
            r"\bhf_[0-9A-Za-z]{30,}",  # Hugging Face
            r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}",  # Stripe
            r"\bsk-(?:proj-|ant-)?[0-9A-Za-z_-]{20,}",  # OpenAI / Anthropic style
            r"\beyJ[0-9A-Za-z_-]{8,}\.[0-9A-Za-z_-]{8,}\.[0-9A-Za-z_-]*",  # JWT
        )
    )
)
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)([^\s@/]+)(@)", re.IGNORECASE)
#: user:password@host with no scheme. The host must look like one: a dotted name ending in a word, an
#: IPv4 address or localhost; a bare name with a :port only after a password that is not a plain word
#: (so `worker-1:kill@step:200`, a fault spec, and an image's name:tag@sha256:digest are left alone).
_HOST = r"(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|[\w-]+(?:\.[\w-]+)*\.[A-Za-z][\w-]*)(?![\w.-])"
_BARE_PASSWORD = re.compile(r"(?<![\w/:.@%+-])([\w.+-]+:)((?=[^\s@/:]*[^A-Za-z\s@/:])[^\s@/:]+|[A-Za-z]+(?=@"
                            + _HOST + r"))(@)(?!sha\d+:)(?=" + _HOST + r"|[A-Za-z][\w-]*:\d)")
#: HTTP credentials: the scheme word stays, the credential goes (Basic only when it decodes to
#: user:password, so "Basic training" is prose).
_HTTP_CREDENTIAL = re.compile(r"\b(Bearer|Basic)(\s+)([A-Za-z0-9._~+/=-]{4,})")
_VALUE = r"(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s;&,\"'}\])]+)"
#: name=value inside text (JDBC/ODBC/libpq, query strings) and "name": value (JSON); the name decides.
_NAMED = re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]*)(\s*=\s*)" + _VALUE)
_JSON_NAMED = re.compile(r"([\"'])([A-Za-z_][\w.-]*)\1(\s*:\s*)" + _VALUE)
#: --flag value within one argument ("--password hunter2").
_FLAG_VALUE = re.compile(r"(?<!\S)(-{1,2}[A-Za-z][\w.-]*)(\s+)([^\s-]\S*)")
_RUN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_WORDLIKE = re.compile(r"^(?:[A-Z]?[a-z]+(?:[A-Z][a-z]+)*[0-9]*[a-z]?|[A-Z]+[a-z]*[0-9]*|v?[0-9][0-9.]*[A-Za-z]{0,2})$")


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _kind(ch: str) -> str:
    return "u" if ch.isupper() else "l" if ch.islower() else "d" if ch.isdigit() else "o"


def looks_random(token: str) -> bool:
    """A random-looking key: mixed case and digits, high entropy, no word-like pieces."""
    text = token.strip("=/-_")
    n = len(text)
    if n < 24 or not (re.search("[a-z]", text) and re.search("[A-Z]", text) and re.search("[0-9]", text)):
        return False
    pieces = [p for p in re.split(r"[-_/]", text) if p]
    if len(pieces) > 1 and 2 * sum(bool(_WORDLIKE.match(p)) for p in pieces) >= len(pieces):
        return False  # model-name-v2/Some_Path_2024: words joined, not a key
    switches = sum(_kind(a) != _kind(b) for a, b in zip(text, text[1:], strict=False)) / (n - 1)
    longest = max(len(m) for m in re.findall(r"[a-z]+|[A-Z]+", text))
    return _entropy(text) >= min(math.log2(n) - 0.9, 4.4) and switches >= 0.35 and longest <= 6 + n // 32


def _hide_quoted(value: str) -> str:
    """REDACTED in place of a value, keeping its quotes (so JSON stays JSON)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + REDACTED + value[0]
    return REDACTED


def _named(m: re.Match[str], name: str, value: str) -> str:
    inner = value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value
    if is_secret_name(name) and not _plain(inner) and inner != REDACTED:
        return m.group(0)[: m.start(m.lastindex or 0) - m.start(0)] + _hide_quoted(value)
    return m.group(0)


def _http_credential(m: re.Match[str]) -> str:
    scheme, space, credential = m.groups()
    if scheme == "Basic":
        import base64
        import binascii

        try:
            decoded = base64.b64decode(credential, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return m.group(0)
        if ":" not in decoded:
            return m.group(0)
    return scheme + space + REDACTED


def redact_text(text: str, *, entropy: bool = True) -> str:
    """`text` with every secret-shaped part replaced; the rest of it kept."""
    out = _KNOWN.sub(REDACTED, text)
    out = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), out)
    out = _BARE_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), out)
    out = _HTTP_CREDENTIAL.sub(_http_credential, out)
    out = _NAMED.sub(lambda m: _named(m, m.group(1), m.group(3)), out)
    out = _JSON_NAMED.sub(lambda m: _named(m, m.group(2), m.group(4)), out)
    out = _FLAG_VALUE.sub(lambda m: _named(m, m.group(1).lstrip("-"), m.group(3)), out)
    if entropy:
        out = _RUN.sub(lambda m: REDACTED if looks_random(m.group(0)) else m.group(0), out)
    return out


# ---- the body -----------------------------------------------------------------------------
def _redact_env(env: list[Any]) -> None:
    for var in env:
        value = var.get("value") if isinstance(var, dict) else None
        if not isinstance(value, str) or not value:
            continue
        shaped = redact_text(value)
        secret = shaped == value and is_secret_name(str(var.get("name", ""))) and not _plain(value)
        var["value"] = REDACTED if secret else shaped


_FLAG = re.compile(r"^-{1,2}[A-Za-z][\w.-]*$")
_ASSIGN = re.compile(r"^(-{0,2}[A-Za-z_][\w.-]*)=(.*)$", re.DOTALL)


def redact_args(args: list[Any]) -> list[Any]:
    """An argv with secrets hidden: `--token=X`, `--password X`, `db.password=X`, and secret-shaped values."""
    out = list(args)
    for i, arg in enumerate(out):
        if not isinstance(arg, str):
            continue
        assign = _ASSIGN.match(arg)
        if assign and is_secret_name(assign.group(1).lstrip("-")) and not _plain(assign.group(2)):
            out[i] = f"{assign.group(1)}={REDACTED}"
            continue
        previous = out[i - 1] if i else None
        if (
            isinstance(previous, str)
            and _FLAG.match(previous)
            and is_secret_name(previous.lstrip("-"))
            and not _FLAG.match(arg)
            and not _plain(arg)
        ):
            out[i] = REDACTED
            continue
        out[i] = redact_text(arg)
    return out


def redact_strings(node: Any) -> Any:
    """Known key formats, URL passwords and named secrets in every string of `node` (display name,
    labels, URIs, a report): no entropy rule, which would hide content hashes and ids."""
    if isinstance(node, str):
        return redact_text(node, entropy=False)
    if isinstance(node, list):
        return [redact_strings(v) for v in node]
    if isinstance(node, dict):
        return {k: redact_strings(v) for k, v in node.items()}
    return node


def redact(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a CustomJob or HyperparameterTuningJob body (REST JSON) with secrets hidden; the input
    is not modified."""
    out = copy.deepcopy(dict(body))
    spec = out.get("jobSpec") or out.get("trialJobSpec")  # a CustomJob or a HyperparameterTuningJob
    pools = spec.get("workerPoolSpecs", []) if isinstance(spec, dict) else []
    for pool in pools if isinstance(pools, list) else []:
        for key in ("pythonPackageSpec", "containerSpec"):
            part = pool.get(key) if isinstance(pool, dict) else None
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("env"), list):
                _redact_env(part["env"])
            for field in ("args", "command"):
                if isinstance(part.get(field), list):
                    part[field] = redact_args(part[field])
    return dict(redact_strings(out))
