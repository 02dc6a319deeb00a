//! `graph_rewrite`: applies a [`PatternMatcher`] to every node of a graph until nothing matches. In: a root
//! UOp and a matcher. Out: the rewritten root. Iterative (an explicit stack, no recursion however deep the
//! graph), memoized per node (tinygrad `RewriteContext.unified_rewrite`).

use super::{track, PatternMatcher, UOp};
use rustc_hash::{FxHashMap, FxHashSet};
use std::panic::Location;
use std::sync::atomic::Ordering::Relaxed;

/// Chains of more rewrites than this on one node are runaway rule sets.
const MAX_CHAIN: u32 = 1000;

/// Rewrites `sink` with `pm` to a fixed point, sources before their users (tinygrad's default
/// `graph_rewrite`): each node is rewritten after its sources have been, repeatedly, until no rule matches;
/// a rewrite's result is itself rewritten the same way. `name` labels the pass in errors.
///
/// # Panics
/// If the rules never settle: a rewrite produces a node that contains the node being rewritten, or one node
/// is rewritten more than 1000 times in a row. The message names the pass and the last rule that fired.
#[track_caller]
pub fn graph_rewrite<C>(sink: &UOp, pm: &PatternMatcher<C>, ctx: &mut C, name: &str) -> UOp {
    rewrite_with(sink, pm, ctx, name, false, std::panic::Location::caller())
}

/// Rewrites `sink` with `pm`, each node to a fixed point before its sources are visited (tinygrad's
/// `graph_rewrite(..., bottom_up=True)`): for rules that must see a node before its sources change.
///
/// # Panics
/// As [`graph_rewrite`].
#[track_caller]
pub fn graph_rewrite_top_down<C>(sink: &UOp, pm: &PatternMatcher<C>, ctx: &mut C, name: &str) -> UOp {
    rewrite_with(sink, pm, ctx, name, true, std::panic::Location::caller())
}

/// The tables of a rewrite (`replace`, `in_progress`), kept per thread between rewrites so that their memory is
/// allocated once, not grown anew by every pass.
type Tables = (FxHashMap<UOp, UOp>, FxHashSet<UOp>);

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Tables>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn rewrite_with<C>(sink: &UOp, pm: &PatternMatcher<C>, ctx: &mut C, name: &str, top_down: bool, loc: &'static Location<'static>) -> UOp {
    // (a rewrite function may itself rewrite: each nesting level takes its own tables)
    let (replace, in_progress) = SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    let memo = size_of::<C>() == 0 && pm.id < 64;
    let rec = track::begin(name, loc, sink);
    let mut rw = Rewriter { pm, ctx, name, top_down, replace, in_progress, last_rule: None, memo, rec };
    let out = match &rw.rec {
        None => rw.run(sink),
        // (recording: a rule that panics ends the step as an error, then the panic goes on)
        Some(_) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rw.run(sink))) {
            Ok(out) => out,
            Err(e) => {
                let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                track::end(rw.rec.take().expect("recording"), Err(msg.unwrap_or_else(|| "panic".into())));
                std::panic::resume_unwind(e)
            }
        },
    };
    if let Some(r) = rw.rec.take() {
        track::end(r, Ok(&out));
    }
    let (mut replace, mut in_progress) = (rw.replace, rw.in_progress);
    // tables that grew huge are dropped rather than kept
    if replace.capacity() <= 1 << 16 {
        replace.clear();
        in_progress.clear();
        let _ = SPARE.try_with(|s| s.borrow_mut().push((replace, in_progress)));
    }
    out
}

struct Rewriter<'a, C> {
    pm: &'a PatternMatcher<C>,
    ctx: &'a mut C,
    name: &'a str,
    top_down: bool,
    /// Original node -> its final form (final forms map to themselves).
    replace: FxHashMap<UOp, UOp>,
    /// Nodes whose sources are being rewritten (the current path): meeting one again is a cycle.
    in_progress: FxHashSet<UOp>,
    last_rule: Option<usize>,
    /// Whether fixed points may be recorded on nodes for later rewrites with the same matcher: only when the
    /// context is zero-sized, as then no rule can depend on context state, and the matcher has a bit (id < 64).
    memo: bool,
    /// The step being recorded for VIZ ([`track`]), when recording.
    rec: Option<track::StepRef>,
}

enum Stage {
    /// Visit: (top-down: rewrite first, then) schedule the sources.
    Visit,
    /// The sources are done: rebuild on them, or rewrite.
    Rebuild,
    /// `n`'s final form is that of the carried node.
    Link,
}

impl<C> Rewriter<'_, C> {
    fn runaway(&self, what: &str) -> ! {
        let rule = self.last_rule.map_or("none".into(), |i| self.pm.rules()[i].location.to_string());
        panic!("graph_rewrite {:?}: runaway rewrite: {what}; last rule that fired: {rule}", self.name)
    }

    fn rewrite(&mut self, u: &UOp) -> Option<UOp> {
        let t = self.rec.as_ref().map(|_| std::time::Instant::now());
        let (n, i) = self.pm.rewrite_with_rule(u, self.ctx)?;
        self.last_rule = Some(i);
        if let (Some(rec), Some(t)) = (&self.rec, t) {
            track::matched(rec, u, &n, &self.pm.rules()[i], t.elapsed().as_nanos() as u64);
        }
        Some(n)
    }

    fn run(&mut self, root: &UOp) -> UOp {
        // (original, stage, current form, rewrites so far in this chain)
        let mut stack = vec![(root.clone(), Stage::Visit, root.clone(), 0u32)];
        while let Some((n, stage, mut cur, depth)) = stack.pop() {
            if self.replace.contains_key(&n) {
                continue;
            }
            match stage {
                Stage::Visit => {
                    if self.memo && cur.fixed.load(Relaxed) >> self.pm.id & 1 != 0 {
                        self.finish(n, cur);
                        continue;
                    }
                    if self.in_progress.contains(&cur) {
                        self.runaway("a rewrite produced a node that contains itself");
                    }
                    let mut depth = depth;
                    while self.top_down {
                        let Some(next) = self.rewrite(&cur) else { break };
                        cur = next;
                        depth += 1;
                        if depth > MAX_CHAIN {
                            self.runaway("over 1000 rewrites of one node");
                        }
                    }
                    if cur != n && self.replace.contains_key(&cur) {
                        let fin = self.replace[&cur].clone();
                        self.finish(n, fin);
                        continue;
                    }
                    self.in_progress.insert(n.clone());
                    stack.push((n, Stage::Rebuild, cur.clone(), depth));
                    for s in cur.src.iter().rev().filter(|s| !self.replace.contains_key(*s)) {
                        stack.push((s.clone(), Stage::Visit, s.clone(), 0));
                    }
                }
                Stage::Rebuild => {
                    let mut same = true;
                    for s in cur.src.iter() {
                        match self.replace.get(s) {
                            Some(f) => same &= f == s,
                            None => self.runaway("a node is its own source"),
                        }
                    }
                    let next = if !same {
                        Some(cur.with_src(cur.src.iter().map(|s| self.replace[s].clone()).collect::<Vec<_>>()))
                    } else if self.top_down {
                        None
                    } else {
                        self.rewrite(&cur)
                    };
                    match next {
                        None => {
                            self.in_progress.remove(&n);
                            self.finish(n, cur);
                        }
                        Some(next) => {
                            if depth + 1 > MAX_CHAIN {
                                self.runaway("over 1000 rewrites of one node");
                            }
                            self.in_progress.remove(&n);
                            stack.push((n, Stage::Link, next.clone(), 0));
                            stack.push((next.clone(), Stage::Visit, next, depth + 1));
                        }
                    }
                }
                Stage::Link => {
                    let Some(fin) = self.replace.get(&cur).cloned() else { self.runaway("a rewrite depends on its own result") };
                    self.finish(n, fin);
                }
            }
        }
        self.replace[root].clone()
    }

    fn finish(&mut self, n: UOp, fin: UOp) {
        if self.memo {
            fin.fixed.fetch_or(self.pm.fixes, Relaxed);
        }
        if n != fin {
            self.replace.insert(fin.clone(), fin.clone());
        }
        self.replace.insert(n, fin);
    }
}
