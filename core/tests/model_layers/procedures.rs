//! (d) Procedures against an interpreter: random small valid graphs of `set` / `fail` / host-action
//! steps with CEL branches, executed (and resumed) and compared with a tiny interpreter of the
//! documented semantics.

use super::*;

const MAX_STEPS: usize = 12;

#[derive(Debug, Clone)]
enum Act {
    /// `set {"v": k}`
    Lit(i64),
    /// `set {"v": "{{ params.x + k }}", "note": "x={{ params.x }} at <id>"}`
    Tpl(i64),
    /// `fail {"message": "boom at <id>"}`
    Fail,
    /// An action no handler takes: the run pauses until `resume`.
    Ask,
}

#[derive(Debug, Clone)]
enum Cond {
    XGt(i64),
    LastEq(i64),
    True,
    Flag,
    NotFlagXLe(i64),
}

#[derive(Debug, Clone)]
enum GenNext {
    End,
    To(usize),
    Br(Vec<(Cond, usize)>),
}

#[derive(Debug, Clone)]
struct GenStep {
    act: Act,
    next: GenNext,
}

type Graph = Vec<GenStep>;

fn cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        (0..6i64).prop_map(Cond::XGt),
        (0..8i64).prop_map(Cond::LastEq),
        Just(Cond::True),
        Just(Cond::Flag),
        (0..6i64).prop_map(Cond::NotFlagXLe),
    ]
}

fn graph() -> impl Strategy<Value = Graph> {
    (1..=5usize).prop_flat_map(|n| {
        let act = prop_oneof![
            4 => (0..8i64).prop_map(Act::Lit),
            4 => (0..4i64).prop_map(Act::Tpl),
            1 => Just(Act::Fail),
            1 => Just(Act::Ask),
        ];
        let next = prop_oneof![
            2 => Just(GenNext::End),
            3 => (0..n).prop_map(GenNext::To),
            4 => proptest::collection::vec((cond(), 0..n), 1..=3).prop_map(GenNext::Br),
        ];
        proptest::collection::vec((act, next).prop_map(|(act, next)| GenStep { act, next }), n)
    })
}

fn sid(i: usize) -> String {
    format!("s{i}")
}

fn cond_src(c: &Cond) -> String {
    match c {
        Cond::XGt(k) => format!("params.x > {k}"),
        Cond::LastEq(k) => format!("last.v == {k}"),
        Cond::True => "true".to_owned(),
        Cond::Flag => "params.flag".to_owned(),
        Cond::NotFlagXLe(k) => format!("!params.flag && params.x <= {k}"),
    }
}

fn to_steps(g: &Graph) -> Vec<Step> {
    g.iter()
        .enumerate()
        .map(|(i, s)| {
            let (action, parameters) = match &s.act {
                Act::Lit(k) => ("set", json!({"v": k})),
                Act::Tpl(k) => ("set", json!({"v": format!("{{{{ params.x + {k} }}}}"), "note": format!("x={{{{ params.x }}}} at {}", sid(i))})),
                Act::Fail => ("fail", json!({"message": format!("boom at {}", sid(i))})),
                Act::Ask => ("ask_human", json!({"question": format!("what next after {}?", sid(i))})),
            };
            let mut step = Step::new(sid(i), action).parameters(parameters);
            step.next = match &s.next {
                GenNext::End => None,
                GenNext::To(j) => Some(Next::Step(sid(*j))),
                GenNext::Br(bs) => Some(Next::Branches(bs.iter().map(|(c, j)| Branch::new(cond_src(c), sid(*j))).collect())),
            };
            step
        })
        .collect()
}

/// The interpreter's view of one run.
#[derive(Debug, Clone)]
struct RunModel {
    graph: Graph,
    x: i64,
    flag: bool,
    status: RunStatus,
    trace: Vec<String>,
    outputs: Map<String, Value>,
    last: Value,
    executed: u64,
    /// The paused step (awaiting_action).
    paused_at: Option<usize>,
    error: Option<String>,
}

impl RunModel {
    fn new(graph: Graph, x: i64, flag: bool) -> Self {
        RunModel {
            graph,
            x,
            flag,
            status: RunStatus::Running,
            trace: Vec::new(),
            outputs: Map::new(),
            last: Value::Null,
            executed: 0,
            paused_at: None,
            error: None,
        }
    }

    fn holds(&self, c: &Cond) -> bool {
        match c {
            Cond::XGt(k) => self.x > *k,
            Cond::LastEq(k) => self.last["v"] == json!(k),
            Cond::True => true,
            Cond::Flag => self.flag,
            Cond::NotFlagXLe(k) => !self.flag && self.x <= *k,
        }
    }

    /// Record `out` as step `i`'s output and pick the next step.
    fn done(&mut self, i: usize, out: Value) -> Option<usize> {
        self.trace.push(sid(i));
        self.outputs.insert(sid(i), out.clone());
        self.last = out;
        match &self.graph[i].next {
            GenNext::End => None,
            GenNext::To(j) => Some(*j),
            GenNext::Br(bs) => bs.iter().find(|(c, _)| self.holds(c)).map(|(_, j)| *j),
        }
    }

    /// Run from step `at` until the run ends or pauses.
    fn drive(&mut self, mut at: Option<usize>) {
        self.status = RunStatus::Running;
        self.paused_at = None;
        loop {
            let Some(i) = at else {
                self.status = RunStatus::Completed;
                return;
            };
            if self.executed >= MAX_STEPS as u64 {
                self.status = RunStatus::Failed;
                self.error = Some("step limit".to_owned());
                return;
            }
            self.executed += 1;
            at = match self.graph[i].act {
                Act::Lit(k) => self.done(i, json!({"v": k})),
                Act::Tpl(k) => {
                    let out =
                        json!({"v": self.x + k, "note": format!("x={} at {}", self.x, sid(i))});
                    self.done(i, out)
                }
                Act::Fail => {
                    self.trace.push(sid(i));
                    self.status = RunStatus::Failed;
                    self.error = Some(format!("boom at {}", sid(i)));
                    return;
                }
                Act::Ask => {
                    self.status = RunStatus::AwaitingAction;
                    self.paused_at = Some(i);
                    return;
                }
            };
        }
    }

    fn resume(&mut self, out: Value) {
        let i = self.paused_at.expect("paused");
        let next = self.done(i, out);
        self.drive(next);
    }
}

fn check_run(
    h: &Memory,
    run: &memstrata::procedural::Run,
    m: &RunModel,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(run.status, m.status, "run {:?}: {:?}", run.error, m);
    let steps: Vec<String> = run.trace.iter().map(|t| t.step.clone()).collect();
    prop_assert_eq!(&steps, &m.trace);
    prop_assert_eq!(&run.outputs, &m.outputs);
    prop_assert_eq!(run.steps_executed, m.executed);
    match (&m.error, &run.error) {
        (None, got) => prop_assert!(got.is_none(), "unexpected error {got:?}"),
        (Some(want), got) if want == "step limit" => {
            prop_assert!(
                got.as_deref().is_some_and(|g| g.contains("step limit")),
                "{got:?}"
            )
        }
        (Some(want), got) => prop_assert_eq!(got.as_deref(), Some(want.as_str())),
    }
    match m.paused_at {
        Some(i) => {
            let p = run.pending.as_ref().expect("pending step");
            prop_assert_eq!(p.step.clone(), sid(i));
            prop_assert_eq!(p.action.as_str(), "ask_human");
        }
        None => prop_assert!(run.pending.is_none()),
    }
    if m.status == RunStatus::Completed || m.status == RunStatus::Failed {
        // A finished run is recorded as an episode tagged `procedure`.
        let eid = run
            .episode_id
            .as_deref()
            .expect("finished run has an episode");
        let ep = h
            .namespace(&run.context)
            .unwrap()
            .episodic()
            .get(eid)
            .unwrap()
            .expect("run episode");
        prop_assert!(ep.tags.iter().any(|t| t == "procedure"));
    } else {
        prop_assert!(run.episode_id.is_none());
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum PrOp {
    Learn { graph: Graph },
    Update { pick: u8, graph: Graph },
    Execute { pick: u8, x: i64, flag: bool },
    Resume { pick: u8, v: i64 },
    Reopen,
}

fn pr_op() -> impl Strategy<Value = PrOp> {
    prop_oneof![
        3 => graph().prop_map(|graph| PrOp::Learn { graph }),
        1 => (any::<u8>(), graph()).prop_map(|(pick, graph)| PrOp::Update { pick, graph }),
        6 => (any::<u8>(), -3..8i64, any::<bool>()).prop_map(|(pick, x, flag)| PrOp::Execute { pick, x, flag }),
        3 => (any::<u8>(), 0..8i64).prop_map(|(pick, v)| PrOp::Resume { pick, v }),
        1 => Just(PrOp::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn procedures_match_interpreter(ops in proptest::collection::vec(pr_op(), 1..30)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let limits = Limits { max_steps: MAX_STEPS, ..Limits::default() };
        let mut mem = Some(open(&dir.path(), &clock, &limits, 10));
        let no_actions = Actions::new();
        // name -> (graph, version)
        let mut procs: Vec<(String, Graph, u64)> = Vec::new();
        // run id -> model
        let mut runs: Vec<(String, RunModel)> = Vec::new();
        for op in ops {
            let h = mem.as_ref().unwrap();
            let p = h.procedural();
            match op {
                PrOp::Learn { graph } => {
                    let name = format!("proc{}", procs.len());
                    let got = p.learn(&name, to_steps(&graph)).unwrap();
                    prop_assert_eq!(got.version, 1);
                    prop_assert_eq!(&got.steps, &to_steps(&graph));
                    // Learning an existing name is a conflict and changes nothing.
                    if let Some((first, _, _)) = procs.first() {
                        let r = p.learn(first, to_steps(&graph));
                        prop_assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
                    }
                    procs.push((name, graph, 1));
                }
                PrOp::Update { pick, graph } => {
                    let i = usize::from(pick) % (procs.len() + 1);
                    match procs.get_mut(i) {
                        Some((name, g, version)) => {
                            let got = p.update(name, to_steps(&graph)).unwrap();
                            *version += 1;
                            *g = graph;
                            prop_assert_eq!(got.version, *version);
                        }
                        None => {
                            let r = p.update("no-such-procedure", to_steps(&graph));
                            prop_assert!(is_not_found(&r), "{r:?}");
                        }
                    }
                }
                PrOp::Execute { pick, x, flag } => {
                    let i = usize::from(pick) % (procs.len() + 1);
                    match procs.get(i) {
                        Some((name, g, version)) => {
                            let run = p.execute(name, json!({"x": x, "flag": flag}), &no_actions).unwrap();
                            prop_assert_eq!(run.procedure_version, *version);
                            let mut m = RunModel::new(g.clone(), x, flag);
                            m.drive(Some(0));
                            check_run(h, &run, &m)?;
                            runs.push((run.run_id, m));
                        }
                        None => {
                            let r = p.execute("no-such-procedure", json!({"x": x}), &no_actions);
                            prop_assert!(is_not_found(&r), "{r:?}");
                        }
                    }
                }
                PrOp::Resume { pick, v } => {
                    if runs.is_empty() {
                        continue;
                    }
                    let i = usize::from(pick) % runs.len();
                    let (run_id, m) = &mut runs[i];
                    let r = p.resume(run_id, json!({"v": v}), &no_actions);
                    if m.status == RunStatus::AwaitingAction {
                        // The run keeps the steps it started with, whatever `update` did since.
                        m.resume(json!({"v": v}));
                        check_run(h, &r.unwrap(), m)?;
                    } else {
                        prop_assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
                    }
                    // The stored run reads back the same.
                    let stored = p.run(run_id).unwrap().expect("stored run");
                    check_run(h, &stored, m)?;
                }
                PrOp::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock, &limits, 10));
                }
            }
        }
        drop(mem.take());
        let mem = open(&dir.path(), &clock, &limits, 10);
        let p = mem.procedural();
        prop_assert_eq!(p.list().unwrap(), { let mut n: Vec<String> = procs.iter().map(|(n, _, _)| n.clone()).collect(); n.sort(); n });
        for (run_id, m) in &runs {
            check_run(&mem, &p.run(run_id).unwrap().expect("stored run"), m)?;
        }
    }
}
