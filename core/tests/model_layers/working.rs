//! (b) Working memory against a model: focus / workspace / clear with small capacities, and the
//! clearing done by `switch_context(preserve_current = false)`.

use super::*;

const FOCUS_CAP: usize = 3;
const WORKSPACE_CAP: usize = 4;

#[derive(Debug, Clone)]
enum WmOp {
    Focus { item: u8 },
    Add { val: i64 },
    Clear,
    Get { ctx: u8 },
    Switch { target: u8, preserve: bool },
    Advance { secs: u8 },
    Reopen,
}

fn wm_op() -> impl Strategy<Value = WmOp> {
    prop_oneof![
        5 => (0..6u8).prop_map(|item| WmOp::Focus { item }),
        5 => any::<i64>().prop_map(|val| WmOp::Add { val }),
        1 => Just(WmOp::Clear),
        3 => (0..2u8).prop_map(|ctx| WmOp::Get { ctx }),
        2 => (0..2u8, any::<bool>()).prop_map(|(target, preserve)| WmOp::Switch { target, preserve }),
        2 => (0..30u8).prop_map(|secs| WmOp::Advance { secs }),
        1 => Just(WmOp::Reopen),
    ]
}

#[derive(Debug, Default, Clone)]
struct WmModel {
    focus: Vec<String>,
    /// (id, value, added_at ms)
    workspace: Vec<(String, Value, i64)>,
    /// Whether the context's working-memory record exists (any focus/add since the last clear).
    stored: bool,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn working_memory_matches_model(ops in proptest::collection::vec(wm_op(), 1..40)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let limits = Limits { focus_capacity: FOCUS_CAP, workspace_capacity: WORKSPACE_CAP, ..Limits::default() };
        let mut mem = Some(open(&dir.path(), &clock, &limits, 10));
        let mut m: [WmModel; 2] = Default::default();
        let mut active = 0u8;
        let mut now_ms = start().timestamp_millis();
        for op in ops {
            let h = mem.as_ref().unwrap();
            prop_assert_eq!(h.active_context(), ctx_name(active));
            match op {
                WmOp::Focus { item } => {
                    let item = format!("item{item}");
                    let got = h.working().focus(&item).unwrap();
                    let wm = &mut m[usize::from(active)];
                    let want = !wm.focus.contains(&item);
                    if want {
                        wm.focus.push(item);
                        while wm.focus.len() > FOCUS_CAP {
                            wm.focus.remove(0);
                        }
                        wm.stored = true;
                    }
                    prop_assert_eq!(got, want);
                }
                WmOp::Add { val } => {
                    let id = h.working().add_to_workspace(json!({"val": val})).unwrap();
                    let wm = &mut m[usize::from(active)];
                    prop_assert!(wm.workspace.iter().all(|(i, _, _)| *i != id), "ids are unique");
                    wm.workspace.push((id, json!({"val": val}), now_ms));
                    while wm.workspace.len() > WORKSPACE_CAP {
                        wm.workspace.remove(0);
                    }
                    wm.stored = true;
                }
                WmOp::Clear => {
                    h.working().clear().unwrap();
                    m[usize::from(active)] = WmModel::default();
                }
                WmOp::Get { ctx } => {
                    let w = h.namespace(ctx_name(ctx)).unwrap().working();
                    let wm = &m[usize::from(ctx)];
                    prop_assert_eq!(w.current_focus().unwrap(), wm.focus.clone());
                    let items: Vec<(String, Value, i64)> = w.workspace_items().unwrap().into_iter()
                        .map(|i| (i.id, i.value, i.added_at.timestamp_millis())).collect();
                    prop_assert_eq!(&items, &wm.workspace);
                    let values: Vec<Value> = wm.workspace.iter().map(|(_, v, _)| v.clone()).collect();
                    prop_assert_eq!(w.workspace().unwrap(), values);
                }
                WmOp::Switch { target, preserve } => {
                    let r = h.switch_context(ctx_name(target), preserve).unwrap();
                    prop_assert_eq!(r.previous_context, ctx_name(active));
                    if !preserve && target != active {
                        m[usize::from(active)] = WmModel::default();
                    }
                    // Only working memory is written in this test, so "holds data" = has a record.
                    prop_assert_eq!(r.context_loaded, m[usize::from(target)].stored);
                    active = target;
                }
                WmOp::Advance { secs } => {
                    clock.advance(Duration::from_secs(secs.into()));
                    now_ms += i64::from(secs) * 1000;
                }
                WmOp::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock, &limits, 10));
                    // A new handle starts in the default context; working memory persists.
                    active = 0;
                }
            }
        }
        drop(mem.take());
        let mem = open(&dir.path(), &clock, &limits, 10);
        for ctx in 0..2u8 {
            let w = mem.namespace(ctx_name(ctx)).unwrap().working();
            let wm = &m[usize::from(ctx)];
            prop_assert_eq!(w.current_focus().unwrap(), wm.focus.clone());
            let ids: Vec<String> = w.workspace_items().unwrap().into_iter().map(|i| i.id).collect();
            prop_assert_eq!(ids, wm.workspace.iter().map(|(i, _, _)| i.clone()).collect::<Vec<_>>());
        }
    }
}
