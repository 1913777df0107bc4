"""The test session's worker: a real ``codes-sandbox serve`` on loopback,
started once for the whole session (as the Go e2e tests start it), or the
one AGENTSANDBOX_TEST_WORKER names (``make sdk-test`` shares one between
the Python and the TypeScript suites)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

from agentsandbox import Worker

REPO = Path(__file__).resolve().parents[3]
WAIT = 120.0


class WorkerEnv(NamedTuple):
    url: str
    token: str
    browser: bool


def _missing(reason: str) -> None:
    """Skip, or fail when CI is set: there a missing component is a defect."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set, so this test must run, but: {reason}", pytrace=False)
    pytest.skip(reason)


def _build(dest: str) -> str:
    bindir = os.environ.get("AGENTSANDBOX_BIN")
    if bindir:
        return bindir
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        _missing("go is needed to build codes-sandbox (or set AGENTSANDBOX_BIN)")
    subprocess.run([go, "build", "-o", dest + "/", "./cmd/codes-sandbox", "./cmd/codes-sandbox-worker",
                    "./cmd/codes-sandbox-init"], cwd=REPO, check=True)
    return dest


def _has_browser(url: str, token: str) -> bool:
    """Whether the worker makes browser sandboxes (it has Chromium)."""
    from agentsandbox import NoBrowserError

    with Worker(url, token) as w:
        try:
            w.create(browser=True).delete()
        except NoBrowserError:
            return False
        return True


@pytest.fixture(scope="session")
def worker_env() -> Iterator[WorkerEnv]:
    url = os.environ.get("AGENTSANDBOX_TEST_WORKER")
    if url:
        token = Path(os.environ["AGENTSANDBOX_TEST_TOKEN_FILE"]).read_text().strip()
        yield WorkerEnv(url, token, _has_browser(url, token))
        return
    if os.geteuid() != 0:
        _missing("the worker runs sandboxes as root (run the tests as root, or set AGENTSANDBOX_TEST_WORKER)")
    if not shutil.which("bwrap"):
        _missing("bubblewrap is not installed (apt-get install bubblewrap)")
    tmp = tempfile.mkdtemp(prefix="agentsandbox-pytest-")
    os.chmod(tmp, 0o755)  # the sandbox uids traverse the state directory below it
    try:
        bindir = _build(os.path.join(tmp, "bin"))
        token_file = os.path.join(tmp, "api.token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("pytest-api-token\n")
        addr_file = os.path.join(tmp, "addr")
        browser = bool(shutil.which("chromium"))  # --browser auto: the self-test proves it
        log = open(os.path.join(tmp, "worker.log"), "wb")
        proc = subprocess.Popen(
            [os.path.join(bindir, "codes-sandbox"), "serve", "--listen", "127.0.0.1:0", "--addr-file", addr_file,
             "--api-token-file", token_file, "--capacity", "4", "--state-dir", os.path.join(tmp, "state"),
             "--browser", "auto" if browser else "off", "--preview-listen", "127.0.0.1:0"],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + WAIT
        while not (os.path.exists(addr_file) and Path(addr_file).read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the worker did not start:\n" + Path(log.name).read_text()[-4000:], pytrace=False)
            time.sleep(0.05)
        try:
            url = "http://" + Path(addr_file).read_text().strip()
            yield WorkerEnv(url, "pytest-api-token", _has_browser(url, "pytest-api-token"))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def worker(worker_env: WorkerEnv) -> Iterator[Worker]:
    with Worker(worker_env.url, worker_env.token) as w:
        yield w


@pytest.fixture
def sandbox(worker: Worker) -> Iterator[object]:
    with worker.create(limits={"memory_mb": 512}) as sb:
        yield sb
