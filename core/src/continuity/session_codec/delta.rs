//! Level 3: a copy/insert delta of a version against the previous one (block-hash matching).

#[allow(unused_imports)]
use super::*;

/// Block size of the base index: every match of at least `2 * BLOCK - 1` bytes is found.
pub(super) const BLOCK: usize = 16;

pub(super) fn block_hash(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    let mut y = [0u8; 8];
    x.copy_from_slice(&b[..8]);
    y.copy_from_slice(&b[8..16]);
    let h = u64::from_le_bytes(x).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from_le_bytes(y).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    h ^ (h >> 31)
}

pub(super) fn emit(out: &mut Vec<u8>, literal: &[u8], copy: Option<(usize, usize)>) {
    put_varint(out, literal.len() as u64);
    out.extend_from_slice(literal);
    match copy {
        Some((offset, len)) => {
            put_varint(out, len as u64);
            put_varint(out, offset as u64);
        }
        None => put_varint(out, 0),
    }
}

/// Delta that rebuilds `target` from `base`: `varint(target_len)` then repeated
/// `varint(insert_len) insert_bytes varint(copy_len) [varint(base_offset)]`.
pub(crate) fn delta_encode(base: &[u8], target: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(target.len() / 8 + 16);
    put_varint(&mut out, target.len() as u64);
    if base.len() < BLOCK || target.len() < BLOCK || base.len() >= u32::MAX as usize {
        if !target.is_empty() {
            emit(&mut out, target, None);
        }
        return out;
    }
    let blocks = base.len() / BLOCK;
    let bits = (blocks * 2).next_power_of_two().max(1024).trailing_zeros();
    let mask = (1usize << bits) - 1;
    let mut table = vec![0u32; mask + 1];
    for b in 0..blocks {
        let i = b * BLOCK;
        let slot = (block_hash(&base[i..i + BLOCK]) as usize) & mask;
        table[slot] = (i + 1) as u32;
    }
    let mut lit = 0usize;
    let mut j = 0usize;
    while j + BLOCK <= target.len() {
        let cand = table[(block_hash(&target[j..j + BLOCK]) as usize) & mask];
        if cand != 0 {
            let i = (cand - 1) as usize;
            if base[i..i + BLOCK] == target[j..j + BLOCK] {
                let (mut st, mut sb) = (j, i);
                while st > lit && sb > 0 && target[st - 1] == base[sb - 1] {
                    st -= 1;
                    sb -= 1;
                }
                let (mut et, mut eb) = (j + BLOCK, i + BLOCK);
                while et < target.len() && eb < base.len() && target[et] == base[eb] {
                    et += 1;
                    eb += 1;
                }
                emit(&mut out, &target[lit..st], Some((sb, et - st)));
                lit = et;
                j = et;
                continue;
            }
        }
        j += 1;
    }
    if lit < target.len() {
        emit(&mut out, &target[lit..], None);
    }
    out
}

/// Apply a delta from [`delta_encode`] to `base`.
pub(crate) fn delta_apply(base: &[u8], delta: &[u8], max_len: usize) -> Result<Vec<u8>> {
    let mut r = Reader::new(delta, "session delta");
    let total = r.len()?;
    if total > max_len {
        return Err(Error::corrupted(format!(
            "session delta: target of {total} bytes exceeds {max_len}"
        )));
    }
    // Grow as needed: `total` comes from stored bytes, do not trust it for one big allocation.
    let mut out =
        Vec::with_capacity(total.min(base.len().saturating_add(delta.len()).saturating_mul(2)));
    while out.len() < total {
        let n = r.len()?;
        out.extend_from_slice(r.bytes(n)?);
        let c = r.len()?;
        if c > 0 {
            let off = r.len()?;
            let end = off
                .checked_add(c)
                .filter(|e| *e <= base.len())
                .ok_or_else(|| Error::corrupted("session delta: copy outside its base"))?;
            out.extend_from_slice(&base[off..end]);
        }
        if out.len() > total {
            return Err(Error::corrupted(
                "session delta: output longer than declared",
            ));
        }
        if n == 0 && c == 0 && out.len() < total {
            return Err(Error::corrupted("session delta: empty operation"));
        }
    }
    if !r.is_empty() {
        return Err(Error::corrupted("session delta: trailing bytes"));
    }
    Ok(out)
}
