//! Host-supplied embeddings: dimension rules, fusion, filters before fusion,
//! pure vector search, restart, export/import and the embedder hook. Vectors
//! are synthetic (hand-built or derived from a hash of the text).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memstrata::{
    Embedder, Error, Fusion, FusionMethod, Memory, NewEpisode, SearchFilters, VectorQuery,
};
use serde_json::json;

fn any() -> SearchFilters {
    SearchFilters::default()
}

fn vq(v: &[f32]) -> VectorQuery {
    VectorQuery::embedding(v.to_vec())
}

fn invalid(e: Error) -> (String, String) {
    match e {
        Error::InvalidInput { field, reason } => (field, reason),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

/// A deterministic toy embedder: counts of letters a..p, so texts sharing letters are close.
fn letters(text: &str) -> Vec<f32> {
    let mut v = vec![0.01f32; 16];
    for c in text.chars().filter(char::is_ascii_lowercase) {
        let i = (c as usize - 'a' as usize) % 16;
        v[i] += 1.0;
    }
    v
}

#[test]
fn dimension_is_fixed_per_context_and_persisted() {
    let dir = common::tempdir();
    {
        let mem = Memory::open(dir.path()).unwrap();
        mem.episodic()
            .record(NewEpisode::new("first").embedding(vec![1.0, 0.0, 0.0]))
            .unwrap();
        let (field, reason) = invalid(
            mem.episodic()
                .record(NewEpisode::new("second").embedding(vec![1.0, 0.0, 0.0, 0.0]))
                .unwrap_err(),
        );
        assert_eq!(field, "embedding");
        assert_eq!(
            reason,
            "embedding has 4 dimensions, context 'default' uses 3"
        );
        // Knowledge shares the context's dimension.
        let (field, _) = invalid(
            mem.semantic()
                .store_with_embedding("k", json!("v"), Some(vec![1.0, 2.0]))
                .unwrap_err(),
        );
        assert_eq!(field, "embedding");
        // A query of the wrong dimension is refused the same way.
        let (_, reason) = invalid(
            mem.episodic()
                .search_hybrid("first", &any(), 5, &vq(&[1.0, 0.0]))
                .unwrap_err(),
        );
        assert_eq!(
            reason,
            "embedding has 2 dimensions, context 'default' uses 3"
        );
        // Another context fixes its own.
        let other = mem.namespace("other").unwrap();
        other
            .episodic()
            .record(NewEpisode::new("elsewhere").embedding(vec![0.5; 5]))
            .unwrap();
        // The refused writes stored nothing.
        assert_eq!(mem.episodic().recent(10).unwrap().len(), 1);
        assert!(mem.semantic().get("k").unwrap().is_none());
    }
    let mem = Memory::open(dir.path()).unwrap();
    let (_, reason) = invalid(
        mem.episodic()
            .record(NewEpisode::new("after restart").embedding(vec![1.0; 5]))
            .unwrap_err(),
    );
    assert_eq!(
        reason,
        "embedding has 5 dimensions, context 'default' uses 3"
    );
    mem.namespace("other")
        .unwrap()
        .episodic()
        .record(NewEpisode::new("still five").embedding(vec![0.1; 5]))
        .unwrap();
}

#[test]
fn bad_vectors_are_refused_with_the_field_named() {
    let mem = common::temporary().unwrap();
    for (v, needle) in [
        (vec![1.0, f32::NAN], "element 1 is NaN"),
        (vec![f32::INFINITY, 1.0], "element 0 is inf"),
        (vec![], "must not be empty"),
        (vec![0.0, 0.0], "all zeros"),
    ] {
        let (field, reason) = invalid(
            mem.episodic()
                .record(NewEpisode::new("x").embedding(v))
                .unwrap_err(),
        );
        assert_eq!(field, "embedding");
        assert!(reason.contains(needle), "{reason}");
    }
    match mem
        .episodic()
        .record(NewEpisode::new("x").embedding(vec![0.5; 4097]))
        .unwrap_err()
    {
        Error::LimitExceeded {
            field,
            limit,
            actual,
            ..
        } => {
            assert_eq!((field.as_str(), limit, actual), ("embedding", 4096, 4097));
        }
        other => panic!("{other:?}"),
    }
    let (field, _) = invalid(
        mem.episodic()
            .search_hybrid("x", &any(), 5, &vq(&[f32::NAN]))
            .unwrap_err(),
    );
    assert_eq!(field, "embedding");
    let bad = VectorQuery::embedding(vec![1.0]).fusion(Fusion {
        rrf_k: 0.0,
        ..Fusion::default()
    });
    assert_eq!(
        invalid(
            mem.episodic()
                .search_hybrid("x", &any(), 5, &bad)
                .unwrap_err()
        )
        .0,
        "rrf_k"
    );
    let bad = VectorQuery::embedding(vec![1.0]).fusion(Fusion {
        vector_weight: -1.0,
        ..Fusion::default()
    });
    assert_eq!(
        invalid(
            mem.episodic()
                .search_hybrid("x", &any(), 5, &bad)
                .unwrap_err()
        )
        .0,
        "vector_weight"
    );
    // Nothing was stored by any of the refused calls.
    assert!(mem.episodic().recent(10).unwrap().is_empty());
}

/// A: strong text match, orthogonal vector. B: no text match, identical vector.
/// C: weaker text match, vector at cosine 0.6.
fn fusion_case(mem: &Memory) -> (String, String, String) {
    let ep = mem.episodic();
    let a = ep
        .record(NewEpisode::new("apple apple apple orchard").embedding(vec![0.0, 1.0, 0.0]))
        .unwrap();
    let b = ep
        .record(NewEpisode::new("banana bread").embedding(vec![1.0, 0.0, 0.0]))
        .unwrap();
    let c = ep
        .record(
            NewEpisode::new("apple pie with a long list of other words around it")
                .embedding(vec![0.6, 0.8, 0.0]),
        )
        .unwrap();
    (a, b, c)
}

#[test]
fn linear_fusion_follows_its_formula() {
    let mem = common::temporary().unwrap();
    let (a, b, c) = fusion_case(&mem);
    let bm25 = mem.episodic().search("apple", &any(), 10).unwrap();
    assert_eq!(bm25.len(), 2);
    assert_eq!(bm25[0].episode.id, a);
    assert_eq!(bm25[0].bm25_rank, Some(1));
    assert_eq!(bm25[0].vector_rank, None);
    let ratio_c = bm25[1].score / bm25[0].score;
    assert!(ratio_c > 0.0 && ratio_c < 1.0);

    let fusion = Fusion {
        method: FusionMethod::Linear,
        bm25_weight: 0.3,
        vector_weight: 0.7,
        ..Fusion::default()
    };
    let hits = mem
        .episodic()
        .search_hybrid("apple", &any(), 10, &vq(&[1.0, 0.0, 0.0]).fusion(fusion))
        .unwrap();
    let expect = |id: &str| -> f32 {
        if id == a {
            0.3
        } else if id == b {
            0.7
        } else {
            0.3 * ratio_c + 0.7 * 0.6
        }
    };
    let mut want: Vec<(&String, f32)> = [&a, &b, &c].into_iter().map(|i| (i, expect(i))).collect();
    want.sort_by(|x, y| y.1.total_cmp(&x.1));
    let got: Vec<&String> = hits.iter().map(|h| &h.episode.id).collect();
    assert_eq!(got, want.iter().map(|w| w.0).collect::<Vec<_>>());
    for h in &hits {
        // int8 vectors: cosine within 0.01.
        assert!(
            (h.score - expect(&h.episode.id)).abs() < 0.01,
            "{} vs {}",
            h.score,
            expect(&h.episode.id)
        );
    }
    let hb = hits.iter().find(|h| h.episode.id == b).unwrap();
    assert_eq!((hb.bm25_rank, hb.vector_rank), (None, Some(1)));
    let hc = hits.iter().find(|h| h.episode.id == c).unwrap();
    assert_eq!((hc.bm25_rank, hc.vector_rank), (Some(2), Some(2)));
    let ha = hits.iter().find(|h| h.episode.id == a).unwrap();
    assert_eq!((ha.bm25_rank, ha.vector_rank), (Some(1), Some(3)));
}

#[test]
fn rrf_fusion_follows_its_formula() {
    let mem = common::temporary().unwrap();
    let (a, b, c) = fusion_case(&mem);
    // Ranks: BM25 A1 C2; vector B1 C2 A3. With k = 60 and weights 1/1:
    // A = 1/61 + 1/63 = 0.032266, C = 2/62 = 0.032258, B = 1/61 = 0.016393.
    let fusion = Fusion {
        method: FusionMethod::Rrf,
        bm25_weight: 1.0,
        vector_weight: 1.0,
        rrf_k: 60.0,
    };
    let hits = mem
        .episodic()
        .search_hybrid("apple", &any(), 10, &vq(&[1.0, 0.0, 0.0]).fusion(fusion))
        .unwrap();
    let ids: Vec<&String> = hits.iter().map(|h| &h.episode.id).collect();
    assert_eq!(ids, vec![&a, &c, &b]);
    assert!((hits[0].score - (1.0 / 61.0 + 1.0 / 63.0)).abs() < 1e-6);
    assert!((hits[1].score - 2.0 / 62.0).abs() < 1e-6);
    assert!((hits[2].score - 1.0 / 61.0).abs() < 1e-6);
    // Weighting the vector list down moves B below C, and the limit cuts after it.
    let fusion = Fusion {
        vector_weight: 0.2,
        ..fusion
    };
    let hits = mem
        .episodic()
        .search_hybrid("apple", &any(), 2, &vq(&[1.0, 0.0, 0.0]).fusion(fusion))
        .unwrap();
    let ids: Vec<&String> = hits.iter().map(|h| &h.episode.id).collect();
    assert_eq!(ids, vec![&a, &c]);
}

#[test]
fn pure_vector_search_with_an_empty_query() {
    let mem = common::temporary().unwrap();
    let (a, b, c) = fusion_case(&mem);
    let hits = mem
        .episodic()
        .search_hybrid("", &any(), 10, &vq(&[1.0, 0.0, 0.0]))
        .unwrap();
    let ids: Vec<&String> = hits.iter().map(|h| &h.episode.id).collect();
    assert_eq!(ids, vec![&b, &c, &a]);
    assert!((hits[0].score - 1.0).abs() < 0.01);
    assert!((hits[1].score - 0.6).abs() < 0.01);
    assert!(hits.iter().all(|h| h.bm25_rank.is_none()));
    assert_eq!(
        hits.iter().map(|h| h.vector_rank).collect::<Vec<_>>(),
        vec![Some(1), Some(2), Some(3)]
    );
    // Episodes without an embedding are not in the vector list.
    mem.episodic().record(NewEpisode::new("no vector")).unwrap();
    assert_eq!(
        mem.episodic()
            .search_hybrid("", &any(), 10, &vq(&[1.0, 0.0, 0.0]))
            .unwrap()
            .len(),
        3
    );
    // A context without vectors answers an embedding query with the text list only.
    let other = mem.namespace("plain").unwrap();
    other.episodic().record(NewEpisode::new("apple")).unwrap();
    let hits = other
        .episodic()
        .search_hybrid("apple", &any(), 10, &vq(&[1.0, 0.0]))
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].bm25_rank, hits[0].vector_rank), (Some(1), None));
}

#[test]
fn filters_apply_to_both_lists_before_fusion() {
    let mem = common::temporary().unwrap();
    let ep = mem.episodic();
    let q = [1.0f32, 0.0, 0.0, 0.0];
    // 200 excluded episodes sit right on the query vector and match the text best.
    for i in 0..200 {
        ep.record(
            NewEpisode::new(format!("walrus walrus walrus {i}"))
                .tags(["drop"])
                .participants(["mallory"])
                .importance(2)
                .embedding(vec![1.0, 0.001 * i as f32, 0.0, 0.0]),
        )
        .unwrap();
    }
    let mut kept = Vec::new();
    for i in 0..20 {
        kept.push(
            ep.record(
                NewEpisode::new(format!("walrus note {i} with more words here"))
                    .tags(["keep"])
                    .participants(["alice"])
                    .importance(8)
                    .embedding(vec![0.2, 1.0, 0.1 * i as f32, 0.0]),
            )
            .unwrap(),
        );
    }
    let filters = [
        SearchFilters {
            tags: vec!["keep".into()],
            ..Default::default()
        },
        SearchFilters {
            participants: vec!["alice".into(), "nobody".into()],
            ..Default::default()
        },
        SearchFilters {
            min_importance: Some(5),
            ..Default::default()
        },
    ];
    for f in &filters {
        for (query, method) in [
            ("walrus", FusionMethod::Linear),
            ("walrus", FusionMethod::Rrf),
            ("", FusionMethod::Linear),
        ] {
            let v = vq(&q).fusion(Fusion {
                method,
                ..Fusion::default()
            });
            let hits = ep.search_hybrid(query, f, 10, &v).unwrap();
            assert_eq!(hits.len(), 10, "{f:?} {query:?} {method:?}");
            assert!(
                hits.iter().all(|h| kept.contains(&h.episode.id)),
                "{f:?} {query:?}: an excluded episode came back"
            );
            assert!(hits.iter().all(|h| h.vector_rank.is_some()));
        }
    }
    // Time range: only the last ten recorded (the newest) are in range.
    let all = ep.recent(1000).unwrap();
    let since = all[9].timestamp;
    let hits = ep
        .search_hybrid(
            "walrus",
            &SearchFilters {
                since: Some(since),
                ..Default::default()
            },
            50,
            &vq(&q),
        )
        .unwrap();
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.episode.timestamp >= since));
}

#[test]
fn vectors_survive_restart_and_follow_forget() {
    let dir = common::tempdir();
    let (a, b);
    {
        let mem = Memory::open(dir.path()).unwrap();
        a = mem
            .episodic()
            .record(NewEpisode::new("alpha").embedding(vec![1.0, 0.0]))
            .unwrap();
        b = mem
            .episodic()
            .record(NewEpisode::new("beta").embedding(vec![0.0, 1.0]))
            .unwrap();
        mem.semantic()
            .store_with_embedding("fact", json!("a fact"), Some(vec![0.7, 0.7]))
            .unwrap();
        // Load the vector set, then change it: the loaded set follows.
        let hits = mem
            .episodic()
            .search_hybrid("", &any(), 5, &vq(&[1.0, 0.0]))
            .unwrap();
        assert_eq!(hits[0].episode.id, a);
        assert!(mem.episodic().forget(&a).unwrap());
        let hits = mem
            .episodic()
            .search_hybrid("", &any(), 5, &vq(&[1.0, 0.0]))
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].episode.id, b);
    }
    let mem = Memory::open(dir.path()).unwrap();
    let hits = mem
        .episodic()
        .search_hybrid("", &any(), 5, &vq(&[1.0, 0.0]))
        .unwrap();
    assert_eq!(hits.iter().map(|h| &h.episode.id).collect::<Vec<_>>(), [&b]);
    let k = mem
        .semantic()
        .query_hybrid("", 5, &vq(&[1.0, 0.0]))
        .unwrap();
    assert_eq!(k.len(), 1);
    assert_eq!((k[0].key.as_str(), k[0].vector_rank), ("fact", Some(1)));
    // A merge-patch update keeps the embedding; a plain store replaces it (none).
    mem.semantic().update("fact", json!("changed")).unwrap();
    assert_eq!(
        mem.semantic()
            .query_hybrid("", 5, &vq(&[1.0, 0.0]))
            .unwrap()
            .len(),
        1
    );
    mem.semantic().store("fact", json!("plain")).unwrap();
    assert!(
        mem.semantic()
            .query_hybrid("", 5, &vq(&[1.0, 0.0]))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn export_import_round_trip_carries_vectors() {
    let src = common::temporary().unwrap();
    let mut ids = Vec::new();
    for i in 0..30 {
        let v: Vec<f32> = (0..8)
            .map(|j| ((i * 7 + j * 3) % 11) as f32 - 5.0)
            .collect();
        ids.push(
            src.episodic()
                .record(NewEpisode::new(format!("episode {i}")).embedding(v))
                .unwrap(),
        );
    }
    src.semantic()
        .store_with_embedding("k", json!({"x": 1}), Some(vec![1.0; 8]))
        .unwrap();
    src.episodic().record(NewEpisode::new("no vector")).unwrap();
    let mut out = Vec::new();
    src.admin().export(&mut out).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert_eq!(text.matches("\"embedding\":[").count(), 31);

    let dst = common::temporary().unwrap();
    dst.admin().import(&mut out.as_slice()).unwrap();
    let q: Vec<f32> = (0..8).map(|j| (j as f32 - 3.5) / 2.0).collect();
    let a = src
        .episodic()
        .search_hybrid("", &any(), 30, &vq(&q))
        .unwrap();
    let b = dst
        .episodic()
        .search_hybrid("", &any(), 30, &vq(&q))
        .unwrap();
    assert_eq!(a.len(), 30);
    assert_eq!(a, b);
    assert_eq!(
        dst.semantic().query_hybrid("", 5, &vq(&[1.0; 8])).unwrap()[0].key,
        "k"
    );
    // The imported store fixed the dimension.
    assert!(
        dst.episodic()
            .record(NewEpisode::new("bad").embedding(vec![1.0; 3]))
            .is_err()
    );
    // A second export is byte-identical (vectors round-trip exactly).
    let mut again = Vec::new();
    dst.admin().export(&mut again).unwrap();
    let lines = |t: &str| {
        let mut v: Vec<String> = t
            .lines()
            .filter(|l| l.contains("\"embedding\""))
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    };
    assert_eq!(lines(&text), lines(&String::from_utf8(again).unwrap()));
    // A file whose vector disagrees with the store's dimension is refused whole.
    let bad = text.replacen("\"embedding\":[", "\"embedding\":[1.0,", 1);
    let fresh = common::temporary().unwrap();
    fresh
        .episodic()
        .record(NewEpisode::new("fixes eight").embedding(vec![1.0; 8]))
        .unwrap();
    let err = fresh.admin().import(&mut bad.as_bytes()).unwrap_err();
    assert_eq!(err.code(), "INVALID_INPUT");
    assert!(err.to_string().contains("9 dimensions"), "{err}");
    assert_eq!(fresh.episodic().recent(100).unwrap().len(), 1);
}

#[test]
fn embedder_hook_embeds_on_record_store_and_search() {
    let mem = common::temporary().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let f = move |texts: &[&str]| -> memstrata::Result<Vec<Vec<f32>>> {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(texts.iter().map(|t| letters(t)).collect())
    };
    mem.set_embedder(Some(Arc::new(f)));
    let id = mem
        .episodic()
        .record(NewEpisode::new("abc abc").content(json!({"note": "abcabc"})))
        .unwrap();
    mem.episodic().record(NewEpisode::new("xyz mno")).unwrap();
    mem.semantic().store("fact", json!("abba")).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Searching with text and no embedding calls the embedder: the vector list
    // finds the episode the text list cannot.
    let hits = mem.episodic().search("cab", &any(), 5).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(hits[0].episode.id, id);
    assert_eq!(hits[0].bm25_rank, None);
    assert_eq!(hits[0].vector_rank, Some(1));
    let k = mem.semantic().query("baba", 5).unwrap();
    assert_eq!(k[0].key, "fact");
    assert_eq!(k[0].vector_rank, Some(1));
    // An empty query does not call it; a given embedding is used as is.
    mem.episodic().search("", &any(), 5).unwrap();
    mem.episodic()
        .search_hybrid("cab", &any(), 5, &vq(&letters("xyz")))
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    // Removing it restores plain BM25.
    mem.set_embedder(None);
    assert!(mem.episodic().search("cab", &any(), 5).unwrap().is_empty());
}

struct Failing;
impl Embedder for Failing {
    fn embed(&self, _: &[&str]) -> memstrata::Result<Vec<Vec<f32>>> {
        Err(Error::storage("model server unreachable"))
    }
}

#[test]
fn embedder_failures_are_clear_errors() {
    let mem = common::temporary().unwrap();
    mem.set_embedder(Some(Arc::new(Failing)));
    let (field, reason) = invalid(mem.episodic().record(NewEpisode::new("x")).unwrap_err());
    assert_eq!(field, "embedder");
    assert!(reason.contains("model server unreachable"), "{reason}");
    let (field, _) = invalid(mem.episodic().search("x", &any(), 5).unwrap_err());
    assert_eq!(field, "embedder");
    assert!(mem.episodic().recent(5).unwrap().is_empty());

    let panics = |_: &[&str]| -> memstrata::Result<Vec<Vec<f32>>> { panic!("boom") };
    mem.set_embedder(Some(Arc::new(panics)));
    let (field, reason) = invalid(mem.semantic().store("k", json!(1)).unwrap_err());
    assert_eq!(
        (field.as_str(), reason.as_str()),
        ("embedder", "the embedder panicked")
    );

    let wrong_count = |_: &[&str]| -> memstrata::Result<Vec<Vec<f32>>> { Ok(vec![]) };
    mem.set_embedder(Some(Arc::new(wrong_count)));
    let (_, reason) = invalid(mem.episodic().record(NewEpisode::new("x")).unwrap_err());
    assert!(reason.contains("returned 0 vectors for 1 text"), "{reason}");

    let nan = |_: &[&str]| -> memstrata::Result<Vec<Vec<f32>>> { Ok(vec![vec![f32::NAN]]) };
    mem.set_embedder(Some(Arc::new(nan)));
    let (field, _) = invalid(mem.episodic().record(NewEpisode::new("x")).unwrap_err());
    assert_eq!(field, "embedder");
    assert!(mem.semantic().get("k").unwrap().is_none());
}
