//! The entropy stage of levels 2 and 3: canonical Huffman over the lz4 output, and the packing that picks lz4 alone or lz4 + Huffman.

#[allow(unused_imports)]
use super::*;

/// Longest Huffman code; the decoder uses a table of `1 << HUFF_MAX_BITS` entries.
pub(super) const HUFF_MAX_BITS: u32 = 12;

pub(super) const PACK_LZ4: u8 = 0;

pub(super) const PACK_LZ4_HUFFMAN: u8 = 1;

/// Huffman code lengths (0 = unused symbol) for byte frequencies, at most `HUFF_MAX_BITS`.
pub(super) fn code_lengths(freq: &[u64; 256]) -> [u8; 256] {
    let mut f = *freq;
    loop {
        let lens = huffman_lengths(&f);
        if lens.iter().all(|&l| u32::from(l) <= HUFF_MAX_BITS) {
            return lens;
        }
        // Flatten the distribution and retry; converges (all-ones gives depth <= 8).
        for x in f.iter_mut().filter(|x| **x > 0) {
            *x = (*x >> 1).max(1);
        }
    }
}

pub(super) fn huffman_lengths(f: &[u64; 256]) -> [u8; 256] {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut lens = [0u8; 256];
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = (0..256)
        .filter(|&s| f[s] > 0)
        .map(|s| Reverse((f[s], s)))
        .collect();
    match heap.len() {
        0 => return lens,
        1 => {
            if let Some(Reverse((_, s))) = heap.peek() {
                lens[*s] = 1;
            }
            return lens;
        }
        _ => {}
    }
    let mut parent = vec![usize::MAX; 512];
    let mut next = 256usize;
    while heap.len() > 1 {
        let (Some(Reverse((wa, a))), Some(Reverse((wb, b)))) = (heap.pop(), heap.pop()) else {
            break;
        };
        parent[a] = next;
        parent[b] = next;
        heap.push(Reverse((wa + wb, next)));
        next += 1;
    }
    for s in 0..256 {
        if f[s] > 0 {
            let mut d = 0u8;
            let mut n = s;
            while parent[n] != usize::MAX {
                n = parent[n];
                d = d.saturating_add(1);
            }
            lens[s] = d;
        }
    }
    lens
}

/// Canonical codes for `lens`, bit-reversed for an LSB-first bit stream.
pub(super) fn canonical_codes(lens: &[u8; 256]) -> [u32; 256] {
    let mut order: Vec<usize> = (0..256).filter(|&s| lens[s] > 0).collect();
    order.sort_by_key(|&s| (lens[s], s));
    let mut codes = [0u32; 256];
    let mut code = 0u32;
    let mut prev = 0u8;
    for s in order {
        code <<= lens[s] - prev;
        prev = lens[s];
        codes[s] = code.reverse_bits() >> (32 - u32::from(lens[s]));
        code += 1;
    }
    codes
}

/// `varint(n) | 128 bytes of 4-bit code lengths | LSB-first bit stream`.
pub(super) fn huffman_encode(input: &[u8]) -> Vec<u8> {
    let mut freq = [0u64; 256];
    for &b in input {
        freq[b as usize] += 1;
    }
    let lens = code_lengths(&freq);
    let codes = canonical_codes(&lens);
    let mut out = Vec::with_capacity(input.len() / 2 + 160);
    put_varint(&mut out, input.len() as u64);
    for pair in lens.chunks_exact(2) {
        out.push(pair[0] | (pair[1] << 4));
    }
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    for &b in input {
        acc |= u64::from(codes[b as usize]) << nbits;
        nbits += u32::from(lens[b as usize]);
        while nbits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            nbits -= 8;
        }
    }
    if nbits > 0 {
        out.push(acc as u8);
    }
    out
}

pub(super) fn huffman_decode(input: &[u8], max_len: usize) -> Result<Vec<u8>> {
    let bad = |why: &str| Error::corrupted(format!("session payload (huffman): {why}"));
    let mut r = Reader::new(input, "session payload (huffman)");
    let n = r.len()?;
    if n > max_len {
        return Err(bad("declared length too large"));
    }
    let packed = r.bytes(128)?;
    let mut lens = [0u8; 256];
    for (i, b) in packed.iter().enumerate() {
        lens[2 * i] = b & 0x0f;
        lens[2 * i + 1] = b >> 4;
    }
    if lens.iter().any(|&l| u32::from(l) > HUFF_MAX_BITS) {
        return Err(bad("code length above the maximum"));
    }
    let size = 1usize << HUFF_MAX_BITS;
    let kraft: usize = lens.iter().filter(|&&l| l > 0).map(|&l| size >> l).sum();
    if kraft > size {
        return Err(bad("code lengths do not form a prefix code"));
    }
    let codes = canonical_codes(&lens);
    // (symbol, length); length 0 marks an unused bit pattern.
    let mut table = vec![(0u8, 0u8); size];
    for s in 0..256 {
        let l = lens[s];
        if l == 0 {
            continue;
        }
        let step = 1usize << l;
        let mut i = codes[s] as usize;
        while i < size {
            table[i] = (s as u8, l);
            i += step;
        }
    }
    let bits = r.rest();
    let total_bits = bits.len() as u64 * 8;
    if n as u64 > total_bits {
        return Err(bad("declared length exceeds the bit stream"));
    }
    let mut used: u64 = 0;
    let mut out = Vec::with_capacity(n);
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    let mut pos = 0usize;
    let mask = (size - 1) as u64;
    while out.len() < n {
        while nbits <= 56 && pos < bits.len() {
            acc |= u64::from(bits[pos]) << nbits;
            nbits += 8;
            pos += 1;
        }
        let (sym, l) = table[(acc & mask) as usize];
        if l == 0 {
            return Err(bad("invalid code"));
        }
        used += u64::from(l);
        if used > total_bits {
            return Err(bad("truncated bit stream"));
        }
        out.push(sym);
        acc >>= l;
        nbits = nbits.saturating_sub(u32::from(l));
    }
    Ok(out)
}

/// lz4, then a Huffman stage over the lz4 output when that makes it smaller.
pub(crate) fn pack(bytes: &[u8]) -> Vec<u8> {
    let l = lz4(bytes);
    let h = huffman_encode(&l);
    let mut out = Vec::with_capacity(l.len().min(h.len()) + 1);
    if h.len() < l.len() {
        out.push(PACK_LZ4_HUFFMAN);
        out.extend_from_slice(&h);
    } else {
        out.push(PACK_LZ4);
        out.extend_from_slice(&l);
    }
    out
}

/// Inverse of [`pack`], refusing more than `max_len` bytes of output.
pub(crate) fn unpack(payload: &[u8], max_len: usize, what: &str) -> Result<Vec<u8>> {
    match payload.split_first() {
        Some((&PACK_LZ4, rest)) => unlz4(rest, max_len, what),
        Some((&PACK_LZ4_HUFFMAN, rest)) => {
            let lz_bound = max_len.saturating_add(max_len / 255).saturating_add(64);
            let l = huffman_decode(rest, lz_bound)?;
            unlz4(&l, max_len, what)
        }
        Some((m, _)) => Err(Error::corrupted(format!("{what}: unknown packing {m}"))),
        None => Err(Error::corrupted(format!("{what}: empty payload"))),
    }
}
