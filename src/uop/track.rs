//! Recording for VIZ (tinygrad's `TrackedGraphRewrite` and `track_rewrites`), on with `VIZ` or
//! `TRACK_MATCH_STATS=2`. In: each [`super::graph_rewrite`] call (its pass name, caller, nesting depth, input root),
//! every match it makes in order (before, after, the rule, time taken), its output or the panic that ended it; the
//! groups the engine opens (`Schedule N Kernels`, one per kernel) and each kernel's source and linear UOps. Out: a
//! [`Trace`]: nodes interned once in one table, ids in order of first appearance (the same program records the same
//! ids on every run), groups holding their steps. Off, a rewrite pays one setting read.

use super::{Arg, Ops, Rule, UOp};
use crate::helpers::{TRACK_MATCH_STATS, VIZ};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Whether this thread records rewrites: `VIZ` nonzero or `TRACK_MATCH_STATS` 2 or more.
pub fn enabled() -> bool {
    VIZ.value() != 0 || TRACK_MATCH_STATS.value() >= 2
}

/// An interned node: its op, dtype, arg and tag as text, its sources by id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    /// The op.
    pub op: Ops,
    /// The dtype as printed (`dtypes.float`).
    pub dtype: String,
    /// The arg as a label ("" for none).
    pub arg: String,
    /// The UOp's tag.
    pub tag: Option<u32>,
    /// Sources, by id.
    pub src: Vec<u32>,
}

/// A rule that matched: where it was written and its text as written (captured by [`crate::pm!`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleInfo {
    /// `file:line:column` of the rule.
    pub loc: String,
    /// The rule as written ("" for one not built by `pm!`).
    pub text: String,
}

/// One match of a rewrite: node `before` became `after` by rule `rule` (an index into [`Trace::rules`]) in `ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    /// The node the rule matched.
    pub before: u32,
    /// What the rule made of it.
    pub after: u32,
    /// The rule, an index into [`Trace::rules`].
    pub rule: u32,
    /// The rule's time, nanoseconds.
    pub ns: u64,
}

/// One `graph_rewrite` call.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The pass's name (`graph_rewrite`'s `name`).
    pub name: String,
    /// The caller's `file:line`.
    pub loc: String,
    /// 0 for a rewrite called outside any rewrite; 1 for one a rule called, and so on.
    pub depth: u32,
    /// The input root.
    pub sink: u32,
    /// The output root; `None` when the rewrite panicked.
    pub out: Option<u32>,
    /// The matches, in the order they were made.
    pub matches: Vec<Match>,
    /// The panic's message, for a rewrite that panicked (a rule that failed).
    pub error: Option<String>,
}

/// A kernel as the renderer printed it, and its linear UOps (one line each).
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// The kernel's function name.
    pub name: String,
    /// The device it was rendered for.
    pub device: String,
    /// The rendered source.
    pub src: String,
    /// Its linear UOps, a line each (the PYTHON renderer's listing).
    pub uops: Vec<String>,
}

/// A group of steps (tinygrad's tracked context): a schedule, a kernel, or the rewrites made from one caller
/// outside both.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `Schedule N Kernels`, the kernel's name, or the caller's `file:line`.
    pub name: String,
    /// Where the group was opened (`file:line`).
    pub loc: String,
    /// Its rewrites, in the order they began.
    pub steps: Vec<Step>,
    /// The kernel it compiled, for a kernel's group.
    pub kernel: Option<Kernel>,
    /// For a schedule: the kernels it launched, in order, each with the group that recorded its compile (none for
    /// a kernel compiled before recording began).
    pub calls: Vec<(String, Option<u32>)>,
}

/// Everything recorded so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Nodes by id.
    pub nodes: Vec<Node>,
    /// The rules that matched, by id.
    pub rules: Vec<RuleInfo>,
    /// The groups, in the order they were opened.
    pub groups: Vec<Group>,
}

#[derive(Default)]
struct Recorder {
    trace: Trace,
    node_ids: FxHashMap<UOp, u32>,
    rule_ids: FxHashMap<(usize, &'static str), u32>,
    /// Groups of rewrites made outside any open group, by caller.
    by_caller: FxHashMap<String, usize>,
}

static REC: Mutex<Option<Recorder>> = Mutex::new(None);
/// Bumped by [`take`]: a [`GroupRef`] from before it names a group of a trace that is gone.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A group of the trace being recorded (its index in [`Trace::groups`]), as a kernel compiled under it remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRef {
    epoch: u64,
    idx: usize,
}

impl GroupRef {
    /// The group's index in the trace being recorded; None once [`take`] has ended that trace.
    pub fn index(self) -> Option<usize> {
        (self.epoch == EPOCH.load(Relaxed)).then_some(self.idx)
    }
}

thread_local! {
    /// This thread's open groups, innermost last.
    static OPEN: RefCell<Vec<GroupRef>> = const { RefCell::new(Vec::new()) };
    /// The groups of this thread's rewrites in progress, innermost last: a rewrite a rule calls joins its caller's.
    static ACTIVE: RefCell<Vec<GroupRef>> = const { RefCell::new(Vec::new()) };
}

fn with<R>(f: impl FnOnce(&mut Recorder) -> R) -> R {
    f(REC.lock().get_or_insert_with(Recorder::default))
}

/// `f` on group `g` of the trace being recorded, unless `g` is of an earlier one.
fn with_group<R>(g: GroupRef, f: impl FnOnce(&mut Recorder, usize) -> R) -> Option<R> {
    let mut rec = REC.lock();
    (g.epoch == EPOCH.load(Relaxed)).then(|| f(rec.get_or_insert_with(Recorder::default), g.idx))
}

fn group_ref(idx: usize) -> GroupRef {
    GroupRef { epoch: EPOCH.load(Relaxed), idx }
}

/// `arg` as a label.
fn arg_text(arg: &Arg) -> String {
    match arg {
        Arg::None => String::new(),
        Arg::Const(c) => c.to_string(),
        Arg::Int(i) => i.to_string(),
        Arg::Range(id, t) => format!("{id} {t:?}"),
        Arg::Ints(v) => format!("{v:?}"),
        Arg::Sints(v) => format!("{v:?}"),
        Arg::Var { name, min, max } => format!("{name}[{min}, {max}]"),
        Arg::Str(s) => s.to_string(),
        Arg::Op(op) => format!("{op:?}"),
        Arg::ReduceAxis(op, axes) => format!("{op:?} {axes:?}"),
        Arg::Buffer(b) => format!("{b:?}"),
    }
}

impl Recorder {
    /// The id of `u`, interning it and whatever of its graph is new.
    fn intern(&mut self, u: &UOp) -> u32 {
        if let Some(&id) = self.node_ids.get(u) {
            return id;
        }
        let mut stack = vec![(u.clone(), false)];
        while let Some((n, ready)) = stack.pop() {
            if self.node_ids.contains_key(&n) {
                continue;
            }
            if ready {
                let src = n.src.iter().map(|s| self.node_ids[s]).collect();
                let node = Node { op: n.op, dtype: n.dtype.to_string(), arg: arg_text(&n.arg), tag: n.tag, src };
                self.node_ids.insert(n, self.trace.nodes.len() as u32);
                self.trace.nodes.push(node);
            } else {
                stack.push((n.clone(), true));
                stack.extend(n.src.iter().rev().filter(|s| !self.node_ids.contains_key(*s)).map(|s| (s.clone(), false)));
            }
        }
        self.node_ids[u]
    }

    fn group(&mut self, name: String, loc: String) -> usize {
        self.trace.groups.push(Group { name, loc, steps: vec![], kernel: None, calls: vec![] });
        self.trace.groups.len() - 1
    }
}

/// An open group; steps recorded on this thread go to it until it drops.
pub struct GroupGuard(Option<GroupRef>);

/// Opens a group named `name` (made only when recording), at the caller's location.
#[track_caller]
pub fn group(name: impl FnOnce() -> String) -> GroupGuard {
    if !enabled() {
        return GroupGuard(None);
    }
    let (name, loc) = (name(), Location::caller().to_string());
    let g = with(|r| group_ref(r.group(name, loc)));
    OPEN.with(|o| o.borrow_mut().push(g));
    GroupGuard(Some(g))
}

impl GroupGuard {
    /// The group, when recording.
    pub fn index(&self) -> Option<GroupRef> {
        self.0
    }
    /// Renames the group (a schedule's kernel count, a kernel's name: known only at its end).
    pub fn rename(&self, name: impl FnOnce() -> String) {
        if let Some(g) = self.0 {
            let name = name();
            with_group(g, |r, i| r.trace.groups[i].name = name);
        }
    }
    /// Attaches the kernel the group made.
    pub fn kernel(&self, k: impl FnOnce() -> Kernel) {
        if let Some(g) = self.0 {
            let k = k();
            with_group(g, |r, i| r.trace.groups[i].kernel = Some(k));
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(g) = self.0 {
            OPEN.with(|o| o.borrow_mut().retain(|&x| x != g));
        }
    }
}

/// Records that schedule group `g` (when recording) launched the kernel `k` gives: its name and the group that
/// recorded its compile (none for a kernel compiled before this trace began).
pub fn call(g: Option<GroupRef>, k: impl FnOnce() -> (String, Option<GroupRef>)) {
    if let Some(g) = g {
        let (name, ctx) = k();
        let ctx = ctx.and_then(GroupRef::index).map(|c| c as u32);
        with_group(g, |r, i| r.trace.groups[i].calls.push((name, ctx)));
    }
}

/// A step being recorded: its group and index.
pub(super) struct StepRef(GroupRef, usize);

/// Starts recording a rewrite of `sink` by pass `name` called at `loc`, when recording.
pub(super) fn begin(name: &str, loc: &'static Location<'static>, sink: &UOp) -> Option<StepRef> {
    if !enabled() {
        return None;
    }
    let (depth, active) = ACTIVE.with(|a| (a.borrow().len() as u32, a.borrow().last().copied()));
    let open = active.or_else(|| OPEN.with(|o| o.borrow().last().copied())).and_then(GroupRef::index);
    let step = with(|r| {
        let g = open.unwrap_or_else(|| {
            let key = format!("{}:{}", loc.file(), loc.line());
            *r.by_caller.entry(key.clone()).or_insert_with(|| {
                r.trace.groups.push(Group { name: key.clone(), loc: key, steps: vec![], kernel: None, calls: vec![] });
                r.trace.groups.len() - 1
            })
        });
        let sink = r.intern(sink);
        let step = Step { name: name.into(), loc: loc.to_string(), depth, sink, out: None, matches: vec![], error: None };
        r.trace.groups[g].steps.push(step);
        StepRef(group_ref(g), r.trace.groups[g].steps.len() - 1)
    });
    ACTIVE.with(|a| a.borrow_mut().push(step.0));
    Some(step)
}

/// Records that `rule` rewrote `before` to `after` in `ns` nanoseconds.
pub(super) fn matched<C>(s: &StepRef, before: &UOp, after: &UOp, rule: &Rule<C>, ns: u64) {
    with_group(s.0, |r, g| {
        let key = (rule.location as *const Location as usize, rule.text);
        let next = r.rule_ids.len() as u32;
        let id = *r.rule_ids.entry(key).or_insert(next);
        if id == next {
            r.trace.rules.push(RuleInfo { loc: rule.location.to_string(), text: rule.text.to_string() });
        }
        let (before, after) = (r.intern(before), r.intern(after));
        r.trace.groups[g].steps[s.1].matches.push(Match { before, after, rule: id, ns });
    });
}

/// Ends the step: its output, or the message of the panic that ended it.
pub(super) fn end(s: StepRef, out: Result<&UOp, String>) {
    ACTIVE.with(|a| a.borrow_mut().pop());
    with_group(s.0, |r, g| {
        let out = out.map(|u| r.intern(u));
        let step = &mut r.trace.groups[g].steps[s.1];
        match out {
            Ok(id) => step.out = Some(id),
            Err(e) => step.error = Some(e),
        }
    });
}

/// A copy of everything recorded so far.
pub fn trace() -> Trace {
    with(|r| r.trace.clone())
}

/// Everything recorded so far, which is then forgotten (node ids start again from 0; groups and steps still open
/// record nothing more).
pub fn take() -> Trace {
    let mut rec = REC.lock();
    EPOCH.fetch_add(1, Relaxed);
    rec.take().map(|r| r.trace).unwrap_or_default()
}

/// Replays `matches` on the graph of `sink` (ids into `nodes`): each node rebuilt on its sources' replays, then
/// replaced by what a match turned it into, until none applies (tinygrad's `substitute` over a step's
/// replacements). Nodes the replay makes that `nodes` lacks are pushed to `extra`, numbered on from `nodes.len()`;
/// `out` is the step's recorded output if any. Returns the replayed root: replaying all of a step's matches gives its
/// output (`tests/viz.rs` checks it).
///
/// # Errors
/// When the matches cycle (a runaway rewrite's step, or a damaged file): a node's replacement needs the node itself.
///
/// # Panics
/// If an id is not in `nodes` (a loaded trace checks its ids).
pub fn replay(nodes: &[Node], extra: &mut Vec<Node>, sink: u32, out: Option<u32>, matches: &[Match]) -> Result<u32, String> {
    let base = nodes.len() as u32;
    let get = |extra: &Vec<Node>, i: u32| if i < base { nodes[i as usize].clone() } else { extra[(i - base) as usize].clone() };
    // the nodes a rebuilt node can equal: the graphs of the input, the output and every match
    let mut index: FxHashMap<Node, u32> = FxHashMap::default();
    let mut stack: Vec<u32> = [sink].into_iter().chain(out).chain(matches.iter().flat_map(|m| [m.before, m.after])).collect();
    while let Some(i) = stack.pop() {
        if let std::collections::hash_map::Entry::Vacant(e) = index.entry(get(extra, i)) {
            stack.extend(&e.key().src);
            e.insert(i);
        }
    }
    let replace: FxHashMap<u32, u32> = matches.iter().map(|m| (m.before, m.after)).collect();
    // node -> its final form; node -> the node a match made of it (its final form is that one's)
    let (mut done, mut link) = (FxHashMap::<u32, u32>::default(), FxHashMap::<u32, u32>::default());
    // nodes waiting on others: meeting one again before it is done is a cycle
    let mut waiting = rustc_hash::FxHashSet::<u32>::default();
    let cycle = || Err("the matches cycle: a node's replacement needs the node itself (a runaway rewrite)".to_string());
    let mut stack = vec![(sink, false)];
    while let Some((n, ready)) = stack.pop() {
        if done.contains_key(&n) {
            continue;
        }
        if !ready && !waiting.insert(n) {
            return cycle();
        }
        if let Some(&to) = link.get(&n) {
            match done.get(&to) {
                Some(&f) => _ = done.insert(n, f),
                None if waiting.contains(&to) => return cycle(),
                None => stack.extend([(n, true), (to, false)]),
            }
            continue;
        }
        // (a top-down rewrite matched the node as it was, before its sources changed)
        let matched = if ready { None } else { replace.get(&n).copied().filter(|&to| to != n) };
        if let Some(to) = matched {
            link.insert(n, to);
            stack.extend([(n, true), (to, false)]);
            continue;
        }
        let node = get(extra, n);
        if !ready {
            stack.push((n, true));
            stack.extend(node.src.iter().filter(|s| !done.contains_key(s)).map(|&s| (s, false)));
            continue;
        }
        let node = Node { src: node.src.iter().map(|s| done[s]).collect(), ..node };
        let rebuilt = *index.entry(node.clone()).or_insert_with(|| {
            extra.push(node);
            base + extra.len() as u32 - 1
        });
        match replace.get(&rebuilt) {
            Some(&to) if to != rebuilt => {
                link.insert(n, to);
                stack.extend([(n, true), (to, false)]);
            }
            _ => _ = done.insert(n, rebuilt),
        }
    }
    Ok(done[&sink])
}
