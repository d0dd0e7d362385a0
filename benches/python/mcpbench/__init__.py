"""The parts of the MCP latency benchmark (`benches/python/mcp_latency.py`).

- `clients`: the ways to call a memstrata-mcp server (the official SDK aside): the raw stdio
  JSON-RPC client `RawStdio` (also used by `mcp_concurrency.py`), WebSocket frames, the
  `/mcp/v1/execute` envelope, and an HTTP server on a fresh store.
- `data`: the facts and search words every part sends.
- `transports`: one client, sequential calls, per transport and against the reference server.
- `load`: the bounded loopback load (C clients at once, a fixed mix, D seconds).
- `workload`: the end-to-end workload (store N facts, then search), sequential and pipelined.
- `figures`: percentiles and durations as printed.
"""
