-- wrk script: POSTs MCP `tools/call` requests over keep-alive connections.
-- Script arguments: BODIES EXPECT SESSION...
--   BODIES  a file with one JSON-RPC request per line, `__ID__` where the id goes; each thread
--           sends them in turn (from a different start), each with an id of its own;
--   EXPECT  text every good answer contains (an HTTP 200 without it counts as bad);
--   SESSION Mcp-Session-Id values, one per thread, in turn.
-- done() prints one JSON line: requests, bad answers, socket errors, latency percentiles (µs).

local threads = {}
local counter = 0

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  bodies = {}
  for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
  expect = args[2]
  local sessions = {}
  for i = 3, #args do sessions[#sessions + 1] = args[i] end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
  wrk.headers["Mcp-Session-Id"] = sessions[tid % #sessions + 1]
  nxt = tid % #bodies
  bad = 0
end

function request()
  counter = counter + 1
  nxt = nxt % #bodies + 1
  local body = bodies[nxt]:gsub("__ID__", tostring(tid * 1000000000 + counter), 1)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status ~= 200 or not body:find(expect, 1, true) then bad = bad + 1 end
end

function done(summary, latency, requests)
  local bad_total = 0
  for _, t in ipairs(threads) do bad_total = bad_total + t:get("bad") end
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bad":%d,"socket_errors":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, bad_total, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
