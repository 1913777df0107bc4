"""The sync client's transport (http.client under httpx): kept-alive
connections, reused only after an answer was read to its end, a stale one
replaced, a streamed body sent chunked."""

from __future__ import annotations

import http.server
import threading
from typing import Iterator, List

import httpx
import pytest

from agentsandbox._transport import StdlibTransport


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    conns: List[object] = []
    close_after = False

    def setup(self) -> None:
        super().setup()
        type(self).conns.append(self.connection)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(b"hello " + self.path.encode())

    def do_PUT(self) -> None:  # noqa: N802
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(n)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(b"got " + body)

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if type(self).close_after:  # as a server whose idle timeout passed, without a word
            self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type]]:
    handler = type("H", (_Handler,), {"conns": [], "close_after": False})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()


def test_kept_alive(server: tuple[str, type]) -> None:
    url, handler = server
    with httpx.Client(transport=StdlibTransport()) as c:
        for i in range(3):
            assert c.get(f"{url}/{i}").text == f"hello /{i}"
    assert len(handler.conns) == 1


def test_unread_answer_is_not_reused(server: tuple[str, type]) -> None:
    url, handler = server
    with httpx.Client(transport=StdlibTransport()) as c:
        with c.stream("GET", f"{url}/a") as r:
            assert r.status_code == 200  # closed unread
        assert c.get(f"{url}/b").text == "hello /b"
    assert len(handler.conns) == 2


def test_stale_connection_replaced(server: tuple[str, type]) -> None:
    url, handler = server
    handler.close_after = True
    with httpx.Client(transport=StdlibTransport()) as c:
        assert c.get(f"{url}/a").text == "hello /a"
        assert c.get(f"{url}/b").text == "hello /b"
    assert len(handler.conns) == 2


def test_bodies(server: tuple[str, type]) -> None:
    url, _ = server
    with httpx.Client(transport=StdlibTransport()) as c:
        assert c.put(url, content=b"bytes").text == "got bytes"
        assert c.put(url, content=iter([b"str", b"", b"eamed"])).text == "got streamed"


def test_connect_error() -> None:
    with httpx.Client(transport=StdlibTransport()) as c:
        with pytest.raises(httpx.TransportError):
            c.get("http://127.0.0.1:1/")
