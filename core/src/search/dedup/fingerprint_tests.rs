//! Tests of the fingerprints and similarities against their plain definitions.

use super::*;

#[test]
fn normalise_folds_case_and_punctuation() {
    assert_eq!(normalise("  Hello,   World!! 42 "), "hello world 42");
    assert_eq!(normalise("¡Ünïcode—ok?"), "ünïcode ok");
    assert_eq!(normalise("..."), "");
}

#[test]
fn near_texts_share_a_band_and_far_texts_do_not() {
    let a = Fingerprint::of(
        0,
        "a",
        "The user prefers dark mode in every editor they use",
        true,
    );
    let b = Fingerprint::of(
        0,
        "b",
        "the user prefers dark mode in every editor they use.",
        true,
    );
    let c = Fingerprint::of(
        0,
        "c",
        "Quarterly revenue grew by eleven percent in Europe",
        true,
    );
    assert!(jaccard(&a.shingles, b.shingles.as_slice()) > 0.99);
    assert!(a.bands.iter().zip(&b.bands).any(|(x, y)| x == y));
    assert!(jaccard(&a.shingles, c.shingles.as_slice()) < 0.1);
    assert!(!a.bands.iter().zip(&c.bands).any(|(x, y)| x == y));
    assert_eq!(a.bands.len(), MINHASH_BANDS);
}

#[test]
fn seeds_change_every_hash() {
    let a = Fingerprint::of(0, "same text", "same text here", true);
    let b = Fingerprint::of(7, "same text", "same text here", true);
    assert_ne!(a.exact, b.exact);
    assert!(a.bands.iter().zip(&b.bands).all(|(x, y)| x != y));
}

/// `v` without repeats, the first of each kept (a set in the order first
/// seen, as [`Shingles`] keeps it), the plain way.
fn first_seen(v: Vec<u64>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for h in v {
        if !out.contains(&h) {
            out.push(h);
        }
    }
    out
}

/// Jaccard similarity by its set definition (0 when both are empty).
fn jaccard_plain(a: &[u64], b: &[u64]) -> f32 {
    use std::collections::HashSet;
    let (ha, hb): (HashSet<u64>, HashSet<u64>) =
        (a.iter().copied().collect(), b.iter().copied().collect());
    let union = ha.union(&hb).count();
    if union == 0 {
        0.0
    } else {
        ha.intersection(&hb).count() as f32 / union as f32
    }
}

/// The normalisation's definition, one character at a time with the
/// Unicode rules (the ASCII path works on bytes).
fn normalise_by_chars(text: &str) -> String {
    let mut out = String::new();
    let mut space = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.extend(c.to_lowercase());
        } else {
            space = true;
        }
    }
    out
}

#[test]
fn ascii_and_unicode_texts_shingle_by_characters() {
    // The definition: every window of 5 characters (the ASCII path takes bytes).
    let by_chars = |norm: &str| {
        let c: Vec<char> = norm.chars().collect();
        let v: Vec<u64> = if c.len() <= SHINGLE_CHARS {
            vec![hash64(0, norm.as_bytes())]
        } else {
            c.windows(SHINGLE_CHARS)
                .map(|w| hash64(0, w.iter().collect::<String>().as_bytes()))
                .collect()
        };
        first_seen(v)
    };
    for t in [
        "hello world",
        "ünïcode ok straße",
        "abcde",
        "abcd",
        "ab ab ab ab ab",
    ] {
        let n = normalise(t);
        assert_eq!(shingles(0, &n).as_slice(), by_chars(&n), "{t:?}");
    }
    // ASCII folds as the Unicode rules do.
    let all: String = (0u8..128).map(char::from).collect();
    assert_eq!(normalise(&all), normalise_by_chars(&all));
}

#[test]
fn the_ascii_paths_agree_with_the_definitions() {
    // Random ASCII texts (letters, digits, spaces and punctuation runs):
    // the byte-wise normalisation against the per-character one, and the
    // vectorised window hashes against `hash64` of each window.
    let alphabet = b"aBcDeZz09 .,!-\t#";
    let mut z = 3u64;
    for n in 0..400 {
        let text: String = (0..n % 97)
            .map(|_| {
                z = splitmix(z);
                char::from(alphabet[(z % alphabet.len() as u64) as usize])
            })
            .collect();
        let norm = normalise(&text);
        assert_eq!(norm, normalise_by_chars(&text), "{text:?}");
        let seed = z;
        let want: Vec<u64> = if norm.len() <= SHINGLE_CHARS {
            vec![hash64(seed, norm.as_bytes())]
        } else {
            norm.as_bytes()
                .windows(SHINGLE_CHARS)
                .map(|w| hash64(seed, w))
                .collect()
        };
        if norm.len() >= SHINGLE_CHARS {
            assert_eq!(window_hashes(seed, norm.as_bytes()), want, "{norm:?}");
        }
        let mut set = first_seen(want);
        if norm.is_empty() {
            set.clear();
        }
        let got = shingles(seed, &norm);
        assert_eq!(got.as_slice(), set, "{norm:?}");
        // The table holds the set and nothing else.
        assert!(set.iter().all(|h| got.contains(*h)));
        assert!((0..64).all(|i| set.contains(&splitmix(i)) == got.contains(splitmix(i))));
    }
}

#[test]
fn minima_are_the_minimum_of_each_row() {
    // The definition, written the plain way (every build must agree: the
    // band keys are stored).
    let set = shingles(9, &normalise("The user prefers dark mode in every editor"));
    let n = MINHASH_BANDS * MINHASH_ROWS;
    let mut want = vec![u64::MAX; n];
    for s in set.as_slice() {
        for (i, m) in want.iter_mut().enumerate() {
            *m = (*m).min(splitmix(s ^ splitmix(9 ^ (i as u64 + 1))));
        }
    }
    assert_eq!(minima(9, set.as_slice()), want);
    // A known value, so a change of the hash functions cannot pass unseen.
    assert_eq!(minima(0, &[1])[0], 0xe9fd_6049_d65a_f21e);
}

#[test]
fn jaccard_at_least_agrees_with_jaccard() {
    // Random sets of many sizes and overlaps (0 among the hashes at
    // times), at several thresholds, against the set definition.
    let mut z = 1u64;
    let mut next = || {
        z = splitmix(z);
        z
    };
    for _ in 0..3000 {
        let (la, lb) = ((next() % 120) as usize, (next() % 120) as usize);
        let shared = (next() % 120) as usize;
        let pool: Vec<u64> = (0..la + lb + shared).map(|_| next() % 4096).collect();
        let mut a: Vec<u64> = pool[..la + shared.min(pool.len() - la)].to_vec();
        let mut b: Vec<u64> = pool[la.min(pool.len())..].to_vec();
        b.truncate(lb + shared);
        if next() % 3 == 0 {
            b.sort_unstable();
        }
        let (sa, b) = (Shingles::of_hashes(a.clone()), first_seen(b));
        a = first_seen(a);
        assert_eq!(sa.as_slice(), a);
        let j = jaccard(&sa, &b);
        assert_eq!(j, jaccard_plain(&a, &b), "{a:?} {b:?}");
        for t in [0.0f32, 0.3, NEAR_JACCARD, 0.8, 0.9, 1.0] {
            assert_eq!(
                jaccard_at_least(&sa, &b, t),
                (j >= t && !(a.is_empty() && b.is_empty())).then_some(j),
                "{a:?} {b:?} {t}"
            );
        }
    }
}

#[test]
fn the_low_bits_bound_never_rules_out_a_set_that_reaches() {
    // Random sets whose hashes often share their low 16 bits (and are 0
    // at times): `may_reach` is true whenever the Jaccard similarity
    // reaches the threshold, and (without such pairs) exactly then.
    let mut z = 5u64;
    let mut next = || {
        z = splitmix(z);
        z
    };
    let (mut loose, mut tight) = (0, 0);
    for round in 0..3000 {
        // Half the rounds: low bits from a small pool, high bits apart.
        let collide = round % 2 == 0;
        let mut pick = |n: u64| {
            let r = next();
            if collide {
                ((r % 7) << 16) | ((r >> 40) % n)
            } else {
                r % (n * 64)
            }
        };
        let (la, lb, shared) = (
            (pick(100) % 100) as usize,
            (pick(100) % 100) as usize,
            (pick(100) % 100) as usize,
        );
        let common: Vec<u64> = (0..shared).map(|_| pick(300)).collect();
        let a: Vec<u64> = (0..la).map(|_| pick(300)).chain(common.clone()).collect();
        let b: Vec<u64> = common
            .into_iter()
            .chain((0..lb).map(|_| pick(300)))
            .collect();
        let sa = Shingles::of_hashes(a);
        let b = first_seen(b);
        let low: Vec<u16> = b.iter().map(|h| *h as u16).collect();
        let mask = (1u64 << LOW_BITS) - 1;
        let distinct_low = sa
            .as_slice()
            .iter()
            .all(|x| b.iter().all(|y| x == y || x & mask != y & mask));
        let bits = sa.low_bits();
        for t in [0.0f32, 0.3, NEAR_JACCARD, 0.8, 1.0] {
            let reaches = jaccard_at_least(&sa, &b, t).is_some();
            let may = may_reach(sa.len(), bits, &low, t);
            assert!(may || !reaches, "{t} {:?} {b:?}", sa.as_slice());
            if distinct_low {
                assert_eq!(may, reaches, "{t} {:?} {b:?}", sa.as_slice());
                tight += 1;
            } else if may && !reaches {
                loose += 1;
            }
        }
    }
    // Both kinds of rounds were seen.
    assert!(tight > 1000 && loose > 0, "{tight} {loose}");
}

#[test]
fn jaccard_is_the_set_definition_and_the_bound_holds() {
    let texts = [
        "",
        "hi",
        "The user prefers dark mode in every editor they use",
        "the user prefers dark mode in every editor they use.",
        "the user prefers dark mode",
        "Quarterly revenue grew by eleven percent in Europe",
        "aaaaaaaaaaaaaaaa aaaaaaaa",
        "deploy billing deploy billing deploy billing today #3",
    ];
    for a in texts {
        for b in texts {
            let (sa, sb) = (shingles(0, &normalise(a)), shingles(0, &normalise(b)));
            assert_eq!(sa.as_slice(), first_seen(sa.as_slice().to_vec()));
            let want = jaccard_plain(sa.as_slice(), sb.as_slice());
            assert_eq!(jaccard(&sa, sb.as_slice()), want, "{a:?} ~ {b:?}");
            assert!(jaccard_bound(sa.len(), sb.len()) >= want, "{a:?} ~ {b:?}");
        }
    }
}

#[test]
fn band_keys_are_the_hashes_of_band_and_minima_bytes() {
    // The definition the stored keys were made with.
    let set = shingles(4, &normalise("Band keys are stored on PostgreSQL"));
    let mins = minima(4, set.as_slice());
    let want: Vec<u64> = mins
        .chunks(MINHASH_ROWS)
        .enumerate()
        .map(|(b, rows)| {
            let mut bytes = (b as u64).to_be_bytes().to_vec();
            for r in rows {
                bytes.extend_from_slice(&r.to_be_bytes());
            }
            hash64(4, &bytes)
        })
        .collect();
    assert_eq!(bands_of(4, &mins), want);
}

#[test]
fn fingerprints_are_the_definition_the_stored_keys_were_made_with() {
    // The exact hash, minima and band keys of texts, from the windows'
    // hashes sorted without repeats (the form the keys were first made
    // from), the plain way: the same integers whatever order the set is kept in.
    for (seed, text) in [
        (0, "The user prefers dark mode in every editor they use"),
        (7, "deploy billing deploy billing deploy billing today #3"),
        (3, "Ünïcode texts: straße, ÉCOLE, 東京 tower"),
        (1, "hi"),
    ] {
        let fp = Fingerprint::of(seed, text, text, true);
        let norm = normalise_by_chars(text);
        let c: Vec<char> = norm.chars().collect();
        let mut set: Vec<u64> = if c.len() <= SHINGLE_CHARS {
            vec![hash64(seed, norm.as_bytes())]
        } else {
            c.windows(SHINGLE_CHARS)
                .map(|w| hash64(seed, w.iter().collect::<String>().as_bytes()))
                .collect()
        };
        set.sort_unstable();
        set.dedup();
        let mut sorted = fp.shingles.as_slice().to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, set, "{text:?}");
        let mins: Vec<u64> = (0..MINHASH_BANDS * MINHASH_ROWS)
            .map(|i| {
                let row = splitmix(seed ^ (i as u64 + 1));
                set.iter().map(|s| splitmix(s ^ row)).min().unwrap()
            })
            .collect();
        assert_eq!(fp.mins, mins, "{text:?}");
        let bands: Vec<u64> = mins
            .chunks(MINHASH_ROWS)
            .enumerate()
            .map(|(b, rows)| {
                let mut bytes = (b as u64).to_be_bytes().to_vec();
                for r in rows {
                    bytes.extend_from_slice(&r.to_be_bytes());
                }
                hash64(seed, &bytes)
            })
            .collect();
        assert_eq!(fp.bands, bands, "{text:?}");
        assert_eq!(fp.exact, Some(hash64(seed, text.as_bytes())));
    }
}

#[test]
fn short_and_empty_texts() {
    assert_eq!(shingles(0, "hi").len(), 1);
    assert_eq!(shingles(0, "").len(), 0);
    assert!(minima(0, &[]).is_empty());
    assert!(bands_of(0, &[]).is_empty());
    assert_eq!(jaccard(&Shingles::default(), &[]), 0.0);
    assert!(!Shingles::default().contains(0) && !Shingles::default().contains(5));
    assert_eq!(jaccard_bound(0, 0), 0.0);
}
