//! Rate limits and the call time limit on a real loopback listener (issue 16).

mod security_support;

use std::num::NonZeroU32;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use memstrata::Memory;
use memstrata_mcp::security::{Limits, LimitsConfig};
use memstrata_mcp::transport::HttpConfig;
use memstrata_mcp::{Auth, Caller, MemoryServer, Principal, Shared};
use security_support::{envelope, http, serve};

const KEY_A: &str = "flooding-key-aaaa";
const KEY_B: &str = "patient-key-bbbb";

fn limited(rate: u32, burst: u32) -> std::sync::Arc<Shared> {
    let auth = Auth::disabled().with_full_keys([KEY_A, KEY_B]);
    let limits = Limits::new(LimitsConfig {
        rate: NonZeroU32::new(rate),
        burst: NonZeroU32::new(burst),
        ..LimitsConfig::default()
    });
    Shared::with_limits(Memory::temporary().unwrap(), auth, true, false, limits).unwrap()
}

fn cfg() -> HttpConfig {
    HttpConfig::new("127.0.0.1:0".parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_flood_from_one_key_gets_429_while_another_key_is_served() {
    let (addr, stop) = serve(limited(1, 5), cfg()).await;
    let call = envelope(1, "system_status", json!({}));
    // Concurrent flood from key A.
    let flood: Vec<_> = (0..40)
        .map(|_| {
            let call = call.clone();
            tokio::spawn(async move {
                http(addr, "POST", "/mcp/v1/execute", Some(KEY_A), Some(&call)).await
            })
        })
        .collect();
    let mut ok = 0;
    let mut limited = Vec::new();
    for f in flood {
        let r = f.await.unwrap();
        match r.status {
            200 => ok += 1,
            429 => limited.push(r),
            s => panic!("unexpected status {s}: {:?}", r.body),
        }
    }
    assert!((1..=15).contains(&ok), "{ok} of 40 flood calls served");
    assert!(limited.len() >= 25, "{} refused", limited.len());
    let r = &limited[0];
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 1, "{retry}");
    let msg = r.body["error"].as_str().unwrap();
    assert!(
        msg.starts_with("LIMIT_EXCEEDED: rate limit exceeded"),
        "{msg}"
    );
    assert!(!msg.contains(KEY_A), "the key must not be echoed: {msg}");
    // Key B has its own bucket.
    for _ in 0..3 {
        let r = http(addr, "POST", "/mcp/v1/execute", Some(KEY_B), Some(&call)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert!(r.body["result"].is_object(), "{:?}", r.body);
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_flood_gets_json_rpc_errors() {
    let (addr, stop) = serve(limited(1, 4), cfg()).await;
    let mut req = format!("ws://{addr}/mcp/ws").into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {KEY_A}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    // The upgrade took one token; three are left for 20 pipelined calls.
    for id in 0..20 {
        let m = envelope(id, "system_status", json!({}));
        ws.send(Message::Text(m.to_string().into())).await.unwrap();
    }
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..20 {
        let m = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        if v.get("result").is_some() {
            ok += 1;
        } else {
            let e = &v["error"];
            assert_eq!(e["data"]["code"], "LIMIT_EXCEEDED", "{v}");
            assert!(e["data"]["retry_after_ms"].as_u64().unwrap() >= 1, "{v}");
            refused += 1;
        }
    }
    assert!((1..=10).contains(&ok), "{ok} served");
    assert!(refused >= 10, "{refused} refused");
    // Another key's calls still succeed meanwhile.
    let call = envelope(1, "system_status", json!({}));
    let r = http(addr, "POST", "/mcp/v1/execute", Some(KEY_B), Some(&call)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_hits_the_time_limit() {
    let mem = Memory::temporary().unwrap();
    // Some data, so an aggressive optimize has real work to do.
    let seed = MemoryServer::new(
        Shared::new(mem.clone(), Auth::disabled(), false).unwrap(),
        "test",
        Caller::Fixed(Principal::local()),
    );
    for i in 0..200 {
        let r = seed
            .execute_json(
                "context_store",
                json!({"key": format!("k{i}"), "value": {"text": format!("value number {i} with some words")}}),
                &Principal::local(),
            )
            .await
            .unwrap();
        r.unwrap();
    }
    let limits = Limits::new(LimitsConfig {
        call_timeout: Some(Duration::from_nanos(1)),
        ..LimitsConfig::default()
    });
    let shared = Shared::with_limits(mem, Auth::disabled(), false, false, limits).unwrap();
    let (addr, stop) = serve(shared, cfg()).await;
    let call = envelope(1, "memory_optimize", json!({"level": "aggressive"}));
    let mut timed_out = None;
    for _ in 0..5 {
        let r = http(addr, "POST", "/mcp/v1/execute", None, Some(&call)).await;
        assert_eq!(r.status, 200);
        if r.body["error"]["data"]["code"] == "LIMIT_EXCEEDED" {
            timed_out = Some(r);
            break;
        }
    }
    let r = timed_out.expect("no call hit the 1 ns time limit");
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("call time limit"), "{msg}");
    stop.cancel();
}
