"""What needs no worker: errors by code, paths, times, bodies."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import agentsandbox as a
from agentsandbox._core import create_body, exec_body, file_path
from agentsandbox._errors import error_from_answer
from agentsandbox._models import ExecEvent, from_wire, parse_time


@pytest.mark.parametrize("status,body,cls,code", [
    (404, b'{"error":{"code":"sandbox_not_found","message":"m"}}', a.SandboxNotFoundError, "sandbox_not_found"),
    (404, b'{"error":{"code":"file_not_found","message":"m"}}', a.PathNotFoundError, "file_not_found"),
    (429, b'{"error":{"code":"at_capacity","message":"m"}}', a.AtCapacityError, "at_capacity"),
    (400, b'{"error":{"code":"invalid_egress_policy","message":"m"}}', a.InvalidEgressPolicyError, "invalid_egress_policy"),
    (500, b'{"error":{"code":"wipe_unverified","message":"m","leftovers":["x"]}}', a.WipeUnverifiedError, "wipe_unverified"),
    (418, b'{"error":{"code":"teapot_new_code","message":"m"}}', a.APIError, "teapot_new_code"),
    (502, b"bad gateway", a.APIError, ""),
    (404, b"not json", a.NotFoundError, ""),
])
def test_error_from_answer(status: int, body: bytes, cls: type, code: str) -> None:
    e = error_from_answer(status, body, "5")
    assert type(e) is cls and e.code == code and e.status == status and e.retry_after == 5.0
    if code == "wipe_unverified":
        assert e.leftovers == ["x"]


def test_error_hierarchy() -> None:
    assert issubclass(a.SandboxNotFoundError, a.NotFoundError)
    assert issubclass(a.InvalidArchiveError, a.InvalidRequestError)
    assert issubclass(a.APIError, a.AgentSandboxError) and issubclass(a.TransportError, a.AgentSandboxError)


@pytest.mark.parametrize("path,directory,want", [
    ("a/b.txt", False, "a/b.txt"),
    ("/a b/c", False, "a%20b/c"),
    ("../x", False, "%2E%2E/x"),
    ("", True, ""),
    ("dir/", True, "dir/"),
    ("a/./b", False, "a/%2E/b"),
])
def test_file_path(path: str, directory: bool, want: str) -> None:
    assert file_path(path, directory) == want


def test_parse_time() -> None:
    assert parse_time("2026-12-03T19:14:47.797349153Z") == datetime(2026, 12, 3, 19, 14, 47, 797349, tzinfo=timezone.utc)
    assert parse_time("2026-12-03T19:14:47+01:00").utcoffset().total_seconds() == 3600  # type: ignore[union-attr]


def test_bodies() -> None:
    assert create_body(time_box_minutes=None, limits=None, egress=None, env=None, browser=False) == {}
    assert create_body(time_box_minutes=10, limits={"memory_mb": 512}, egress="none", env={"A": "1"}, browser="start") == {
        "time_box_minutes": 10, "env": {"A": "1"}, "browser": {"start": True}, "limits": {"memory_mb": 512},
        "egress": {"mode": "none"}}
    assert exec_body("echo hi", timeout=1.5) == {"argv": ["sh", "-c", "echo hi"], "timeout_seconds": 2}
    assert exec_body(["cat"], stdin=b"\xff") == {"argv": ["cat"], "stdin_base64": "/w=="}
    with pytest.raises(ValueError):
        create_body(time_box_minutes=None, limits=None, egress=None, env=None, browser="yes")


def test_exec_event() -> None:
    ev = from_wire(ExecEvent, {"stream": "stdout", "data_base64": "/w=="})
    assert ev.bytes == b"\xff" and not ev.is_last
    last = from_wire(ExecEvent, {"exit_code": 0, "newer_field": 1})
    assert last.is_last and last.exit_code == 0
