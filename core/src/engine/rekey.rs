//! Key rotation in place: every record of a closed, encrypted sled store
//! re-sealed under a new key (values, keys, the key check) and every file of
//! its search index re-sealed, resumable after a crash.
//!
//! Order, each step safe to interrupt:
//! 1. `REKEY` is written beside `db/`: the key check sealed with the new key.
//!    While it exists, opening the store is refused (its records are under two
//!    keys) and only a rotation to the same new key may go on.
//! 2. Each tree is rewritten in atomic batches; an entry that already opens
//!    under the new key is skipped, so a second run finishes the first.
//! 3. Each index file is decrypted and sealed again under the new key
//!    (written beside, synced, renamed over), skipped when it already opens.
//! 4. The key check in `meta`, then `KEYCHECK`, are replaced; `REKEY` is
//!    removed last. From then on the old key is refused as a wrong key.

#[allow(unused_imports)]
use super::*;
use crate::config::EncryptionKey;
use crate::error::FromDep;
use crate::storage::keys::{self, KeySeal};

/// Marker of a rotation under way (see the module documentation).
pub(crate) const REKEY_FILE: &str = "REKEY";
/// Leftovers of an interrupted index-file rewrite start with this.
const TMP_PREFIX: &str = ".rekey-";

/// What a key rotation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RekeyStats {
    /// Records rewritten under the new key (values and keys).
    pub records: u64,
    /// Search-index files sealed again under the new key.
    pub index_files: u64,
    /// Whether the run finished a rotation that an earlier run began.
    pub resumed: bool,
}

/// Where a rotation reports progress: stage (`"records"`, `"index"`), done, total.
pub(crate) type RekeyProgress<'a> = &'a dyn Fn(&'static str, u64, Option<u64>);

/// The error for a store with an unfinished rotation (opening it is refused).
pub(crate) fn interrupted_rekey_error(path: &Path) -> Error {
    Error::invalid(
        "encryption_key",
        format!(
            "a key rotation of the store at {} was interrupted: finish it by running the rotation again with the old and the new key (`memstrata-mcp rekey`, `memstrata::admin::rekey_store`)",
            storage::url::mask_path(path)
        ),
    )
}

fn sealed_with(codec: &codec::Codec, bytes: &[u8]) -> bool {
    codec
        .decode::<String>(bytes)
        .is_ok_and(|v| v == KEY_CHECK_VALUE)
}

/// Rotate the key of the closed sled store at `path` from `old` to `new`.
pub(crate) fn rekey_store(
    path: &Path,
    old: &EncryptionKey,
    new: &EncryptionKey,
    progress: RekeyProgress<'_>,
) -> Result<RekeyStats> {
    if storage::url::is_postgres_path(path) {
        return Err(Error::invalid(
            "path",
            "key rotation in place works on a sled store directory; rotate a PostgreSQL store by export and import",
        ));
    }
    if old == new {
        return Err(Error::invalid(
            "new_key",
            "the new key is the store's current key",
        ));
    }
    if !path.join("db").is_dir() {
        return Err(Error::invalid(
            "path",
            format!(
                "no store at {} (no db/ directory)",
                storage::url::mask_path(path)
            ),
        ));
    }
    let lock = storage::lock_store_dir(path)?;
    let old_codec = codec::Codec::new(Some(old));
    let new_codec = codec::Codec::new(Some(new));
    let check_file = path.join(KEY_CHECK_FILE);
    let marker = path.join(REKEY_FILE);
    let marked = match std::fs::read(&marker) {
        Ok(b) if sealed_with(&new_codec, &b) => true,
        Ok(_) => {
            return Err(Error::invalid(
                "new_key",
                "an interrupted rotation of this store to another key is under way: run it again with that key",
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::Io(e)),
    };
    let mut stats = RekeyStats {
        resumed: marked,
        ..RekeyStats::default()
    };
    match std::fs::read(&check_file) {
        // Interrupted after `KEYCHECK` was replaced: only the marker is left.
        Ok(b) if marked && sealed_with(&new_codec, &b) => {
            remove_synced(&marker)?;
            return Ok(stats);
        }
        Ok(b) if sealed_with(&new_codec, &b) => {
            return Err(Error::invalid(
                "new_key",
                "the store is already encrypted with the new key",
            ));
        }
        Ok(b) => verify_key_check(&old_codec, &b, path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::Io(e)),
    }

    let db = open_sled_dir(path).map_err(Error::from_dep)?;
    let meta = db.open_tree(Tree::Meta.name()).map_err(Error::from_dep)?;
    match meta.get(META_KEY_CHECK).map_err(Error::from_dep)? {
        Some(c) if sealed_with(&old_codec, &c) || (marked && sealed_with(&new_codec, &c)) => {}
        Some(_) => return Err(key_mismatch_error(path, true, true)),
        None => return Err(key_mismatch_error(path, false, true)),
    }
    if !marked {
        write_key_check_file(&marker, &new_codec)?;
    }
    let old_seal = Arc::new(KeySeal::new(old));
    let new_seal = Arc::new(KeySeal::new(new));
    let format = meta
        .get(META_FORMAT)
        .map_err(Error::from_dep)?
        .and_then(|v| <[u8; 4]>::try_from(v.as_ref()).ok())
        .map(u32::from_be_bytes);
    if format.is_some_and(|f| f < FORMAT_VERSION_SEALED_KEYS) {
        // Written before keys were sealed: seal them under the old key first.
        keys::seal_plaintext_keys(&Store::Sled(db.clone()), &old_seal)?;
        meta.insert(META_FORMAT, &FORMAT_VERSION_SEALED_KEYS.to_be_bytes())
            .map_err(Error::from_dep)?;
    }

    let value = |v: &[u8]| -> Result<Vec<u8>> {
        // Sealed records; the raw bytes of `meta` and `contexts` are short.
        if v.len() < 41 || v.first() != Some(&2) || new_codec.open(v).is_ok() {
            return Ok(v.to_vec());
        }
        new_codec.seal(old_codec.open(v)?.into_owned())
    };
    let total: u64 = Tree::ALL
        .iter()
        .map(|t| db.open_tree(t.name()).map_or(0, |t| t.len() as u64))
        .sum();
    for t in Tree::ALL {
        let before = stats.records;
        stats.records += keys::reseal_tree(&db, t, &old_seal, &new_seal, &value, &mut |n| {
            progress("records", before + n, Some(total))
        })?;
    }
    db.flush().map_err(Error::from_dep)?;
    stats.index_files = reseal_index(&path.join("index"), old, new, progress)?;

    meta.insert(META_KEY_CHECK, new_codec.encode(KEY_CHECK_VALUE)?)
        .map_err(Error::from_dep)?;
    db.flush().map_err(Error::from_dep)?;
    drop((meta, db));
    write_key_check_file(&check_file, &new_codec)?;
    remove_synced(&marker)?;
    drop(lock);
    Ok(stats)
}

/// Remove `file` and sync its directory.
fn remove_synced(file: &Path) -> Result<()> {
    std::fs::remove_file(file)?;
    if let Some(dir) = file.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Seal every file of the index at `dir` again under `new`. A file that opens
/// under neither key, or a plaintext index, is derived data: the whole index
/// is removed and the next open rebuilds it from the records (sealed).
fn reseal_index(
    dir: &Path,
    old: &EncryptionKey,
    new: &EncryptionKey,
    progress: RekeyProgress<'_>,
) -> Result<u64> {
    if !dir.is_dir() {
        return Ok(0);
    }
    let old = index::Sealer::new(old, 0);
    let new = index::Sealer::new(new, 0);
    let mut files = Vec::new();
    for ent in std::fs::read_dir(dir)? {
        let ent = ent?;
        let name = ent.file_name();
        let s = name.to_string_lossy();
        if s.starts_with(TMP_PREFIX) {
            std::fs::remove_file(ent.path())?;
        } else if ent.file_type()?.is_file() && ent.metadata()?.len() > 0 {
            files.push(PathBuf::from(name));
        }
    }
    let total = files.len() as u64;
    let mut done = 0u64;
    for name in &files {
        let file = dir.join(name);
        let bytes = std::fs::read(&file)?;
        if !index::Sealer::looks_sealed(&bytes) {
            std::fs::remove_dir_all(dir)?;
            return Ok(done);
        }
        if new.open_bytes(name, &bytes).is_ok() {
            continue;
        }
        let Ok(plain) = old.open_bytes(name, &bytes) else {
            std::fs::remove_dir_all(dir)?;
            return Ok(done);
        };
        let sealed = new.seal_bytes(name, &plain)?;
        let tmp = dir.join(format!("{TMP_PREFIX}{}", name.to_string_lossy()));
        {
            use std::io::Write;
            let mut f = File::create(&tmp)?;
            f.write_all(&sealed)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &file)?;
        done += 1;
        progress("index", done, Some(total));
    }
    File::open(dir)?.sync_all()?;
    Ok(done)
}
