"""Small HTTP servers on 127.0.0.1 that are *not* a well-behaved registry: a web server answering 200 to
everything, one streaming a huge body, one answering errors in odd shapes, one handing out a foreign
upload Location. Each records what it was sent (method, path, headers)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: (status, headers, body): a body is bytes, or an iterable of chunks sent with chunked encoding.
Answer = tuple[int, dict[str, str], "bytes | Iterable[bytes]"]
API = {"Docker-Distribution-API-Version": "registry/2.0"}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Fake:
    host: str  # 127.0.0.1:PORT
    seen: list[Seen] = field(default_factory=list)


@contextmanager
def fake_server(answer: Callable[[str, str, dict[str, str], Fake], Answer]) -> Iterator[Fake]:
    """`answer(method, path, headers, fake)` decides each response."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            headers = {k: v for k, v in self.headers.items()}
            fake.seen.append(Seen(self.command, self.path, headers))
            status, extra, body = answer(self.command, self.path, headers, fake)
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            try:
                if isinstance(body, bytes):
                    if "Content-Length" not in extra:
                        self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(body)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in body:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _any  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake = Fake(host=f"127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def ok_to_everything(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
    """A web server, not a registry: 200 and a page for every request."""
    return 200, {"Content-Type": "text/html"}, b"<html><title>Welcome</title></html>"
