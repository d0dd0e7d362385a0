//! The markdown section and the per-row target.

use crate::row::RowResult;
use crate::{Args, PREFILL, READ_PCT, TARGET_P95_NS, TARGET_P99_NS, WRITE_PCT};

pub(crate) fn fmt_ns(ns: f64) -> String {
    if ns.is_nan() {
        "–".into()
    } else if ns < 1e6 {
        format!("{:.0} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

pub(crate) fn target(r: &RowResult, wide: bool) -> String {
    let Some(rate) = r.rate else {
        return "not measured".into();
    };
    if wide {
        let ok = rate >= 1500.0 && r.p[2] < TARGET_P99_NS && r.errors == 0 && r.lost == Some(0);
        format!(
            "≥ 1500/s, p99 < 100 ms, 0 errors, 0 lost: {}",
            if ok { "met" } else { "**missed**" }
        )
    } else {
        let ok = rate >= 2000.0 && r.p[1] < TARGET_P95_NS && r.p[2] < TARGET_P99_NS;
        format!(
            "≥ 2000/s, p95 < 25 ms, p99 < 100 ms: {}",
            if ok { "met" } else { "**missed**" }
        )
    }
}

pub(crate) fn markdown(a: &Args, results: &[(RowResult, bool)], total: f64) -> String {
    let mut s = String::new();
    s.push_str("### Bounded loopback load (Rust load client)\n\n");
    s.push_str(&format!(
        "`benches/src/bin/mcp_load/` (`mcp-load`, a tokio client on {} runtime thread{}) against the release \
         `memstrata-mcp`: one server instance per row (a fresh store, `--no-audit`), C clients each with one call \
         in flight over loopback. Per row: a pre-fill of {PREFILL} entities (not measured), {} s of warm-up, then \
         D = {} s of the mix writes / reads / searches = {WRITE_PCT}% / {READ_PCT}% / {}%: WRITES `knowledge_store` a \
         new key each (a fact with three observations of 8–50 words), READS `knowledge_retrieve` a random pre-filled \
         key (a miss counts as an error), SEARCHES `knowledge_query` one word, limit 10 — the facts and words of the \
         Python rows. stdio: one server process for the row, its C clients multiplexed on the one stdio connection \
         (answers matched by id); streamable HTTP with sessions: each client `initialize`s its own session and sends \
         `tools/call` with `Mcp-Session-Id` on its own keep-alive connection (what the SDK clients do); stateless: \
         2026-07-28 `tools/call` requests (`Mcp-Method` / `Mcp-Name` headers, `_meta`), no session; WebSocket: one \
         `initialize`d connection per client; `/mcp/v1/execute`: the plain envelope, one keep-alive connection per \
         client. calls/s = completed calls ÷ the wall time of the measured window; p50/p95/p99 over every completed \
         call (errors apart). LOST = writes acknowledged (pre-fill, warm-up and measured) that `knowledge_retrieve` \
         of their key on the same instance does not find afterwards. CPU = seconds of CPU used during the measured \
         window by the client and by the server (`/proc/PID/stat`): with both on the same 2 cores, it shows which \
         side is the bound.\n\n",
        a.threads,
        if a.threads == 1 { "" } else { "s" },
        a.warmup,
        a.secs,
        100 - WRITE_PCT - READ_PCT
    ));
    s.push_str("| transport, clients | C | calls completed (w / r / s) | calls/s | p50 | p95 | p99 | errors | acknowledged writes / LOST | CPU client / server | load avg before → after | target |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (r, wide) in results {
        s.push_str(&format!(
            "| {} | {} | {} ({} / {} / {}) | {} | {} | {} | {} | {} | {} / {} | {:.1} s / {:.1} s | {} → {} | {} |\n",
            r.transport.label(r.clients),
            r.clients,
            r.calls,
            r.by_kind[0].0,
            r.by_kind[1].0,
            r.by_kind[2].0,
            r.rate.map_or("–".into(), |x| format!("{x:.0}")),
            fmt_ns(r.p[0]),
            fmt_ns(r.p[1]),
            fmt_ns(r.p[2]),
            r.errors,
            r.acked,
            r.lost.map_or("–".into(), |l| if l == 0 { "0".into() } else { format!("**{l}**") }),
            r.client_cpu,
            r.server_cpu,
            r.load_before,
            r.load_after,
            target(r, *wide)
        ));
    }
    s.push('\n');
    let per_op: Vec<String> = results
        .iter()
        .filter(|(r, _)| r.rate.is_some())
        .map(|(r, _)| {
            format!(
                "{} ×{}: {} / {}, {} / {}, {} / {}",
                r.transport.short(),
                r.clients,
                fmt_ns(r.by_kind[0].1),
                fmt_ns(r.by_kind[0].2),
                fmt_ns(r.by_kind[1].1),
                fmt_ns(r.by_kind[1].2),
                fmt_ns(r.by_kind[2].1),
                fmt_ns(r.by_kind[2].2)
            )
        })
        .collect();
    s.push_str(&format!(
        "p50 / p95 by op, writes / reads / searches: {}. Wall time of this section: {total:.0} s.\n\n",
        per_op.join("; ")
    ));
    for (r, _) in results {
        if let Some(f) = &r.failure {
            s.push_str(&format!(
                "- {}: **did not run**: {f}\n",
                r.transport.label(r.clients)
            ));
        }
        if !r.error_examples.is_empty() {
            s.push_str(&format!(
                "- {}: errors, e.g. {}\n",
                r.transport.label(r.clients),
                r.error_examples.join("; ")
            ));
        }
    }
    s.push('\n');
    s
}
