#![no_main]
//! Export/import files: arbitrary input must be refused cleanly (or applied
//! whole), never panic, never half-apply.
use std::sync::OnceLock;

use memstrata::Memory;

fn mem() -> &'static Memory {
    static MEM: OnceLock<Memory> = OnceLock::new();
    MEM.get_or_init(|| Memory::temporary().expect("temporary store"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let m = mem();
    let mut r = std::io::BufReader::new(data);
    let _ = m.admin().import(&mut r);
    let mut r = std::io::BufReader::new(data);
    let _ = m.admin().import_knowledge_graph(&mut r);
});
