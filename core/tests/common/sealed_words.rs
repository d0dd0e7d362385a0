//! The distinctive words of the sealed-store scans (`sealed_keys.rs` on sled,
//! `pg_sealed.rs` on PostgreSQL): one per place a user's text can go, written
//! through every layer, and the listings and lookups that must still answer.
#![allow(dead_code)]

use memstrata::episodic::OnDuplicate;
use memstrata::{EncryptionKey, Memory, NewEpisode, SearchFilters, procedural::Step};
use serde_json::json;

/// One distinctive word per place the issue lists.
pub const CONTEXT: &str = "CtxQuokkaName";
pub const SUMMARY: &str = "SummaryNarwhalWord";
pub const CONTENT: &str = "ContentOcelotWord";
pub const PARTICIPANT: &str = "ParticipantPangolin";
pub const TAG: &str = "TagWombatWord";
pub const KNOWLEDGE_KEY: &str = "KeyAxolotlName";
pub const KNOWLEDGE_VALUE: &str = "ValueCapybaraText";
pub const SHORT_KEY: &str = "StKeyTapirName";
pub const SHORT_VALUE: &str = "StValueMarmotText";
pub const SESSION_NAME: &str = "SessionNameIbex";
pub const SESSION_CONTENT: &str = "SessionLemurText";
pub const PROCEDURE: &str = "ProcNameGecko";
pub const FOCUS: &str = "FocusHeronText";
pub const TASK: &str = "TaskBisonText";

pub const WORDS: [&str; 14] = [
    CONTEXT,
    SUMMARY,
    CONTENT,
    PARTICIPANT,
    TAG,
    KNOWLEDGE_KEY,
    KNOWLEDGE_VALUE,
    SHORT_KEY,
    SHORT_VALUE,
    SESSION_NAME,
    SESSION_CONTENT,
    PROCEDURE,
    FOCUS,
    TASK,
];

pub fn key() -> EncryptionKey {
    EncryptionKey::new([42; 32])
}

/// Write every word, in the context named [`CONTEXT`] and in the default one.
pub fn write_words(mem: &Memory) -> String {
    let mut ids = Vec::new();
    for ctx in [CONTEXT, "default"] {
        mem.switch_context(ctx, true).unwrap();
        if ctx == CONTEXT {
            mem.contexts()
                .set_on_duplicate(OnDuplicate::Merge, None)
                .unwrap();
        }
        let id = mem
            .episodic()
            .record(
                NewEpisode::new(format!("meeting {SUMMARY} today"))
                    .content(json!({"detail": CONTENT}))
                    .participants([PARTICIPANT])
                    .tags([TAG])
                    .embedding(vec![0.5, 0.25, 0.125]),
            )
            .unwrap();
        ids.push(id);
        let kk = format!("user:{KNOWLEDGE_KEY}");
        mem.semantic()
            .store(&kk, json!({"text": KNOWLEDGE_VALUE}))
            .unwrap();
        mem.semantic()
            .update(&kk, json!({"text": KNOWLEDGE_VALUE, "v": 2}))
            .unwrap();
        mem.short_term()
            .store(SHORT_KEY, json!({"note": SHORT_VALUE}), None)
            .unwrap();
        mem.working().focus(FOCUS).unwrap();
        let mut step = Step::new("one", "set");
        step.parameters = json!({"out": 1});
        mem.procedural().learn(PROCEDURE, vec![step]).unwrap();
        mem.procedural()
            .execute(PROCEDURE, json!({}), &memstrata::procedural::Actions::new())
            .unwrap();
    }
    let sid = mem
        .sessions()
        .create(SESSION_NAME, json!({}))
        .unwrap()
        .session_id;
    mem.sessions()
        .save(&sid, json!({"state": SESSION_CONTENT}), 1)
        .unwrap();
    mem.timesheet().punch_in("llm", TASK, None, None).unwrap();
    mem.flush().unwrap();
    ids.remove(0)
}

/// Every listing and lookup of the written words answers.
pub fn check_words(mem: &Memory, ctx_episode: &str) {
    assert!(mem.contexts().list().unwrap().contains(&CONTEXT.to_owned()));
    for ctx in [CONTEXT, "default"] {
        let r = mem.switch_context(ctx, true).unwrap();
        assert!(r.context_loaded, "{ctx} has data");
        let kk = format!("user:{KNOWLEDGE_KEY}");
        assert_eq!(mem.semantic().keys("user:").unwrap(), vec![kk.clone()]);
        assert_eq!(mem.semantic().keys("user:KeyAx").unwrap(), vec![kk.clone()]);
        assert!(mem.semantic().keys("user:Z").unwrap().is_empty());
        assert_eq!(mem.semantic().history(&kk).unwrap().len(), 2);
        assert_eq!(
            mem.semantic().retrieve(&kk).unwrap(),
            Some(json!({"text": KNOWLEDGE_VALUE, "v": 2}))
        );
        assert_eq!(mem.short_term().keys("StKey").unwrap(), vec![SHORT_KEY]);
        assert_eq!(
            mem.short_term().retrieve(SHORT_KEY).unwrap(),
            Some(json!({"note": SHORT_VALUE}))
        );
        assert_eq!(mem.procedural().list().unwrap(), vec![PROCEDURE]);
        assert_eq!(mem.working().current_focus().unwrap(), vec![FOCUS]);
        let hits = mem
            .episodic()
            .search(SUMMARY, &SearchFilters::default(), 5)
            .unwrap();
        assert_eq!(hits.len(), 1, "one episode per context");
    }
    mem.switch_context(CONTEXT, true).unwrap();
    let ep = mem.episodic().get(ctx_episode).unwrap().unwrap();
    assert_eq!(ep.participants, vec![PARTICIPANT]);
    assert_eq!(ep.tags, vec![TAG]);
    // Merge policy of the context: a duplicate is merged, not added.
    mem.episodic()
        .record(
            NewEpisode::new(format!("meeting {SUMMARY} today")).content(json!({"detail": CONTENT})),
        )
        .unwrap();
    let sessions = mem.sessions().list().unwrap();
    assert!(sessions.iter().any(|s| s.name == SESSION_NAME));
    let sid = &sessions[0].session_id;
    assert_eq!(
        mem.sessions().restore(sid, None).unwrap().content,
        json!({"state": SESSION_CONTENT})
    );
}
