#![no_main]
//! Stored-record decoding must never panic on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = memstrata::fuzzing::decode_records(data);
});
