#!/usr/bin/env python3
"""Times small GETs on one kept-alive connection, standard library only (so
that it runs the same inside a sandbox and on the host):

  python3 getbench.py URL N [HEADER: VALUE]...

prints the median and the 90th percentile of N GETs of URL, in microseconds,
after 50 untimed ones. Every answer must be 200. scripts/bench-ports.sh runs
it through a sandbox's port forward and inside the sandbox itself.
"""
import http.client
import sys
import time
import urllib.parse

url = urllib.parse.urlsplit(sys.argv[1])
n = int(sys.argv[2])
headers = {}
for h in sys.argv[3:]:
    k, v = h.split(":", 1)
    headers[k.strip()] = v.strip()
path = url.path + ("?" + url.query if url.query else "")
conn = http.client.HTTPConnection(url.hostname, url.port)


def get():
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise SystemExit("GET %s: %d %r" % (sys.argv[1], resp.status, body[:200]))


for _ in range(50):
    get()
times = []
for _ in range(n):
    start = time.perf_counter_ns()
    get()
    times.append(time.perf_counter_ns() - start)
times.sort()
print("%.1f %.1f" % (times[len(times) // 2] / 1000, times[len(times) * 9 // 10] / 1000))
