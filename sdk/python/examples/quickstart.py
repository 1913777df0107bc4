"""The README's example: a sandbox, a command, a file, a background
process, a terminal, then the wipe.

    AGENTSANDBOX_URL=http://127.0.0.1:8088 AGENTSANDBOX_TOKEN_FILE=/etc/codes-sandbox/api.token \
        python3 examples/quickstart.py
"""

import os
from pathlib import Path

from agentsandbox import PathNotFoundError, Worker

url = os.environ.get("AGENTSANDBOX_URL", "http://127.0.0.1:8088")
token = Path(os.environ["AGENTSANDBOX_TOKEN_FILE"]).read_text().strip()

with Worker(url, token) as worker:
    with worker.create(time_box_minutes=10, limits={"memory_mb": 512}, egress="none") as sb:
        r = sb.run(["python3", "-c", "print(6 * 7)"])
        print("exit", r.exit_code, "stdout", r.stdout.strip())

        sb.files.write("app/main.py", "import sys\nprint('hello', sys.argv[1])\n")
        print(sb.run(["python3", "app/main.py", "world"], on_stdout=lambda s: print("live:", s, end="")).ok)
        print([e.name for e in sb.files.list("app")])

        server = sb.start(["sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 0.1; done"])
        for ev in server.output(follow=True):
            print("bg:", ev.text, end="")

        with sb.terminal(["sh"]) as term:
            term.write("echo $((1 + 2)); exit\n")
            print("terminal exit", term.wait(timeout=30).exit_code)

        try:
            sb.files.read("missing.txt")
        except PathNotFoundError as e:
            print("error code", e.code)
    print("wiped", sb.wipe_report.verified if sb.wipe_report else None)
