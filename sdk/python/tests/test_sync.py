"""The sync client against a real worker."""

from __future__ import annotations

import io
import tarfile

import pytest

import agentsandbox as a
from agentsandbox import Sandbox, Worker


def test_create_context_manager_deletes(worker: Worker) -> None:
    with worker.create(time_box_minutes=6, limits=a.Limits(pids=64), env={"GREETING": "hi"}, egress="none") as sb:
        assert sb.info is not None
        assert sb.info.limits.time_box_minutes == 6 and sb.info.limits.pids == 64
        assert sb.info.egress.mode == "none"
        assert sb.id in [s.id for s in worker.list()]
        assert sb.run("echo $GREETING").stdout == "hi\n"
    assert sb.wipe_report is not None and sb.wipe_report.verified
    with pytest.raises(a.SandboxNotFoundError) as e:
        sb.state()
    assert e.value.status == 404 and e.value.code == "sandbox_not_found"


def test_create_with_secret(worker: Worker) -> None:
    value = "sk-sdk-test-never-inside"
    with worker.create(secrets={"API_KEY": a.Secret(value=value, hosts=["api.example.com"])}) as sb:
        assert sb.info is not None and sb.info.secrets == {"API_KEY": a.SecretInfo(hosts=["api.example.com"])}
        assert value not in repr(a.Secret(value=value, hosts=["x"]))
        env = sb.run("echo $API_KEY; echo $SSL_CERT_FILE").stdout.split()
        assert env[0].startswith("agentsandbox-secret-") and env[1] == "/etc/ssl/certs/ca-certificates.crt"
        assert value not in sb.run("cat /proc/*/environ | tr '\\0' '\\n'").stdout
        assert value not in str(sb.state())
        rotated = sb.update_secrets({"API_KEY": a.Secret(value="sk-rotated-never-inside", hosts=["api.example.com"])})
        assert rotated == {"API_KEY": env[0]}
        added = sb.update_secrets({"NEW_KEY": {"value": "sk-added-never-inside", "hosts": ["api.example.com"]}})
        assert added["NEW_KEY"].startswith("agentsandbox-secret-") and added["NEW_KEY"] != env[0]
        assert sb.run("echo $NEW_KEY").stdout.strip() == added["NEW_KEY"]
        assert sb.info is not None and sorted(sb.info.secrets or {}) == ["API_KEY", "NEW_KEY"]
        with pytest.raises(a.InvalidRequestError):
            sb.update_secrets({"K": a.Secret(value="v", hosts=["other.example.org"])})


def test_run(sandbox: Sandbox) -> None:
    seen: list[str] = []
    r = sandbox.run(["sh", "-c", "echo out; echo err >&2; exit 3"], on_stdout=seen.append)
    assert (r.exit_code, r.reason, r.stdout, r.stderr, r.ok) == (3, None, "out\n", "err\n", False)
    assert seen == ["out\n"]
    assert sandbox.run(["cat"], stdin="typed\n").stdout == "typed\n"
    assert sandbox.run(["od", "-An", "-tx1"], stdin=b"\xff\x00").stdout.split() == ["ff", "00"]
    assert sandbox.run(["sh", "-c", "printf '\\377\\376'"]).stdout_bytes == b"\xff\xfe"
    assert sandbox.run(["pwd"], cwd="sub" if False else None).stdout == "/workspace\n"


def test_run_timeout_reason(sandbox: Sandbox) -> None:
    r = sandbox.run(["sleep", "30"], timeout=1)
    assert r.reason == "timeout" and r.exit_code != 0


def test_run_errors(sandbox: Sandbox) -> None:
    with pytest.raises(a.InvalidRequestError) as e:
        sandbox.run(["true"], cwd="missing-dir")
    assert e.value.code == "invalid_request" and "missing-dir" in e.value.message


def test_background_process(sandbox: Sandbox) -> None:
    p = sandbox.start(["sh", "-c", "read line; echo got $line; echo bye >&2"])
    assert p.info().running
    p.write_stdin("hello\n", close=True)
    rec = p.wait()
    assert (rec.state, rec.exit_code) == ("exited", 0)
    stream = p.output()
    events = list(stream)
    assert "".join(ev.text for ev in events if ev.stream == "stdout") == "got hello\n"
    assert "".join(ev.text for ev in events if ev.stream == "stderr") == "bye\n"
    assert stream.process is not None and stream.process.pid == p.pid
    assert p.pid in [x.pid for x in sandbox.processes()]


def test_signal(sandbox: Sandbox) -> None:
    p = sandbox.start(["sleep", "60"])
    p.signal("TERM")
    assert p.wait().exit_code == 128 + 15
    with pytest.raises(a.ProcessExitedError) as e:
        p.signal("TERM")
    assert e.value.status == 409 and isinstance(e.value, a.ConflictError)
    with pytest.raises(a.ProcessNotFoundError):
        sandbox.process(99999).info()


def test_terminal(sandbox: Sandbox) -> None:
    with sandbox.terminal(["sh"], rows=30, cols=100) as t:
        t.write("stty size\n")
        assert b"30 100" in t.read_until("30 100", timeout=30)
        t.resize(40, 120)
        t.write("stty size; exit 7\n")
        rec = t.wait(timeout=30)
    assert rec.exit_code == 7 and rec.tty


def test_files(sandbox: Sandbox) -> None:
    sandbox.files.write("dir/a.txt", "alpha", mode=0o600)
    sandbox.files.write("dir/b.bin", io.BytesIO(b"\x00\x01" * 1000))
    assert sandbox.files.read_text("dir/a.txt") == "alpha"
    assert sandbox.files.read("dir/b.bin") == b"\x00\x01" * 1000
    entries = sandbox.files.list("dir")
    assert [(e.name, e.type, e.size, e.mode) for e in entries] == [("a.txt", "file", 5, "0600"), ("b.bin", "file", 2000, "0644")]
    assert [e.name for e in sandbox.files.list()] == ["dir"] and sandbox.files.list()[0].is_dir
    sandbox.files.mkdir("made/deep")
    assert sandbox.run("test -d made/deep").exit_code == 0
    with pytest.raises(a.IsDirectoryError):
        sandbox.files.read("dir")
    with pytest.raises(a.NotEmptyError):
        sandbox.files.remove("dir")
    with pytest.raises(a.PathNotFoundError):
        sandbox.files.read("nope.txt")
    with pytest.raises(a.InvalidRequestError):
        sandbox.files.read("../etc/passwd")
    sandbox.files.remove("dir", recursive=True)
    assert [e.name for e in sandbox.files.list()] == ["made"]


def test_archive(sandbox: Sandbox) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("src/main.py")
        data = b"print('from the archive')\n"
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    sandbox.archive.upload(buf.getvalue(), "proj")
    assert sandbox.run(["python3", "proj/src/main.py"]).stdout == "from the archive\n"
    with tarfile.open(fileobj=io.BytesIO(sandbox.archive.download("proj"))) as tf:
        assert "src/main.py" in tf.getnames()
    out = io.BytesIO()
    assert sandbox.archive.download_to(out) > 0
    bad = io.BytesIO()
    with tarfile.open(fileobj=bad, mode="w") as tf:
        info = tarfile.TarInfo("../escape")
        tf.addfile(info, io.BytesIO(b""))
    with pytest.raises(a.InvalidArchiveError):
        sandbox.archive.upload(bad.getvalue())


def test_state_usage_extend(sandbox: Sandbox) -> None:
    st = sandbox.state()
    assert st.state == "running" and st.id == sandbox.id
    assert sandbox.usage().pids >= 1
    assert sandbox.extend(12).limits.time_box_minutes == 12
    with pytest.raises(a.InvalidRequestError):
        sandbox.extend(99)


def test_worker_status_and_errors(worker_env: object, worker: Worker) -> None:
    st = worker.status()
    assert st.capacity >= 1 and st.self_test is not None and st.self_test.checks
    with Worker(worker.url, "wrong-token") as bad:
        with pytest.raises(a.UnauthorizedError) as e:
            bad.list()
    assert e.value.status == 401
    with pytest.raises(a.InvalidRequestError):
        worker.create(time_box_minutes=99)
    with pytest.raises(a.InvalidEgressPolicyError):
        worker.create(egress={"mode": "allow", "allow": ["bad name!"]})
    with pytest.raises(a.SandboxNotFoundError):
        worker.sandbox("no-such-sandbox").run("true")


def test_ports(sandbox: Sandbox) -> None:
    """A server in the sandbox through port_url(), and a preview URL of its own origin."""
    import datetime
    import time

    import httpx

    sandbox.files.write("site/hello.txt", b"hello, port\n")
    sandbox.start(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "site"])
    assert sandbox.port_url(8000, "/a?b=1").endswith(f"/v1/sandboxes/{sandbox.id}/ports/8000/a?b=1")
    deadline = time.monotonic() + 60
    while True:
        r = httpx.get(sandbox.port_url(8000, "hello.txt"), headers=sandbox.port_headers())
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        assert r.json()["error"]["code"] == "port_closed"  # while it starts
        time.sleep(0.05)
    assert (r.status_code, r.text) == (200, "hello, port\n")
    p = sandbox.preview(8000, ttl_seconds=60)
    assert p.port == 8000 and p.origin.startswith(f"http://8000-{sandbox.id}.localhost:")
    assert p.url.startswith(p.origin + "/?sandbox_preview_token=")
    left = p.expires_at - datetime.datetime.now(datetime.timezone.utc)
    assert datetime.timedelta(seconds=50) < left <= datetime.timedelta(seconds=61)
    with pytest.raises(a.InvalidRequestError):
        sandbox.preview(8000, ttl_seconds=10**6)


def test_transport_error() -> None:
    with Worker("http://127.0.0.1:1", "t") as w:
        with pytest.raises(a.TransportError):
            w.status()


def test_browser(worker_env: object, worker: Worker) -> None:
    if not getattr(worker_env, "browser"):
        with pytest.raises(a.NoBrowserError):
            worker.create(browser=True)
        return
    import asyncio
    import json

    from agentsandbox._attach import open_ws

    with worker.create(browser=True) as sb:
        v = sb.browser_version()
        assert "Chrome" in v.browser and v.web_socket_debugger_url == sb.browser_ws_url()

        async def cdp() -> dict:
            ws = await open_ws(sb.browser_ws_url(), sb.browser_headers(), max_size=None)
            try:
                await ws.send(json.dumps({"id": 1, "method": "Browser.getVersion"}))
                return json.loads(await ws.recv())
            finally:
                await ws.close()

        assert "HeadlessChrome" in asyncio.run(cdp())["result"]["userAgent"]


def test_readme_example(worker_env: object, tmp_path: object) -> None:
    """examples/quickstart.py, the README's example, runs as written."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tok = Path(str(tmp_path)) / "token"
    tok.write_text(getattr(worker_env, "token"))
    here = Path(__file__).resolve().parents[1]
    env = dict(os.environ, AGENTSANDBOX_URL=getattr(worker_env, "url"), AGENTSANDBOX_TOKEN_FILE=str(tok),
               PYTHONPATH=str(here / "src"))
    out = subprocess.run([sys.executable, str(here / "examples" / "quickstart.py")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "exit 0 stdout 42" in out.stdout and "error code file_not_found" in out.stdout and "wiped True" in out.stdout
