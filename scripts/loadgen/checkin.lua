-- checkin.lua: wrk script of scripts/bench-live.sh. Each request is a durable
-- check-in of the next stream (STREAM_PREFIX000 .. STREAMS-1, in turn) with
-- the service token, the owner as X-OV-Subject and the body file. At the end
-- it prints one JSON line: the run's requests, time, latency percentiles and
-- errors (wrk counts a status >= 400 as a status error).
--
-- Environment: BENCH_NAME, BENCH_TOKEN, BENCH_SUBJECT, BENCH_BODY (a file),
-- BENCH_STREAMS (default 100), BENCH_STREAM_PREFIX (default "bench-").

local streams = tonumber(os.getenv("BENCH_STREAMS") or "100")
local prefix = os.getenv("BENCH_STREAM_PREFIX") or "bench-"
local f = assert(io.open(assert(os.getenv("BENCH_BODY"), "BENCH_BODY is not set"), "rb"))
local body = f:read("*a")
f:close()
local headers = {
  ["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or ""),
  ["X-OV-Subject"] = os.getenv("BENCH_SUBJECT") or "",
  ["Content-Type"] = "application/json",
}
local paths = {}
for i = 0, streams - 1 do
  paths[i] = string.format("/api/streams/agent/%s%03d/plays/worker", prefix, i)
end

local counter = 0
local threads = 0

function setup(thread)
  -- Threads start at different streams so that they do not move in step.
  thread:set("start", threads * 37)
  threads = threads + 1
end

function init(args)
  counter = start or 0
end

function request()
  counter = counter + 1
  return wrk.format("POST", paths[counter % streams], headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"name":"%s","requests":%d,"seconds":%.3f,"per_second":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,' ..
    '"non_2xx":%d,"socket_errors":%d}\n',
    os.getenv("BENCH_NAME") or "run", summary.requests, summary.duration / 1e6,
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1e3, latency:percentile(99) / 1e3,
    latency.max / 1e3, e.status, e.connect + e.read + e.write + e.timeout))
end
