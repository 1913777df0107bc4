#!/usr/bin/env python3
"""A small web app for sandboxes' ports, standard library only (a sandbox sees
the host's /usr/bin/python3): `make demo`, the tests of the port forwarding and
scripts/bench-ports.sh run it inside a sandbox.

  python3 app.py PORT [TEXT]

  GET  /            a page holding TEXT whose script opens a WebSocket to /ws,
                    sends "hello from the page" and shows the echo in #echo
  GET  /ws          a WebSocket that echoes every message (RFC 6455)
  GET  /small       "ok" (keep-alive)
  GET  /bytes?n=N   N zero bytes, with their length
  GET  /headers     the request's method, path and headers as JSON
  GET  /slow        adds a line to ./slow-waiting, then answers once the file
                    ./go-slow exists (at most 10 min)
  POST /upload      reads the body (Content-Length or chunked) and answers its
                    length and SHA-256; once 1 MiB arrived it writes
                    ./upload-progress, so a test sees the body stream
"""
import base64
import hashlib
import html
import json
import os
import struct
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEXT = sys.argv[2] if len(sys.argv) > 2 else "hello from the sandbox"
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>sandbox app</title></head>
<body><p id="text">%s</p><p id="echo">waiting</p>
<script>
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
ws.onopen = () => ws.send("hello from the page");
ws.onmessage = (ev) => { document.getElementById("echo").textContent = ev.data; };
ws.onerror = () => { document.getElementById("echo").textContent = "websocket error"; };
</script></body></html>
""" % html.escape(TEXT)
ZEROS = bytes(1 << 20)
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def reply(self, code, body, ctype="text/plain; charset=utf-8"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/":
            self.reply(200, PAGE.encode(), "text/html; charset=utf-8")
        elif url.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            self.websocket()
        elif url.path == "/small":
            self.reply(200, b"ok")
        elif url.path == "/bytes":
            n = int(urllib.parse.parse_qs(url.query).get("n", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            while n > 0:
                k = min(n, len(ZEROS))
                self.wfile.write(ZEROS[:k])
                n -= k
        elif url.path == "/headers":
            body = {"method": self.command, "path": self.path, "headers": dict(self.headers.items())}
            self.reply(200, json.dumps(body).encode(), "application/json")
        elif url.path == "/slow":
            with open("slow-waiting", "a") as f:
                f.write("waiting\n")
            deadline = time.monotonic() + 600
            while not os.path.exists("go-slow") and time.monotonic() < deadline:
                time.sleep(0.05)
            self.reply(200, b"slow done")
        else:
            self.reply(404, b"not found")

    def do_POST(self):
        if urllib.parse.urlsplit(self.path).path != "/upload":
            self.reply(404, b"not found")
            return
        digest, total, told = hashlib.sha256(), 0, False
        for chunk in self.body():
            digest.update(chunk)
            total += len(chunk)
            if total >= 1 << 20 and not told:
                with open("upload-progress", "w") as f:
                    f.write(str(total))
                told = True
        self.reply(200, json.dumps({"bytes": total, "sha256": digest.hexdigest()}).encode(), "application/json")

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                while size > 0:
                    d = self.rfile.read(min(size, 1 << 16))
                    if not d:
                        return
                    size -= len(d)
                    yield d
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0"))
        while n > 0:
            d = self.rfile.read(min(n, 1 << 16))
            if not d:
                return
            n -= len(d)
            yield d

    def websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "").encode()
        accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        message, kind = b"", 0
        while True:
            frame = self.read_frame()
            if frame is None:
                return
            fin, opcode, payload = frame
            if opcode == 8:  # close
                self.send_frame(8, payload[:2])
                return
            if opcode == 9:  # ping
                self.send_frame(10, payload)
            elif opcode in (0, 1, 2):  # a message, in one frame or several
                kind = opcode or kind
                message += payload
                if fin:
                    self.send_frame(kind, message)
                    message, kind = b"", 0

    def read_frame(self):
        head = self.rfile.read(2)
        if len(head) < 2:
            return None
        fin, opcode, n = head[0] & 0x80, head[0] & 0x0F, head[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", self.rfile.read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self.rfile.read(8))[0]
        mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
        data = self.rfile.read(n)
        return fin, opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))

    def send_frame(self, opcode, payload):
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, n)
        elif n < 1 << 16:
            head = struct.pack(">BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
        self.wfile.write(head + payload)
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


if __name__ == "__main__":
    port = int(sys.argv[1])
    srv = Server(("127.0.0.1", port), Handler)
    print("serving on 127.0.0.1:%d" % port, flush=True)
    srv.serve_forever()
