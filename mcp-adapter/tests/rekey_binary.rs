//! `memstrata-mcp rekey`: the built binary rotates a store's key in place; the
//! old key is refused afterwards, the new one reads everything, and neither
//! key appears in what the command prints.

use std::path::Path;
use std::process::Command;

use memstrata::{EncryptionKey, Memory};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_memstrata-mcp");

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn open(store: &Path, key: [u8; 32]) -> memstrata::Result<Memory> {
    Memory::builder()
        .path(store)
        .encryption_key(EncryptionKey::new(key))
        .open()
}

fn rekey(store: &Path, old: Option<&Path>, new: &Path) -> (bool, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--store").arg(store);
    if let Some(f) = old {
        cmd.arg("--encryption-key-file").arg(f);
    }
    let out = cmd
        .arg("rekey")
        .arg("--new-key-file")
        .arg(new)
        .env_remove("MEMSTRATA_ENCRYPTION_KEY_FILE")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn rekey_rotates_the_key_and_the_old_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.mem");
    let (old, new) = ([0x11u8; 32], [0x22u8; 32]);
    let (old_file, new_file) = (dir.path().join("old.key"), dir.path().join("new.key"));
    std::fs::write(&old_file, hex(&old)).unwrap();
    std::fs::write(&new_file, new).unwrap();
    let mem = open(&store, old).unwrap();
    mem.short_term().store("k", json!("v"), None).unwrap();
    mem.episodic()
        .record(memstrata::NewEpisode::new("rotated episode"))
        .unwrap();
    drop(mem);

    let (ok, text) = rekey(&store, None, &new_file);
    assert!(!ok && text.contains("--encryption-key-file"), "{text}");

    let (ok, text) = rekey(&store, Some(&old_file), &new_file);
    assert!(ok, "{text}");
    assert!(text.contains("rekeyed"), "{text}");
    for secret in [hex(&old), hex(&new)] {
        assert!(!text.contains(&secret), "a key was printed: {text}");
    }
    assert!(matches!(
        open(&store, old),
        Err(memstrata::Error::InvalidInput { ref field, .. }) if field == "encryption_key"
    ));
    let mem = open(&store, new).unwrap();
    assert_eq!(mem.short_term().retrieve("k").unwrap(), Some(json!("v")));
    let hits = mem
        .episodic()
        .search("rotated", &memstrata::SearchFilters::default(), 5)
        .unwrap();
    assert_eq!(hits.len(), 1);
    drop(mem);

    // Again with the old key: refused as a wrong key, nothing changed.
    let (ok, text) = rekey(&store, Some(&old_file), &new_file);
    assert!(!ok, "{text}");
}
