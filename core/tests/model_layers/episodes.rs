//! (a) Episodes against a model: record, forget, get, search with filters.

use super::*;

const TAGS: [&str; 3] = ["red", "green", "blue"];
const PEOPLE: [&str; 3] = ["alice", "bob", "carol"];

#[derive(Debug, Clone)]
enum EpOp {
    Record {
        ctx: u8,
        tags: u8,
        people: u8,
        importance: u8,
    },
    Forget {
        ctx: u8,
        pick: u8,
    },
    Get {
        ctx: u8,
        pick: u8,
    },
    Search {
        ctx: u8,
        tags: u8,
        people: u8,
        min_importance: Option<u8>,
        since_secs: Option<u16>,
        /// `Some`: search for the marker word of the picked episode; `None`: empty query.
        marker_of: Option<u8>,
    },
    Advance {
        secs: u8,
    },
    Reopen,
}

/// Importance values, few enough that `min_importance` often equals one recorded.
fn importance() -> impl Strategy<Value = u8> {
    prop_oneof![Just(1u8), 4..=6u8, Just(10u8)]
}

fn ep_op() -> impl Strategy<Value = EpOp> {
    prop_oneof![
        5 => (0..2u8, 0..8u8, 0..8u8, importance())
            .prop_map(|(ctx, tags, people, importance)| EpOp::Record { ctx, tags, people, importance }),
        2 => (0..2u8, any::<u8>()).prop_map(|(ctx, pick)| EpOp::Forget { ctx, pick }),
        2 => (0..2u8, any::<u8>()).prop_map(|(ctx, pick)| EpOp::Get { ctx, pick }),
        5 => (0..2u8, 0..8u8, 0..8u8, proptest::option::of(importance()), proptest::option::weighted(0.3, 0..600u16), proptest::option::weighted(0.5, any::<u8>()))
            .prop_map(|(ctx, tags, people, min_importance, since_secs, marker_of)| EpOp::Search { ctx, tags, people, min_importance, since_secs, marker_of }),
        2 => (0..60u8).prop_map(|secs| EpOp::Advance { secs }),
        1 => Just(EpOp::Reopen),
    ]
}

#[derive(Debug)]
struct EpModel {
    id: String,
    ctx: u8,
    /// Unique marker word in the summary.
    marker: String,
    n: usize,
    tags: Vec<String>,
    people: Vec<String>,
    importance: u8,
    ts_ms: i64,
    live: bool,
}

impl EpModel {
    fn summary(&self) -> String {
        format!("note {} about the work", self.marker)
    }
    fn content(&self) -> Value {
        json!({"n": self.n, "text": format!("content of episode {}", self.n)})
    }
    fn matches(&self, ctx: u8, f: &SearchFilters) -> bool {
        self.live
            && self.ctx == ctx
            && f.tags.iter().all(|t| self.tags.contains(t))
            && (f.participants.is_empty() || f.participants.iter().any(|p| self.people.contains(p)))
            && f.min_importance.is_none_or(|m| self.importance >= m)
            && f.since.is_none_or(|s| self.ts_ms >= s.timestamp_millis())
    }
}

/// An episode picked from every one ever recorded (any context, forgotten or not),
/// or `None` (meaning: an id no episode has) when `pick` lands past the end.
fn pick_ep(eps: &[EpModel], pick: u8) -> Option<&EpModel> {
    eps.get(usize::from(pick) % (eps.len() + 1))
}

fn check_episode(got: &memstrata::episodic::Episode, want: &EpModel) -> Result<(), TestCaseError> {
    prop_assert_eq!(&got.id, &want.id);
    prop_assert_eq!(got.summary.clone(), want.summary());
    prop_assert_eq!(&got.content, &want.content());
    prop_assert_eq!(&got.tags, &want.tags);
    prop_assert_eq!(&got.participants, &want.people);
    prop_assert_eq!(got.importance, want.importance);
    prop_assert_eq!(got.timestamp.timestamp_millis(), want.ts_ms);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]
    #[test]
    fn episodes_match_model(ops in proptest::collection::vec(ep_op(), 1..40)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let limits = Limits::default();
        let mut mem = Some(open(&dir.path(), &clock, &limits, 10));
        let mut eps: Vec<EpModel> = Vec::new();
        let mut now_ms = start().timestamp_millis();
        for op in ops {
            let h = mem.as_ref().unwrap();
            match op {
                EpOp::Record { ctx, tags, people, importance } => {
                    let n = eps.len();
                    let mut m = EpModel {
                        id: String::new(),
                        ctx,
                        marker: format!("mkr{n}z"),
                        n,
                        tags: pick_names(tags, &TAGS),
                        people: pick_names(people, &PEOPLE),
                        importance,
                        ts_ms: now_ms,
                        live: true,
                    };
                    let ep = NewEpisode::new(m.summary())
                        .content(m.content())
                        .tags(m.tags.clone())
                        .participants(m.people.clone())
                        .importance(importance);
                    m.id = h.namespace(ctx_name(ctx)).unwrap().episodic().record(ep).unwrap();
                    eps.push(m);
                }
                EpOp::Forget { ctx, pick } => {
                    let (id, want) = match pick_ep(&eps, pick) {
                        Some(m) => (m.id.clone(), m.live && m.ctx == ctx),
                        None => (MISSING_ID.to_owned(), false),
                    };
                    let got = h.namespace(ctx_name(ctx)).unwrap().episodic().forget(&id).unwrap();
                    prop_assert_eq!(got, want, "forget({}) in {}", id, ctx_name(ctx));
                    if want {
                        eps.iter_mut().find(|m| m.id == id).unwrap().live = false;
                    }
                }
                EpOp::Get { ctx, pick } => {
                    let picked = pick_ep(&eps, pick);
                    let id = picked.map_or(MISSING_ID.to_owned(), |m| m.id.clone());
                    let got = h.namespace(ctx_name(ctx)).unwrap().episodic().get(&id).unwrap();
                    match picked.filter(|m| m.live && m.ctx == ctx) {
                        Some(m) => check_episode(got.as_ref().expect("live episode must be found"), m)?,
                        None => prop_assert!(got.is_none(), "episode {id} must be absent from {}", ctx_name(ctx)),
                    }
                }
                EpOp::Search { ctx, tags, people, min_importance, since_secs, marker_of } => {
                    let filters = SearchFilters {
                        tags: pick_names(tags, &TAGS),
                        participants: pick_names(people, &PEOPLE),
                        min_importance,
                        since: since_secs.map(|s| start() + chrono::Duration::seconds(i64::from(s))),
                        ..SearchFilters::default()
                    };
                    let target = marker_of.and_then(|p| eps.get(usize::from(p) % eps.len().max(1)));
                    let query = target.map_or(String::new(), |m| m.marker.clone());
                    let hits = h.namespace(ctx_name(ctx)).unwrap().episodic().search(&query, &filters, 1000).unwrap();
                    let got: Vec<String> = hits.iter().map(|x| x.episode.id.clone()).collect();
                    let got_set: BTreeSet<String> = got.iter().cloned().collect();
                    prop_assert_eq!(got.len(), got_set.len(), "duplicate hits");
                    let want: BTreeSet<String> = match target {
                        // The marker is unique: at most its episode, if it is live and passes the filters.
                        Some(m) => m.matches(ctx, &filters).then(|| m.id.clone()).into_iter().collect(),
                        None => eps.iter().filter(|m| m.matches(ctx, &filters)).map(|m| m.id.clone()).collect(),
                    };
                    prop_assert_eq!(&got_set, &want, "search {:?} with {:?} in {}", query, filters, ctx_name(ctx));
                    for hit in &hits {
                        let m = eps.iter().find(|m| m.id == hit.episode.id).unwrap();
                        check_episode(&hit.episode, m)?;
                    }
                    if query.is_empty() {
                        // Filter-only searches are newest first.
                        let ts: Vec<i64> = hits.iter().map(|x| x.episode.timestamp.timestamp_millis()).collect();
                        prop_assert!(ts.windows(2).all(|w| w[0] >= w[1]), "not newest first: {ts:?}");
                    }
                }
                EpOp::Advance { secs } => {
                    clock.advance(Duration::from_secs(secs.into()));
                    now_ms += i64::from(secs) * 1000;
                }
                EpOp::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock, &limits, 10));
                }
            }
        }
        // After one more reopen every live episode is readable and searchable, nothing else is.
        drop(mem.take());
        let mem = open(&dir.path(), &clock, &limits, 10);
        for ctx in 0..2u8 {
            let epi = mem.namespace(ctx_name(ctx)).unwrap().episodic();
            let all: BTreeSet<String> = epi.search("", &SearchFilters::default(), 1000).unwrap().into_iter().map(|x| x.episode.id).collect();
            let want: BTreeSet<String> = eps.iter().filter(|m| m.live && m.ctx == ctx).map(|m| m.id.clone()).collect();
            prop_assert_eq!(all, want);
        }
        for m in &eps {
            let epi = mem.namespace(ctx_name(m.ctx)).unwrap().episodic();
            let got = epi.get(&m.id).unwrap();
            prop_assert_eq!(got.is_some(), m.live);
            let found = epi.search(&m.marker, &SearchFilters::default(), 10).unwrap();
            prop_assert_eq!(found.iter().any(|x| x.episode.id == m.id), m.live, "marker {}", m.marker);
        }
    }
}
