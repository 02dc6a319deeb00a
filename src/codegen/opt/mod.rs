//! Optimizations on a kernel's axes (tinygrad `codegen/opt/`). In: a kernel AST (a SINK of STOREs) whose RANGEs
//! are typed `Loop` (outputs) and `Reduce`. Out: the same AST with [`Opt`]s applied by [`Kernel::apply_opt`]:
//! axes split (`shift_to`) and retyped (THREAD, UPCAST, UNROLL, LOCAL, GROUP), padded (PADTO) or reordered
//! (SWAP). Illegal opts are [`KernelOptError`]s, never wrong kernels. [`heuristic`] picks opts by hand-written
//! rules; [`search`] by timing candidates (BEAM).

pub mod heuristic;
pub mod search;
mod tc;

use crate::renderer::Renderer;
use crate::uop::{symbolic::identity_element, Arg, AxisType, Ops, UOp};
pub use crate::uop::{Opt, OptOps};
use rustc_hash::FxHashMap;

/// An opt that can't apply to this kernel on this target (tinygrad `KernelOptError`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{opt}: {msg}")]
pub struct KernelOptError {
    pub opt: Opt,
    pub msg: String,
}

impl From<KernelOptError> for crate::error::Error {
    fn from(e: KernelOptError) -> Self {
        crate::error::Error::Opt(e.to_string())
    }
}

/// Most lanes (product of UPCAST and UNROLL amounts) one kernel iteration may compute (a 16-lane vector in a 4x7
/// register tile of a convolution over 14x14 images is 448).
pub const MAX_LANES: usize = 512;

/// Most accumulator elements an INNER axis may keep in memory (with the UPCAST lanes): 32 KB of float32, a core's L1.
pub const MAX_INNER: usize = 8192;

/// A kernel being optimized (tinygrad `Scheduler` in `codegen/opt/postrange.py`): the AST with typed axes and
/// the opts applied so far.
#[derive(Clone)]
pub struct Kernel {
    /// The SINK of STOREs.
    pub ast: UOp,
    /// The target the opts are checked against.
    pub ren: Renderer,
    /// The opts applied, in order.
    pub applied_opts: Vec<Opt>,
    dont_use_locals: bool,
    /// [`Kernel::rngs`] of the AST it was computed for (a toposort each time was a tenth of codegen).
    rngs_memo: RngsMemo,
}

/// The RANGEs of an AST, remembered with the AST they belong to.
#[derive(Default)]
struct RngsMemo(std::sync::Mutex<Option<(UOp, Vec<UOp>)>>);

impl Clone for RngsMemo {
    fn clone(&self) -> Self {
        RngsMemo(std::sync::Mutex::new(self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()))
    }
}

/// The size of a RANGE; a symbolic bound (a variable's) reads as 1, so no opt splits its axis.
pub fn range_size(r: &UOp) -> usize {
    r.src[0].const_int().map_or(1, |n| n as usize)
}

/// How far `index` moves when `r` steps by one: `Some(stride)` when that is a constant. Sums and constant
/// multiples are read off directly; anything else is differenced symbolically.
pub fn stride(index: &UOp, r: &UOp) -> Option<i128> {
    linear_stride(index, r).or_else(|| {
        let map: FxHashMap<UOp, UOp> = [(r.clone(), r + 1)].into_iter().collect();
        (&index.substitute(&map) - index).simplify().const_int()
    })
}

/// The coefficient of `r` in `index` when `index` is a sum of constant multiples of terms, `r` among them and
/// the others free of it (`None` when it isn't, or `r` hides in another op). Walks with an explicit stack.
fn linear_stride(index: &UOp, r: &UOp) -> Option<i128> {
    let (mut stack, mut total) = (vec![(index, 1i128)], 0i128);
    while let Some((u, m)) = stack.pop() {
        match u.op {
            _ if u == r => total += m,
            Ops::CONST | Ops::DEFINE_VAR | Ops::RANGE => {}
            Ops::ADD => stack.extend([(&u.src[0], m), (&u.src[1], m)]),
            Ops::MUL => match (u.src[0].const_int(), u.src[1].const_int()) {
                (_, Some(c)) => stack.push((&u.src[0], m.checked_mul(c)?)),
                (Some(c), _) => stack.push((&u.src[1], m.checked_mul(c)?)),
                _ => return None,
            },
            _ if depends_on(u, r) => return None,
            _ => {}
        }
    }
    Some(total)
}

/// Whether `r` is among `u`'s sources, transitively (a walk that stops at the first sight of it).
fn depends_on(u: &UOp, r: &UOp) -> bool {
    let (mut stack, mut seen) = (vec![u], rustc_hash::FxHashSet::default());
    while let Some(x) = stack.pop() {
        if x == r {
            return true;
        }
        if seen.insert(x) {
            stack.extend(x.src.iter());
        }
    }
    false
}

/// `ast` with `map` applied, where a RANGE a REDUCE closes may map to an expression: the REDUCE then closes the
/// RANGEs of that expression (none, when it became a constant).
pub fn substitute_ranges(ast: &UOp, map: &FxHashMap<UOp, UOp>) -> UOp {
    let mut new: FxHashMap<UOp, UOp> = map.clone();
    for u in ast.toposort() {
        if new.contains_key(&u) {
            continue;
        }
        let src: Vec<UOp> = if u.op == Ops::REDUCE {
            let mut src = vec![new[&u.src[0]].clone()];
            for r in u.src[1..].iter().map(|r| &new[r]) {
                let rs =
                    if r.op == Ops::RANGE { vec![r.clone()] } else { r.toposort().into_iter().filter(|x| x.op == Ops::RANGE).collect() };
                for x in rs {
                    if !src[1..].contains(&x) {
                        src.push(x);
                    }
                }
            }
            src
        } else {
            u.src.iter().map(|s| new[s].clone()).collect()
        };
        let nu = u.with_src(src);
        new.insert(u, nu);
    }
    new[ast].clone()
}

impl Kernel {
    /// A kernel for `ast` on `ren`, with no opts applied.
    pub fn new(ast: &UOp, ren: &Renderer) -> Kernel {
        Kernel { ast: ast.clone(), ren: ren.clone(), applied_opts: Vec::new(), dont_use_locals: false, rngs_memo: RngsMemo::default() }
    }

    /// The kernel's RANGEs in axis order: by kind ([`AxisType::order`]), then id.
    pub fn rngs(&self) -> Vec<UOp> {
        let mut memo = self.rngs_memo.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*memo {
            Some((ast, rs)) if *ast == self.ast => rs.clone(),
            _ => {
                let mut rs: Vec<UOp> = self.ast.toposort().into_iter().filter(|u| u.op == Ops::RANGE).collect();
                rs.sort_by_key(|r| (r.axis().1.order(), r.axis().0));
                *memo = Some((self.ast.clone(), rs.clone()));
                rs
            }
        }
    }

    /// The size of each axis, in [`rngs`](Self::rngs) order.
    pub fn full_shape(&self) -> Vec<usize> {
        self.rngs().iter().map(range_size).collect()
    }

    /// The kind of each axis, in [`rngs`](Self::rngs) order.
    pub fn axis_types(&self) -> Vec<AxisType> {
        self.rngs().iter().map(|r| r.axis().1).collect()
    }

    /// Output axes an UPCAST, LOCAL or THREAD may split: indices into [`rngs`](Self::rngs).
    pub fn upcastable_dims(&self) -> Vec<usize> {
        let ts = self.axis_types();
        (0..ts.len()).filter(|&i| matches!(ts[i], AxisType::Global | AxisType::Local | AxisType::Loop)).collect()
    }

    /// Reduce axes an UNROLL or GROUP may split: indices into [`rngs`](Self::rngs).
    pub fn unrollable_dims(&self) -> Vec<usize> {
        let ts = self.axis_types();
        (0..ts.len()).filter(|&i| matches!(ts[i], AxisType::Reduce | AxisType::GroupReduce)).collect()
    }

    /// Threads of a workgroup: the product of the LOCAL and GROUP_REDUCE axes.
    pub fn workgroup(&self) -> usize {
        self.rngs().iter().filter(|r| matches!(r.axis().1, AxisType::Local | AxisType::GroupReduce)).map(range_size).product()
    }

    /// Product of the UPCAST and UNROLL lanes.
    pub fn lanes(&self) -> usize {
        self.rngs().iter().filter(|r| matches!(r.axis().1, AxisType::Upcast | AxisType::Unroll)).map(range_size).product()
    }

    /// The names tinygrad gives the kernel: `r_` (with reductions) or `E_`, then each axis's size in axis order; a
    /// plain C identifier, and the same colored by axis kind (as tinygrad's DEBUG output).
    pub fn names(&self) -> (String, String) {
        let rngs = self.rngs();
        let kind = if self.ast.toposort().iter().any(|u| u.op == Ops::REDUCE) { "r" } else { "E" };
        let (mut plain, mut colored) = (String::from(kind), String::from(kind));
        for r in &rngs {
            let s = range_size(r).to_string();
            colored.push('_');
            colored.push_str(&crate::helpers::colored(&s, r.axis().1.color()));
            plain.push('_');
            plain.push_str(&s);
        }
        if rngs.is_empty() {
            plain.push_str("_1");
            colored.push_str("_1");
        }
        (plain, colored)
    }

    fn check(&self, opt: Opt, ok: bool, msg: &str) -> Result<(), KernelOptError> {
        if ok {
            Ok(())
        } else {
            Err(KernelOptError { opt, msg: msg.to_string() })
        }
    }

    /// Splits `r` (size `n`) into itself of size `n/amount` and a new axis of `amount` iterations of kind `kind`:
    /// the inner part unless `top`. Returns the new axis.
    fn shift_to(&mut self, r: &UOp, amount: usize, kind: AxisType, top: bool) -> UOp {
        let (id, old_kind) = r.axis();
        let n = range_size(r);
        let next = self.rngs().iter().map(|x| x.axis().0).max().unwrap_or(0) + 1;
        let new = UOp::range(r.src[0].const_like(amount as i64), next, kind);
        let rest = n / amount;
        let old = if rest == 1 { r.src[0].const_like(0) } else { UOp::range(r.src[0].const_like(rest as i64), id, old_kind) };
        let repl = if top { &(&new * rest as i64) + &old } else { &(&old * amount as i64) + &new };
        self.ast = substitute_ranges(&self.ast, &[(r.clone(), repl)].into_iter().collect());
        new
    }

    /// Applies `opt` (tinygrad `Scheduler.apply_opt`), checking that it is legal on this kernel and target.
    ///
    /// # Errors
    /// A [`KernelOptError`] naming the opt and why it can't apply; the kernel is then unchanged.
    pub fn apply_opt(&mut self, opt: Opt) -> Result<(), KernelOptError> {
        let rngs = self.rngs();
        let err = |m: &str| KernelOptError { opt, msg: m.to_string() };
        if opt.op == OptOps::NoLocals {
            self.check(opt, self.ren.has_local, "the target has no workgroups")?;
            self.check(opt, !rngs.iter().any(|r| r.axis().1 == AxisType::Local), "already has local axes")?;
            self.dont_use_locals = true;
            self.applied_opts.push(opt);
            return Ok(());
        }
        let a = opt.axis.ok_or_else(|| err("needs an axis"))?;
        let axis = match opt.op {
            OptOps::Unroll | OptOps::Group | OptOps::GroupTop | OptOps::Tc => {
                *self.unrollable_dims().get(a).ok_or_else(|| err("no such reduce axis"))?
            }
            _ => a,
        };
        let r = rngs.get(axis).ok_or_else(|| err(&format!("axis {axis} out of range ({} axes)", rngs.len())))?.clone();
        let (size, kind) = (range_size(&r), r.axis().1);
        let amt = if opt.arg == 0 { size } else { opt.arg };
        let divides = amt >= 1 && size.is_multiple_of(amt);
        // after TC the warp is the workgroup, and its fragments are gathered lane by lane: only unrolled lanes may
        // follow (on targets without vectors)
        if self.applied_opts.iter().any(|o| o.op == OptOps::Tc) {
            let unrolled = matches!(opt.op, OptOps::Upcast | OptOps::Unroll | OptOps::Swap) && self.ren.vector_bytes == 0;
            self.check(opt, unrolled, "only UPCAST, UNROLL and SWAP follow TC, on targets without vectors")?;
        }
        match opt.op {
            OptOps::Upcast | OptOps::Unroll => {
                let want = if opt.op == OptOps::Upcast { AxisType::Loop } else { AxisType::Reduce };
                self.check(opt, kind == want || (opt.op == OptOps::Upcast && kind == AxisType::Global), "wrong kind of axis")?;
                self.check(opt, amt > 1 && divides, "amount must divide the axis and be > 1")?;
                // (tinygrad caps UPCAST at 16; two AVX-512 registers of floats are 32)
                let most = if opt.op == OptOps::Upcast { 16.max(self.ren.vector_bytes / 2) } else { 32 };
                self.check(opt, amt <= most, "too many lanes on one axis")?;
                self.check(opt, self.lanes() * amt <= MAX_LANES, "too many lanes in the kernel")?;
                self.check(opt, !rngs.iter().any(|r| r.axis().1 == AxisType::GroupReduce), "lanes after a GROUP are not supported")?;
                let k = if opt.op == OptOps::Upcast { AxisType::Upcast } else { AxisType::Unroll };
                self.shift_to(&r, amt, k, false);
            }
            OptOps::Local => {
                self.check(opt, self.ren.has_local && !self.dont_use_locals, "the target has no workgroups")?;
                self.check(
                    opt,
                    matches!(kind, AxisType::Global | AxisType::Loop) && divides && amt > 1,
                    "LOCAL needs an output axis it divides",
                )?;
                self.check(opt, self.workgroup() * amt <= 256, "workgroup over 256 threads")?;
                self.shift_to(&r, amt, AxisType::Local, false);
            }
            OptOps::Group | OptOps::GroupTop => {
                self.check(opt, self.ren.has_local && self.ren.has_shared && !self.dont_use_locals, "the target has no shared memory")?;
                self.check(opt, divides && amt > 1, "GROUP amount must divide the axis")?;
                self.check(opt, self.lanes() == 1, "GROUP after UPCAST or UNROLL is not supported")?;
                self.check(opt, self.workgroup() * amt <= 256, "workgroup over 256 threads")?;
                self.shift_to(&r, amt, AxisType::GroupReduce, opt.op == OptOps::GroupTop);
            }
            OptOps::Thread => {
                self.check(opt, self.ren.threads > 1, "the target runs one thread")?;
                self.check(opt, kind == AxisType::Loop, "THREAD splits an output loop")?;
                self.check(opt, !rngs.iter().any(|r| r.axis().1 == AxisType::Thread), "already threaded")?;
                self.check(opt, divides && amt > 1, "THREAD amount must divide the axis and be > 1")?;
                if amt == size {
                    let t = UOp::range(r.src[0].clone(), r.axis().0, AxisType::Thread);
                    self.ast = substitute_ranges(&self.ast, &[(r.clone(), t)].into_iter().collect());
                } else {
                    self.shift_to(&r, amt, AxisType::Thread, true);
                }
            }
            OptOps::Padto => {
                self.check(
                    opt,
                    matches!(kind, AxisType::Loop | AxisType::Global | AxisType::Reduce),
                    "PADTO pads an output or reduce loop",
                )?;
                let padded = size.div_ceil(amt.max(1)) * amt;
                self.check(opt, amt > 1 && padded > size, "no-op PADTO")?;
                self.check(opt, padded <= 2 * size, "PADTO would more than double the axis")?;
                self.padto(&r, padded);
            }
            OptOps::Swap => {
                let other = rngs.get(opt.arg).ok_or_else(|| err("SWAP: no such axis"))?.clone();
                let ok = |k: AxisType| matches!(k, AxisType::Loop | AxisType::Global);
                self.check(opt, ok(kind) && ok(other.axis().1) && other != r, "SWAP exchanges two output loops")?;
                let (ra, rb) =
                    (UOp::range(r.src[0].clone(), other.axis().0, kind), UOp::range(other.src[0].clone(), r.axis().0, other.axis().1));
                self.ast = substitute_ranges(&self.ast, &[(r.clone(), ra), (other.clone(), rb)].into_iter().collect());
            }
            OptOps::Tc => {
                let tc = self.ren.tensor_cores.get(opt.arg).ok_or_else(|| err("the target has no such tensor core"))?;
                self.check(opt, self.applied_opts.is_empty() && !self.dont_use_locals, "TC must be the first opt")?;
                self.ast = tc::apply(self, &r, tc).map_err(err)?;
            }
            OptOps::Inner => {
                let reduces: Vec<UOp> = self.ast.toposort().into_iter().filter(|u| u.op == Ops::REDUCE).collect();
                self.check(opt, !self.ren.has_local && self.ren.language == crate::renderer::Language::C, "INNER is for CPU targets")?;
                self.check(opt, kind == AxisType::Loop && divides && amt > 1, "INNER needs an output loop it divides")?;
                self.check(opt, reduces.iter().all(|r| r.src[1..] == reduces[0].src[1..]), "INNER needs one set of reduce loops")?;
                self.check(opt, reduces.first().is_some_and(|r| r.src.len() > 1), "INNER needs a reduction loop")?;
                let lanes: usize = rngs.iter().filter(|r| r.axis().1 == AxisType::Upcast).map(range_size).product();
                let inner: usize = rngs.iter().filter(|r| r.axis().1 == AxisType::Inner).map(range_size).product();
                self.check(opt, inner * amt * lanes <= MAX_INNER, "INNER accumulators over 32 KB")?;
                if amt == size {
                    let t = UOp::range(r.src[0].clone(), r.axis().0, AxisType::Inner);
                    self.ast = substitute_ranges(&self.ast, &[(r.clone(), t)].into_iter().collect());
                } else {
                    self.shift_to(&r, amt, AxisType::Inner, false);
                }
            }
            OptOps::NoLocals => unreachable!(),
        }
        self.applied_opts.push(opt);
        Ok(())
    }

    /// Pads axis `r` to `padded` iterations: loads and stores in the extra ones are masked off, and reductions
    /// over it see their identity there. On an output axis, a float load whose padded lanes stay inside the buffer
    /// (plus the renderer's [`Renderer::overread`]) is left unmasked: what it reads there only reaches the masked
    /// stores, and an unmasked load stays a vector load; any other load there that does not step by one element
    /// along the axis reads at the last real iteration's address instead (a row of a matmul's left operand).
    fn padto(&mut self, r: &UOp, padded: usize) {
        let size = range_size(r);
        let (id, kind) = r.axis();
        let nr = UOp::range(r.src[0].const_like(padded as i64), id, kind);
        let valid = nr.cmplt(size as i64);
        let ast = substitute_ranges(&self.ast, &[(r.clone(), nr.clone())].into_iter().collect());
        let topo = ast.toposort();
        // loads whose values feed an address (gathers) must not read garbage
        let addressing: rustc_hash::FxHashSet<UOp> =
            topo.iter().filter(|u| u.op == Ops::INDEX && u.src.len() >= 2).flat_map(|u| u.src[1].toposort()).collect();
        let overread = |u: &UOp, load: &UOp| {
            let (buf, item) = (&u.src[0], u.src[0].dtype.base().itemsize().max(1) as i128);
            kind != AxisType::Reduce
                && load.dtype.is_float()
                && !addressing.contains(load)
                && buf.op == Ops::DEFINE_GLOBAL
                && u.src.len() == 2
                && u.src[1].bounds().0 >= 0
                && (u.src[1].bounds().1 + 1) * item <= buf.dtype.size as i128 * item + self.ren.overread as i128
        };
        let stored: rustc_hash::FxHashSet<&UOp> = topo.iter().filter(|u| u.op == Ops::STORE).map(|s| &s.src[0]).collect();
        let loads: FxHashMap<UOp, UOp> =
            topo.iter().filter(|u| u.op == Ops::LOAD && !stored.contains(&u.src[0])).map(|l| (l.src[0].clone(), l.clone())).collect();
        let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
        for u in &topo {
            if u.op == Ops::INDEX && u.src.len() >= 2 && u.src[1].toposort().contains(&nr) {
                if loads.get(u).is_some_and(|l| overread(u, l)) {
                    continue;
                }
                // (a load on an output axis that does not walk it element by element reads the last real iteration's
                // address in the padded ones: a matmul's padded rows of its left operand load with no branch)
                if kind != AxisType::Reduce && loads.contains_key(u) && stride(&u.src[1], &nr) != Some(1) {
                    let last = valid.where_(&nr, nr.const_like(size as i64 - 1));
                    map.insert(u.clone(), u.substitute(&[(nr.clone(), last)].into_iter().collect()));
                    continue;
                }
                let v = if u.src.len() > 2 { &u.src[2] & &valid } else { valid.clone() };
                map.insert(u.clone(), u.with_src([u.src[0].clone(), u.src[1].clone(), v]));
            }
            if u.op == Ops::REDUCE && u.src[1..].contains(&nr) {
                let Arg::Op(op) = u.arg else { unreachable!() };
                let identity = u.const_like(identity_element(op, u.dtype));
                let src: Vec<UOp> = std::iter::once(valid.where_(&u.src[0], identity)).chain(u.src[1..].iter().cloned()).collect();
                map.insert(u.clone(), u.with_src(src));
            }
        }
        self.ast = if map.is_empty() { ast } else { ast.substitute(&map) };
    }
}

/// Orders each reduction's loops so its loads move least in the innermost one (unit-stride inner loads): loops
/// are sorted by the summed stride they cause over the reduction's loads, largest outermost, by giving them new
/// axis ids in that order (loops of one kind nest by id).
pub fn order_reduce_loops(sink: &UOp) -> UOp {
    let topo = sink.toposort();
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    let mut next_id = topo.iter().filter(|u| u.op == Ops::RANGE).map(|r| r.axis().0).max().unwrap_or(0) + 1;
    for red in topo.iter().filter(|u| u.op == Ops::REDUCE) {
        let ranges: Vec<&UOp> = red.src[1..].iter().collect();
        if ranges.len() < 2 || ranges.iter().any(|r| map.contains_key(*r)) {
            continue;
        }
        let loads: Vec<UOp> = red.src[0]
            .toposort()
            .into_iter()
            .filter(|u| u.op == Ops::LOAD && u.src[0].op == Ops::INDEX && u.src[0].src.len() >= 2)
            .collect();
        let cost = |r: &UOp| -> i128 { loads.iter().map(|l| stride(&l.src[0].src[1], r).map_or(1 << 20, i128::abs).min(1 << 20)).sum() };
        let mut order: Vec<(i128, &UOp)> = ranges.iter().map(|r| (cost(r), *r)).collect();
        // stable: among equal costs keep the original nesting
        order.sort_by_key(|(c, _)| -c);
        for (_, r) in order {
            map.insert(r.clone(), UOp::range(r.src[0].clone(), next_id, r.axis().1));
            next_id += 1;
        }
    }
    if map.is_empty() {
        sink.clone()
    } else {
        sink.substitute(&map)
    }
}
