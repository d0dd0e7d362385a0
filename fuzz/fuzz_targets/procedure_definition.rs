#![no_main]
//! Procedure definitions and CEL conditions: parsing, validation and a bounded
//! execution must never panic, whatever the JSON says.
use std::sync::OnceLock;

use memstrata::{Limits, Memory};

fn mem() -> &'static Memory {
    static MEM: OnceLock<Memory> = OnceLock::new();
    MEM.get_or_init(|| {
        Memory::builder()
            .temporary()
            .limits(Limits { max_steps: 50, ..Limits::default() })
            .open()
            .expect("temporary store")
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let Ok(steps) = memstrata::procedural::steps_from_json(v) else { return };
    let p = mem().procedural();
    let _ = p.forget("fuzz");
    if p.learn("fuzz", steps).is_ok() {
        let _ = p.execute("fuzz", serde_json::json!({"x": 1, "s": "a"}), &Default::default());
    }
});
