"""A token service for docker-registry's `auth: token` (the Bearer flow Docker Hub, Artifact Registry
and GHCR use): it checks basic-auth credentials and hands out RS256 JWTs whose x5c certificate is the
registry's rootcertbundle, granting what was asked to the right user and nothing to anyone else."""

from __future__ import annotations

import base64
import datetime
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ISSUER, SERVICE = "vtrain-test-issuer", "vtrain-test-registry"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenService:
    realm: str
    cert_pem: Path
    user: str
    password: str
    asked: list[tuple[str | None, list[str]]] = field(default_factory=list)  # (user or None, scopes)


def _keys(directory: Path) -> tuple[object, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vtrain test token issuer")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (directory / "token-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert.public_bytes(serialization.Encoding.DER)


def _jwt(key: object, cert_der: bytes, subject: str, access: list[dict[str, object]]) -> str:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    now = int(time.time())
    header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(cert_der).decode()]}
    claims = {"iss": ISSUER, "sub": subject, "aud": SERVICE, "exp": now + 300, "nbf": now - 10, "iat": now,
              "jti": uuid.uuid4().hex, "access": access}
    signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())  # type: ignore[attr-defined]
    return f"{signing}.{_b64(signature)}"


@contextmanager
def token_service(directory: Path, user: str, password: str) -> Iterator[TokenService]:
    key, cert_der = _keys(directory)
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            query = parse_qs(urlparse(self.path).query)
            scopes = query.get("scope", [])
            given = self.headers.get("Authorization")
            who = user if given == expected else None
            service.asked.append((who, scopes))
            if given is not None and who is None:
                self._answer(401, {"details": "wrong user name or password"})
                return
            access = []
            for scope in scopes if who else []:  # the right user gets what it asks; anonymous nothing
                kind, _, rest = scope.partition(":")
                name, _, actions = rest.rpartition(":")
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
            token = _jwt(key, cert_der, who or "", access)
            self._answer(200, {"token": token, "access_token": token, "expires_in": 300})

        def _answer(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    service = TokenService(realm=f"http://127.0.0.1:{server.server_address[1]}/token",
                           cert_pem=directory / "token-cert.pem", user=user, password=password)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
