//! Entry points for fuzz targets and robustness tests. Not a stable API.

/// Decode `bytes` as every stored record type; must never panic.
/// Returns how many decoders accepted the input.
pub fn decode_records(bytes: &[u8]) -> usize {
    let mut ok = 0;
    ok += usize::from(crate::codec::decode::<crate::short_term::StRecord>(bytes).is_ok());
    ok += usize::from(crate::codec::decode::<crate::working::WorkingState>(bytes).is_ok());
    ok += usize::from(crate::codec::decode::<crate::episodic::EpisodeRecord>(bytes).is_ok());
    ok += usize::from(crate::codec::decode::<crate::semantic::KnowledgeRecord>(bytes).is_ok());
    ok += usize::from(crate::codec::decode::<crate::semantic::HistoryRecord>(bytes).is_ok());
    ok += usize::from(crate::codec::decode::<serde_json::Value>(bytes).is_ok());
    ok += usize::from(crate::codec::decode::<Vec<String>>(bytes).is_ok());
    ok
}

/// Encode a JSON value the way records are stored (for building seeds).
pub fn encode_value(v: &serde_json::Value) -> Vec<u8> {
    crate::codec::encode(v).unwrap_or_default()
}
