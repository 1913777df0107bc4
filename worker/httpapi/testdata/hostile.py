"""A hostile server for the port tests: python3 hostile.py PORT.

Every connection is accepted, whatever their number. After each accept it
writes "MOST TOTAL" to ./hostile-stats: the most connections it held open at
once (before counting, it looks at every connection it holds and lets go of
those whose client has closed), and how many it accepted. By the request's
path:

  /ok               a small answer
  /endless-headers  an answer head that never ends
  /endless-body     an answer body that never ends (no length: until close)
  anything else     nothing: the connection is held until the client leaves
"""
import os
import selectors
import socket
import sys
import threading

port = int(sys.argv[1])
ln = socket.socket()
ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ln.bind(("127.0.0.1", port))
ln.listen(4096)
ln.setblocking(False)
sel = selectors.DefaultSelector()
sel.register(ln, selectors.EVENT_READ)
lock = threading.Lock()
held = most = total = 0
requests = {}


def gone(c):
    global held
    with lock:
        held -= 1
    c.close()


def endless(c, path):
    try:
        c.setblocking(True)
        if path == b"/endless-headers":
            c.sendall(b"HTTP/1.1 200 OK\r\n")
            i = 0
            while True:
                c.sendall(b"X-Junk-%d: %s\r\n" % (i, b"a" * 200))
                i += 1
        zeros = bytes(1 << 16)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
        while True:
            c.sendall(zeros)
    except OSError:
        pass
    finally:
        gone(c)


def readable(c):
    """Reads what client c sent; lets go of c once it closed."""
    try:
        d = c.recv(65536)
    except BlockingIOError:
        return
    except OSError:
        d = b""
    if not d:
        sel.unregister(c)
        requests.pop(c, None)
        gone(c)
        return
    if c not in requests:
        return  # a held connection's later bytes
    requests[c] += d
    if b"\r\n\r\n" not in requests[c]:
        return
    path = requests[c].split(b" ", 2)[1]
    del requests[c]
    if path == b"/ok":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        requests[c] = b""
    elif path in (b"/endless-headers", b"/endless-body"):
        sel.unregister(c)
        threading.Thread(target=endless, args=(c, path), daemon=True).start()


def others(events):
    for key, _ in events:
        if key.fileobj is not ln:
            readable(key.fileobj)


while True:
    events = sel.select()
    others(events)
    if not any(key.fileobj is ln for key, _ in events):
        continue
    while True:
        others(sel.select(0))  # every close that happened before this accept
        try:
            c, _ = ln.accept()
        except BlockingIOError:
            break
        c.setblocking(False)
        sel.register(c, selectors.EVENT_READ)
        requests[c] = b""
        with lock:
            held += 1
            total += 1
            most = max(most, held)
            stats = "%d %d" % (most, total)
        with open("hostile-stats.tmp", "w") as f:
            f.write(stats)
        os.replace("hostile-stats.tmp", "hostile-stats")
