//! Contexts: TTL under the injected clock, switching with and without working memory.

use super::*;

#[test]
fn context_store_ttl_follows_the_injected_clock() {
    let dir = common::tempdir();
    let (mem, clock) = open(&dir.path());
    let stored = mem
        .contexts()
        .store(
            "k",
            json!({"v": 1}),
            Some(Duration::from_secs(60)),
            Some("proj"),
        )
        .unwrap();
    let expires = stored.expires_at.unwrap();
    assert_eq!(expires - clock_now(&clock), chrono::Duration::seconds(60));
    mem.contexts().store("plain", json!(2), None, None).unwrap();

    let got = mem.contexts().retrieve("k", Some("proj")).unwrap().unwrap();
    assert_eq!(got.value, json!({"v": 1}));
    assert_eq!(got.expires_at, Some(expires));
    assert!(
        mem.contexts().retrieve("k", None).unwrap().is_none(),
        "other context"
    );
    // It is the short-term layer of that context.
    assert_eq!(
        mem.namespace("proj")
            .unwrap()
            .short_term()
            .retrieve("k")
            .unwrap(),
        Some(json!({"v": 1}))
    );

    clock.advance(Duration::from_secs(59));
    assert!(
        mem.contexts()
            .retrieve("k", Some("proj"))
            .unwrap()
            .is_some()
    );
    clock.advance(Duration::from_secs(2));
    assert!(
        mem.contexts()
            .retrieve("k", Some("proj"))
            .unwrap()
            .is_none(),
        "expired after the TTL"
    );
    let plain = mem.contexts().retrieve("plain", None).unwrap().unwrap();
    assert_eq!(plain.expires_at, None);

    let err = mem
        .contexts()
        .store("k", json!(1), None, Some("bad name!"))
        .unwrap_err();
    assert!(is_invalid(&err, "namespace"), "{err}");
    assert!(is_invalid(
        &mem.contexts().retrieve("k", Some("")).unwrap_err(),
        "namespace"
    ));
    assert!(is_invalid(
        &mem.contexts()
            .store("k", json!(1), Some(Duration::ZERO), None)
            .unwrap_err(),
        "ttl"
    ));
}

#[test]
fn switch_context_clears_or_keeps_working_memory() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    mem.working().focus("default-item").unwrap();
    mem.working().add_to_workspace(json!({"w": 1})).unwrap();

    let r = mem.switch_context("proj", false).unwrap();
    assert_eq!(r.previous_context, "default");
    assert!(!r.context_loaded, "proj held no data");
    assert_eq!(mem.active_context(), "proj");
    mem.working().focus("proj-item").unwrap();
    mem.contexts().store("pk", json!(1), None, None).unwrap();

    // preserve_current = true keeps proj's working memory for the return.
    let r = mem.switch_context("default", true).unwrap();
    assert_eq!(r.previous_context, "proj");
    assert!(
        mem.working().current_focus().unwrap().is_empty(),
        "default's working memory was cleared on leaving"
    );
    assert!(mem.working().workspace().unwrap().is_empty());
    let r = mem.switch_context("proj", true).unwrap();
    assert!(r.context_loaded, "proj holds data now");
    assert_eq!(
        mem.working().current_focus().unwrap(),
        vec!["proj-item".to_owned()]
    );
    assert_eq!(
        mem.contexts().retrieve("pk", None).unwrap().unwrap().value,
        json!(1)
    );
    assert!(mem.contexts().list().unwrap().contains(&"proj".to_owned()));
    assert!(is_invalid(
        &mem.switch_context("no spaces", true).unwrap_err(),
        "target_context"
    ));
}
