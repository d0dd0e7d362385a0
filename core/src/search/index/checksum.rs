//! The checksum check of a plain index's segment files at open.
//!
//! Every file tantivy writes ends with a footer holding the CRC-32 of the
//! bytes before it, but tantivy checks it only when asked
//! (`Index::validate_checksum`), never when it opens or reads a segment. Most
//! damage in the middle of a segment file is not noticed later either: a
//! term dictionary (an FST) or a posting list with flipped bytes decodes to
//! other terms or other documents, and a search answers wrongly instead of
//! failing. So a plain index is checked at open, and a file whose checksum
//! does not match makes the engine rebuild the index from sled.
//!
//! The check streams each file through one small buffer with `read`, not
//! through tantivy's mapped files: `validate_checksum` would make every page
//! of the index resident in this process (78 bytes per short episode, ~75 MiB
//! at 1M). A sealed index (an encrypted store) is not checked here: each of
//! its chunks is authenticated when it is read, and a chunk that fails
//! answers `CORRUPTED` and rebuilds the index.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{Error, Result};

/// tantivy's footer ends with its length and this magic number (two `u32`,
/// little endian).
const FOOTER_MAGIC: u32 = 1337;
/// tantivy refuses footers longer than this.
const FOOTER_MAX_LEN: u64 = 50_000;
/// Bytes read at a time.
const BUF_BYTES: usize = 256 * 1024;

/// The part of tantivy's footer (JSON) that is checked.
#[derive(serde::Deserialize)]
struct Footer {
    crc: u32,
}

/// Check the checksum of every file of the segments `metas` names in the
/// index folder `root`. The error names the first damaged file.
pub(super) fn check_segment_files(root: &Path, metas: &tantivy::IndexMeta) -> Result<()> {
    let mut buf = vec![0u8; BUF_BYTES];
    let mut files: Vec<_> = metas.list_segment_files().into_iter().collect();
    files.sort();
    for name in files {
        match check_file(&root.join(&name), &mut buf) {
            Ok(true) => {}
            // The list names every component a segment may have (a delete
            // file, a temporary store), written or not. A file tantivy needs
            // and does not find fails its open, which also rebuilds.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Ok(false) => {
                return Err(Error::index(format!(
                    "index file {} is damaged (its checksum does not match)",
                    name.display()
                )));
            }
            Err(e) => {
                return Err(Error::index(format!(
                    "index file {} is unreadable: {e}",
                    name.display()
                )));
            }
        }
    }
    Ok(())
}

/// Whether `path`'s body matches the CRC-32 in its footer. A footer that
/// cannot be parsed is an `InvalidData` error.
fn check_file(path: &Path, buf: &mut [u8]) -> io::Result<bool> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    if len < 8 {
        return Err(invalid("shorter than a footer"));
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::Start(len - 8))?;
    file.read_exact(&mut tail)?;
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    let magic = u32::from_le_bytes([tail[4], tail[5], tail[6], tail[7]]);
    if magic != FOOTER_MAGIC || footer_len > FOOTER_MAX_LEN || footer_len + 8 > len {
        return Err(invalid("no valid footer"));
    }
    let body_len = len - 8 - footer_len;
    let mut json = vec![0u8; footer_len as usize];
    file.seek(SeekFrom::Start(body_len))?;
    file.read_exact(&mut json)?;
    let footer: Footer =
        serde_json::from_slice(&json).map_err(|_| invalid("footer is not tantivy's"))?;
    file.seek(SeekFrom::Start(0))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut left = body_len;
    while left > 0 {
        let n = (left as usize).min(buf.len());
        file.read_exact(&mut buf[..n])?;
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(hasher.finalize() == footer.crc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file as tantivy writes it: body, JSON footer, its length, magic.
    fn with_footer(body: &[u8]) -> Vec<u8> {
        let json = format!(
            r#"{{"version":{{"major":0,"minor":27,"patch":0,"index_format_version":7}},"crc":{}}}"#,
            crc32fast::hash(body)
        );
        let mut out = body.to_vec();
        out.extend_from_slice(json.as_bytes());
        out.extend_from_slice(&(json.len() as u32).to_le_bytes());
        out.extend_from_slice(&FOOTER_MAGIC.to_le_bytes());
        out
    }

    #[test]
    fn a_flipped_byte_anywhere_in_the_body_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // Longer than the buffer, so the body is read in several parts.
        let body: Vec<u8> = (0..BUF_BYTES * 2 + 77)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let good = with_footer(&body);
        let mut buf = vec![0u8; BUF_BYTES];
        std::fs::write(&path, &good).unwrap();
        assert!(check_file(&path, &mut buf).unwrap());
        for at in [0, BUF_BYTES - 1, BUF_BYTES, body.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            assert!(!check_file(&path, &mut buf).unwrap(), "flip at {at}");
        }
    }

    #[test]
    fn a_cut_or_foreign_file_is_invalid_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let good = with_footer(b"some segment bytes");
        let mut buf = vec![0u8; 64];
        for bad in [&good[..good.len() / 2], b"1234567", &[0u8; 100][..]] {
            std::fs::write(&path, bad).unwrap();
            let e = check_file(&path, &mut buf).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        }
    }
}
