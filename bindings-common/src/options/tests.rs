//! Tests of the option records' conversions.

use super::*;

#[test]
fn defaults_apply_and_bad_values_name_their_field() {
    let (f, limit) = SearchOptions::default().filters().unwrap();
    assert_eq!(limit, 10);
    assert!(f.tags.is_empty());
    let e = SearchOptions {
        min_importance: Some(300),
        ..Default::default()
    }
    .filters()
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("min_importance"));
    let e = OpenOptions {
        durability: Some("sometimes".into()),
        ..Default::default()
    }
    .builder(None)
    .unwrap_err();
    assert_eq!(e.code, crate::ErrorCode::InvalidInput);
    let e = OpenOptions {
        cache_bytes: Some(-1),
        ..Default::default()
    }
    .builder(None)
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("cache_bytes"));
    let e = OpenOptions {
        episode_cache_bytes: Some(-5),
        ..Default::default()
    }
    .builder(None)
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("episode_cache_bytes"));
    let e = OpenOptions {
        low_memory: Some(true),
        short_term_cache_bytes: Some(2 << 30),
        ..Default::default()
    }
    .open(None)
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("short_term_cache_bytes"));
    let e = OpenOptions {
        index_cache_bytes: Some(2 << 30),
        ..Default::default()
    }
    .open(None)
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("index_cache_bytes"));
    let e = OpenOptions {
        index_cache_bytes: Some(-1),
        ..Default::default()
    }
    .builder(None)
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("index_cache_bytes"));
    for bad in [-0.5, f64::NAN, f64::INFINITY] {
        let e = OpenOptions {
            release_memory_interval: Some(bad),
            ..Default::default()
        }
        .builder(None)
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("release_memory_interval"));
    }
    let m = OpenOptions {
        low_memory: Some(true),
        episode_cache_bytes: Some(3 << 20),
        ..Default::default()
    }
    .open(None)
    .unwrap();
    let o = m.options();
    assert_eq!(
        (
            o.cache_bytes,
            o.episode_cache_bytes,
            o.short_term_cache_bytes,
            o.index_cache_bytes,
            o.release_memory_interval
        ),
        (
            1 << 20,
            3 << 20,
            2 << 20,
            4 << 20,
            std::time::Duration::from_millis(250)
        )
    );
    let m = OpenOptions {
        low_memory: Some(true),
        index_cache_bytes: Some(0),
        release_memory_interval: Some(0.0),
        ..Default::default()
    }
    .open(None)
    .unwrap();
    let o = m.options();
    assert_eq!(o.index_cache_bytes, 0);
    assert_eq!(o.release_memory_interval, std::time::Duration::ZERO);
    let m = OpenOptions {
        index_cache_bytes: Some(1 << 20),
        release_memory_interval: Some(2.5),
        ..Default::default()
    }
    .open(None)
    .unwrap();
    let o = m.options();
    assert_eq!(o.index_cache_bytes, 1 << 20);
    assert_eq!(
        o.release_memory_interval,
        std::time::Duration::from_millis(2500)
    );
    assert_eq!(compression_level(None).unwrap(), 1);
    assert!(compression_level(Some(1000)).is_err());
    assert!(ttl(Some(-1.0)).is_err());
}

#[test]
fn record_options_build_the_episode() {
    let e = RecordOptions {
        tags: Some(vec!["deploy".into()]),
        importance: Some(7),
        ..Default::default()
    }
    .episode("shipped".into())
    .unwrap();
    assert_eq!(e.summary, "shipped");
    assert_eq!(e.tags, vec!["deploy".to_owned()]);
    assert_eq!(e.importance, Some(7));
    let e = RecordOptions {
        embedding: Some(vec![1.0, f64::MAX].into()),
        ..Default::default()
    }
    .episode("x".into())
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("embedding"));
    let e = RecordOptions {
        on_duplicate: Some("merge".into()),
        ..Default::default()
    }
    .episode("x".into())
    .unwrap();
    assert_eq!(e.on_duplicate, Some(OnDuplicate::Merge));
    let e = RecordOptions {
        on_duplicate: Some("drop".into()),
        ..Default::default()
    }
    .episode("x".into())
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("on_duplicate"));
    assert!(e.message.contains("\"skip\""), "{}", e.message);
}

#[test]
fn store_options_carry_the_policy() {
    let t = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let o = StoreOptions {
        on_duplicate: Some("skip".into()),
        embedding: Some(vec![0.5, 0.25].into()),
        valid_until: Some(Timestamp(t)),
        ..Default::default()
    }
    .core()
    .unwrap();
    assert_eq!(o.on_duplicate, Some(OnDuplicate::Skip));
    assert_eq!(o.embedding, Some(vec![0.5, 0.25]));
    assert_eq!((o.valid_from, o.valid_until), (None, Some(t)));
    let e = StoreOptions {
        on_duplicate: Some("Keep".into()),
        ..Default::default()
    }
    .core()
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("on_duplicate"));
}

#[test]
fn search_options_build_the_vector_query() {
    let (_, limit, vq) = SearchOptions {
        limit: Some(3),
        embedding: Some(vec![0.5, 0.25].into()),
        fusion: Some("rrf".into()),
        vector_weight: Some(0.2),
        ..Default::default()
    }
    .hybrid()
    .unwrap();
    assert_eq!(limit, 3);
    assert_eq!(vq.embedding, Some(vec![0.5, 0.25]));
    assert_eq!(vq.fusion.method, FusionMethod::Rrf);
    assert_eq!(vq.fusion.vector_weight, 0.2);
    assert_eq!(
        vq.fusion.bm25_weight,
        memstrata::search::DEFAULT_BM25_WEIGHT
    );
    let e = SearchOptions {
        fusion: Some("max".into()),
        ..Default::default()
    }
    .hybrid()
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("fusion"));
}
