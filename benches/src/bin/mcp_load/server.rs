//! One `memstrata-mcp` server per row (a fresh store, `--no-audit`), and its CPU time.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use crate::transport::{StdioConn, Transport};
use crate::{Result, SESSION_VERSION};

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) stdio: Option<Arc<StdioConn>>,
}

pub(crate) async fn start_server(
    binary: &Path,
    store: &Path,
    transport: Transport,
) -> Result<Server> {
    let mut cmd = Command::new(binary);
    cmd.arg("--store")
        .arg(store)
        .arg("--no-audit")
        .stderr(Stdio::null())
        .kill_on_drop(true);
    if transport == Transport::Stdio {
        cmd.arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let conn = Arc::new(StdioConn {
            stdin: Mutex::new(stdin),
            pending: std::sync::Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        let reader = Arc::clone(&conn);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let Some(id) = v.get("id").and_then(Value::as_u64) else {
                    continue; // a notification
                };
                let tx = reader.pending.lock().ok().and_then(|mut p| p.remove(&id));
                if let Some(tx) = tx {
                    let _ = tx.send(v);
                }
            }
            // End of output: every caller still waiting gets an error (its sender drops).
            if let Ok(mut p) = reader.pending.lock() {
                p.clear();
            }
        });
        conn.request(
            "initialize",
            json!({"protocolVersion": SESSION_VERSION, "capabilities": {},
                   "clientInfo": {"name": "memstrata-mcp-load", "version": "0"}}),
        )
        .await?;
        conn.notify("notifications/initialized").await?;
        return Ok(Server {
            child,
            port: 0,
            stdio: Some(conn),
        });
    }
    // Port 0: the kernel picks the port and the server logs it (a port probed and released
    // here could be taken by another process before the server binds it).
    cmd.arg("http")
        .arg("--listen")
        .arg("127.0.0.1:0")
        // The default filter: the listening line is at `info`.
        .env("MEMSTRATA_LOG", "info,rmcp=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let mut lines = BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
    let port = loop {
        // The server prints its listening line or exits (end of stderr): no deadline.
        let Some(line) = lines.next_line().await? else {
            let st = child.wait().await?;
            return Err(format!("memstrata-mcp http exited early ({st})").into());
        };
        if let Some(port) = line
            .split("listening on http://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|p| p.parse::<u16>().ok())
        {
            break port;
        }
    };
    // Keep reading stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server {
        child,
        port,
        stdio: None,
    })
}

/// CPU seconds (user + system) of process `pid` so far.
pub(crate) fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime), in clock ticks of 1/100 s.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
