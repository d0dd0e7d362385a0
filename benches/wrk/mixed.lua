-- wrk script: the mixed load of the bounded loopback load table (writes / reads /
-- searches = 20% / 60% / 20%) from a C client (wrk) instead of the Python one,
-- against POST /mcp/v1/execute (WRK_MODE=execute, the default) or streamable
-- HTTP POST /mcp as stateless 2026-07-28 `tools/call` requests (WRK_MODE=mcp).
-- Usage: benches/wrk/run.sh (it pre-fills the 300 keys the reads use and
-- starts the server).
local mode = os.getenv("WRK_MODE") or "execute"
-- Written keys are "w<prefix>-<thread>-<n>": several wrk processes against one store
-- (benches/wrk/instances.sh) each pass their own WRK_KEY_PREFIX.
local prefix = os.getenv("WRK_KEY_PREFIX") or ""
local words = {"alpha", "project", "deadline", "budget", "review", "design", "meeting",
  "release", "customer", "invoice", "travel", "python", "rust", "kernel", "garden"}
local counter = 0
local thread_id = 0
local threads = {}

function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(tid * 7919 + 17)
end

local function call(tool, params)
  counter = counter + 1
  if mode == "mcp" then
    local body = string.format('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s,'
      .. '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
      counter, tool, params)
    return wrk.format("POST", "/mcp", {["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream", ["MCP-Protocol-Version"] = "2026-07-28",
      ["Mcp-Method"] = "tools/call", ["Mcp-Name"] = tool}, body)
  end
  local body = string.format('{"jsonrpc":"2.0","id":%d,"method":"execute","params":{"tool":"%s","parameters":%s}}',
    counter, tool, params)
  return wrk.format("POST", "/mcp/v1/execute", {["Content-Type"] = "application/json"}, body)
end

function request()
  local r = math.random(100)
  if r <= 20 then
    local w = words[math.random(#words)]
    return call("knowledge_store", string.format(
      '{"key":"w%s-%d-%d","knowledge":{"entityType":"fact","observations":["%s notes from the %s review","owner %d"]}}',
      prefix, tid, counter, w, words[math.random(#words)], counter))
  elseif r <= 80 then
    return call("knowledge_retrieve", string.format('{"key":"pre-%d"}', math.random(300) - 1))
  end
  return call("knowledge_query", string.format('{"text":"%s","limit":10}', words[math.random(#words)]))
end

errors = 0
function response(status, headers, body)
  if status ~= 200 or string.find(body, '"error"', 1, true) or string.find(body, '"isError":true', 1, true)
      or string.find(body, '"found":false', 1, true) then
    errors = errors + 1
  end
end

function done(summary, latency, requests)
  local tool_errors = 0
  for _, t in ipairs(threads) do
    tool_errors = tool_errors + (t:get("errors") or 0)
  end
  io.write(string.format("calls/s %.0f  p50 %.2f ms  p95 %.2f ms  p99 %.2f ms  tool errors or misses %d  non-2xx+socket errors %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    tool_errors, (summary.errors.status or 0) + (summary.errors.connect or 0) + (summary.errors.read or 0)
      + (summary.errors.write or 0) + (summary.errors.timeout or 0)))
end
