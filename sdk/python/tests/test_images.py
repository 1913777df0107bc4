"""Images: create with ``image`` and the store's surface (pull, list, get,
delete), sync and async.

The session's worker has no image registry (scripts/sdk-test.sh starts it
without one: the repository's registry helper is Go's, image/registrytest),
so against it the images surface is exercised on its error paths; the
requests' shapes and the typed answers are checked against a loopback
server that records what it is sent and answers as the API documents.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, NamedTuple, Tuple

import pytest

import agentsandbox as a
from agentsandbox import Worker

DIGEST = "sha256:" + "ab" * 32
REF = "registry.example/team/py:3.12"
IMAGE = {"digest": DIGEST, "refs": [REF], "size": 4096, "layers": 2, "platform": "linux/amd64",
         "pulled": "2026-12-03T19:14:47.5Z", "last_used": "2026-12-03T20:00:00Z", "in_use": 1}
SANDBOX = {"id": "sb1", "created_at": "2026-12-03T19:14:47Z", "expires_at": "2026-12-03T19:19:47Z",
           "limits": {"memory_mb": 512, "disk_mb": 1024, "pids": 256, "cpu_percent": 100, "time_box_minutes": 5},
           "egress": {"mode": "public"}, "browser": False, "image": REF, "image_digest": DIGEST}
WANT_IMAGE = a.Image(digest=DIGEST, refs=[REF], size=4096, layers=2, platform="linux/amd64",
                     pulled=datetime(2026, 12, 3, 19, 14, 47, 500000, tzinfo=timezone.utc),
                     last_used=datetime(2026, 12, 3, 20, 0, tzinfo=timezone.utc), in_use=1)


class Recorded(NamedTuple):
    method: str
    path: str
    body: Any


class _API(http.server.BaseHTTPRequestHandler):
    """Answers the image routes and a create as docs/openapi.yaml says, and records each request."""

    protocol_version = "HTTP/1.1"
    seen: List[Recorded] = []
    answers: Dict[Tuple[str, str], Tuple[int, Any]] = {
        ("POST", "/v1/images"): (200, IMAGE),
        ("GET", "/v1/images"): (200, {"items": [IMAGE]}),
        ("DELETE", "/v1/images/sha256%3A" + "ab" * 32): (200, IMAGE),
        ("POST", "/v1/sandboxes"): (201, SANDBOX),
    }

    def _serve(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        type(self).seen.append(Recorded(self.command, self.path, json.loads(raw) if raw else None))
        status, doc = type(self).answers.get((self.command, self.path),
                                             (404, {"error": {"code": "image_not_found", "message": "no such image"}}))
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _serve  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _API)
    _API.seen = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


WANT_REQUESTS = [
    Recorded("POST", "/v1/sandboxes", {"image": REF, "time_box_minutes": 6}),
    Recorded("POST", "/v1/images", {"image": REF}),
    *[Recorded("GET", "/v1/images", None)] * 4,  # list, then each get
    Recorded("DELETE", "/v1/images/sha256%3A" + "ab" * 32, None),
    Recorded("DELETE", "/v1/images/registry.example%2Fteam%2Fpy%3A3.12", None),
]


def test_images_requests_sync(api: str) -> None:
    with Worker(api, "t") as w:
        sb = w.create(image=REF, time_box_minutes=6)
        assert sb.info is not None and (sb.info.image, sb.info.image_digest) == (REF, DIGEST)
        assert w.images.pull(REF) == WANT_IMAGE
        assert w.images.list() == [WANT_IMAGE]
        assert w.images.get(DIGEST) == WANT_IMAGE and w.images.get(REF) == WANT_IMAGE
        assert w.images.get("registry.example/team/other:1") is None
        assert w.images.delete(DIGEST) == WANT_IMAGE
        with pytest.raises(a.ImageNotFoundError):
            w.images.delete(REF)
    assert _API.seen == WANT_REQUESTS


def test_images_requests_async(api: str) -> None:
    async def main() -> None:
        async with a.AsyncWorker(api, "t") as w:
            sb = await w.create(image=REF, time_box_minutes=6)
            assert sb.info is not None and (sb.info.image, sb.info.image_digest) == (REF, DIGEST)
            assert await w.images.pull(REF) == WANT_IMAGE
            assert await w.images.list() == [WANT_IMAGE]
            assert await w.images.get(DIGEST) == WANT_IMAGE and await w.images.get(REF) == WANT_IMAGE
            assert await w.images.get("registry.example/team/other:1") is None
            assert await w.images.delete(DIGEST) == WANT_IMAGE
            with pytest.raises(a.ImageNotFoundError):
                await w.images.delete(REF)

    asyncio.run(main())
    assert _API.seen == WANT_REQUESTS


def test_host_view_sandbox_has_no_image(worker: Worker) -> None:
    with worker.create() as sb:
        assert sb.info is not None and (sb.info.image, sb.info.image_digest) == (None, None)
        st = sb.state()
        assert (st.image, st.image_digest) == (None, None)


def test_images_off(worker: Worker) -> None:
    """A worker without --image-registry: no images, and every image request refused with what to fix."""
    assert worker.images.list() == []
    assert worker.images.get(REF) is None
    for call in (lambda: worker.create(image=REF), lambda: worker.images.pull(REF),
                 lambda: worker.images.delete(DIGEST)):
        with pytest.raises(a.ImageNotAllowedError) as e:
            call()
        assert (e.value.status, e.value.code) == (400, "image_not_allowed")
        assert "--image-registry" in str(e.value)
    assert all(s.image is None for s in worker.list())


def test_images_off_async(worker_env: Any) -> None:
    async def main() -> None:
        async with a.AsyncWorker(worker_env.url, worker_env.token) as w:
            assert await w.images.list() == []
            with pytest.raises(a.ImageNotAllowedError):
                await w.create(image=REF)
            with pytest.raises(a.ImageNotAllowedError):
                await w.images.pull(REF)
            with pytest.raises(a.ImageNotAllowedError):
                await w.images.delete(DIGEST)

    asyncio.run(main())
