"""An httpx transport over the standard library's http.client, for the sync
client: httpcore costs about five times its CPU per request here and writes
a request's headers and body in two sends, where http.client sends a body
of bytes with its headers in one (see docs/benchmarks.md)."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import httpx

_Key = Tuple[str, str, int]
_CHUNK = 64 << 10
_MAX_IDLE = 8


class StdlibTransport(httpx.BaseTransport):
    """Kept-alive HTTP/1.1 connections from http.client, TCP_NODELAY set;
    a connection is reused only once its answer was read to the end."""

    def __init__(self, verify: Union[bool, str] = True) -> None:
        if verify is True:
            self._ssl: Optional[ssl.SSLContext] = ssl.create_default_context()
        elif verify is False:
            self._ssl = ssl._create_unverified_context()
        else:
            self._ssl = ssl.create_default_context(cafile=verify)
        self._idle: Dict[_Key, List[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    def _take(self, key: _Key, timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return idle.pop(), True
        scheme, host, port = key
        if scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        return conn, False

    def _put(self, key: _Key, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < _MAX_IDLE:
                idle.append(conn)
                return
        conn.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        timeouts = request.extensions.get("timeout", {})
        connect_timeout, read_timeout = timeouts.get("connect"), timeouts.get("read")
        target = url.raw_path.decode("ascii")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        stream = request.stream
        body: Any = request.content if isinstance(stream, httpx.ByteStream) else iter(stream)  # type: ignore[arg-type]
        replayable = isinstance(body, bytes)
        for attempt in (0, 1):
            conn, reused = self._take(key, connect_timeout)
            try:
                if conn.sock is None:
                    conn.connect()
                    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.sock.settimeout(read_timeout)
                conn.putrequest(request.method, target, skip_host=True, skip_accept_encoding=True)
                for k, v in headers:
                    conn.putheader(k, v)
                chunked = any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers)
                if not replayable and not chunked and not any(k.lower() == "content-length" for k, _ in headers):
                    conn.putheader("Transfer-Encoding", "chunked")
                    chunked = True
                conn.endheaders(message_body=body if replayable and body else None)
                if not replayable:
                    for chunk in body:
                        if chunked:
                            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunk else b"")
                        elif chunk:
                            conn.send(chunk)
                    if chunked:
                        conn.send(b"0\r\n\r\n")
                resp = conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                if reused and replayable and attempt == 0:
                    continue  # the kept-alive connection had been closed by the worker
                raise httpx.RemoteProtocolError(str(e) or type(e).__name__, request=request) from e
            except socket.timeout as e:
                conn.close()
                raise httpx.ReadTimeout(str(e), request=request) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                cls = httpx.ConnectError if conn.sock is None or not reused and attempt == 0 else httpx.ReadError
                raise cls(str(e) or type(e).__name__, request=request) from e
            return httpx.Response(resp.status, headers=resp.getheaders(), stream=_Body(resp, conn, key, self),
                                  extensions={"http_version": b"HTTP/1.1", "reason_phrase": resp.reason.encode("latin-1")})
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            conns = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for c in conns:
            c.close()


class _Body(httpx.SyncByteStream):
    """An answer's body; its connection goes back to the pool once read to the end."""

    def __init__(self, resp: http.client.HTTPResponse, conn: http.client.HTTPConnection, key: _Key,
                 pool: StdlibTransport) -> None:
        self._resp, self._conn, self._key, self._pool = resp, conn, key, pool
        self._ended = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            while True:
                b = self._resp.read1(_CHUNK)
                if not b:
                    self._ended = True
                    return
                yield b
        except socket.timeout as e:
            raise httpx.ReadTimeout(str(e)) from e
        except (OSError, http.client.HTTPException) as e:
            raise httpx.ReadError(str(e) or type(e).__name__) from e

    def close(self) -> None:
        if self._ended and not self._resp.will_close:
            self._resp.close()
            self._pool._put(self._key, self._conn)
        else:
            self._conn.close()
