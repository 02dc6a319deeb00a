//! Rangeify: one kernel's tensor graph becomes index arithmetic. Each output axis becomes a RANGE; movement ops
//! become arithmetic on the index of their source (padding a validity condition); a reduction gets RANGEs
//! for its reduced axes; buffers become LOADs at a flat index. Follows tinygrad `schedule/rangeify.py`.

use crate::dtype::{dtypes, AddrSpace};
use crate::uop::{margs, reshape_groups, Arg, AxisType, GroupOp, Ops, Sint, UOp};
use rustc_hash::FxHashMap;
use std::rc::Rc;

/// Contiguous (row-major) strides of `shape`.
fn strides(shape: &[Sint]) -> Vec<Sint> {
    let mut st = vec![Sint::Int(1); shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = &st[i + 1] * &shape[i + 1];
    }
    st
}

/// `i * d`.
fn times(i: &UOp, d: &Sint) -> UOp {
    match d {
        Sint::Int(n) => i * *n as i64,
        Sint::Sym(u) => i * u,
    }
}

fn idx_const(v: i64) -> UOp {
    UOp::const_(dtypes::WEAKINT, v)
}

/// `sum(idx[k] * strides[k])` (no node for a stride of 1 or the sum's first 0).
fn flat(idx: &[UOp], shape: &[Sint]) -> UOp {
    let terms = idx.iter().zip(strides(shape)).zip(shape).filter(|(_, s)| **s != Sint::Int(1));
    let terms = terms.map(|((i, st), _)| if st == Sint::Int(1) { i.clone() } else { times(i, &st) });
    terms.reduce(|acc, t| &acc + &t).unwrap_or_else(|| idx_const(0))
}

/// [`reshape_groups`] of symbolic shapes: grouped by value, each group's products checked symbolically (a symbol
/// whose value equals another dim's could group wrongly: one bound to 1 beside 1s), then grouped with each symbol a
/// number of its own (a large prime), checked again, else one group.
fn sym_groups(dst: &[Sint], src: &[Sint]) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    const PRIMES: [usize; 2] = [10_007, 10_009];
    let mut syms: Vec<&Sint> = Vec::new();
    let val = |s: &[Sint]| s.iter().map(Sint::value).collect::<Vec<_>>();
    let ok = |g: &[(std::ops::Range<usize>, std::ops::Range<usize>)]| {
        g.iter().all(|(a, b)| Sint::product(&dst[a.clone()]) == Sint::product(&src[b.clone()]))
    };
    let groups = reshape_groups(&val(dst), &val(src));
    if ok(&groups) {
        return groups;
    }
    for d in dst.iter().chain(src).filter(|d| d.int().is_none()) {
        if !syms.contains(&d) {
            syms.push(d);
        }
    }
    if syms.len() <= PRIMES.len() {
        let id = |s: &[Sint]| -> Vec<usize> {
            s.iter().map(|d| d.int().unwrap_or_else(|| PRIMES[syms.iter().position(|x| *x == d).expect("a symbol")])).collect()
        };
        let groups = reshape_groups(&id(dst), &id(src));
        if ok(&groups) {
            return groups;
        }
    }
    vec![(0..dst.len(), 0..src.len())]
}

fn and(a: Option<UOp>, b: UOp) -> Option<UOp> {
    Some(match a {
        Some(a) => &a & &b,
        None => b,
    })
}

struct Ctx<'a> {
    /// Realized node -> the BUFFER holding it.
    bufs: &'a FxHashMap<UOp, UOp>,
    /// The kernel's output BUFFER (loads of it, from an assign, use slot 0).
    out: &'a UOp,
    /// Input BUFFERs by first use; DEFINE_GLOBAL slot = position + 1.
    inputs: Vec<UOp>,
    next_axis: i64,
    memo: FxHashMap<Key, UOp>,
}

impl Ctx<'_> {
    fn global(&mut self, buf: &UOp) -> UOp {
        let slot = if buf == self.out {
            0
        } else if let Some(i) = self.inputs.iter().position(|b| b == buf) {
            i + 1
        } else {
            self.inputs.push(buf.clone());
            self.inputs.len()
        };
        let size = buf.shape().unwrap()[0] as i64;
        UOp::new(Ops::DEFINE_GLOBAL, buf.dtype.ptr(size, AddrSpace::Global), [], Arg::Int(slot as i64))
    }

    fn load(&mut self, buf: &UOp, shape: &[Sint], idx: &[UOp], valid: &Option<UOp>) -> UOp {
        let g = self.global(buf);
        let mut src = vec![g.clone(), flat(idx, shape)];
        src.extend(valid.clone());
        let index = UOp::new(Ops::INDEX, g.dtype, src, Arg::None);
        UOp::new(Ops::LOAD, buf.dtype, [index], Arg::None)
    }

    /// The value of tensor node `u` at index `idx` (one expression per dim), where `valid` holds. Iterative (an
    /// explicit stack of nodes to plan and to build), so a deep graph can't overflow the call stack.
    fn value(&mut self, u: &UOp, idx: Vec<UOp>, valid: Option<UOp>) -> UOp {
        let root: Key = (u.clone(), idx.into(), valid);
        let mut stack: Vec<(Key, Option<Plan>)> = vec![(root.clone(), None)];
        while let Some((key, plan)) = stack.pop() {
            match plan {
                Some(Plan { kids, finish }) => {
                    let vals: Vec<UOp> = kids.iter().map(|k| self.memo[k].clone()).collect();
                    let v = match finish {
                        Finish::Same => vals[0].clone(),
                        Finish::Alu(u) => u.replace(u.op, u.dtype, vals, Arg::None, None),
                        Finish::Pad(cond) if vals[0].gated_by(&cond) => vals[0].clone(),
                        Finish::Pad(cond) => cond.where_(&vals[0], vals[0].const_like(0)),
                        Finish::Reduce(u, ranges) => {
                            let Arg::ReduceAxis(op, _) = &u.arg else { unreachable!() };
                            UOp::new(Ops::REDUCE, u.dtype, std::iter::once(vals[0].clone()).chain(ranges).collect::<Vec<_>>(), Arg::Op(*op))
                        }
                    };
                    self.memo.insert(key, v);
                }
                None if self.memo.contains_key(&key) => {}
                None => match self.plan(&key.0, &key.1, &key.2) {
                    Ok(v) => {
                        self.memo.insert(key, v);
                    }
                    Err(plan) => {
                        let kids: Vec<(Key, Option<Plan>)> = plan.kids.iter().rev().map(|k| (k.clone(), None)).collect();
                        stack.push((key, Some(plan)));
                        stack.extend(kids);
                    }
                },
            }
        }
        self.memo[&root].clone()
    }

    /// `u`'s value at `idx` when it needs no other node's (loads, constants), else the nodes it needs and how.
    fn plan(&mut self, u: &UOp, idx: &Rc<[UOp]>, valid: &Option<UOp>) -> Result<UOp, Plan> {
        if let Some(buf) = self.bufs.get(u) {
            let buf = buf.clone();
            return Ok(self.load(&buf, &u.sym_shape().unwrap(), idx, valid));
        }
        let shape = &u.sym_shape().expect("tensor node")[..];
        let src_shape = || u.src[0].sym_shape().unwrap();
        let ints = || match &u.arg {
            Arg::Ints(v) => v.clone(),
            a => panic!("{}: bad arg {a:?}", u.op),
        };
        let same = |j: Vec<UOp>| Err(Plan { kids: vec![(u.src[0].clone(), j.into(), valid.clone())], finish: Finish::Same });
        match u.op {
            Ops::BUFFER => Ok(self.load(u, shape, idx, valid)),
            Ops::CONST | Ops::DEFINE_VAR => Ok(u.clone()),
            Ops::RANGE => Ok(idx[0].cast(u.dtype)),
            op if GroupOp::ELEMENTWISE.contains(op) => {
                let kids = u.src.iter().map(|s| (s.clone(), idx.clone(), valid.clone())).collect();
                Err(Plan { kids, finish: Finish::Alu(u.clone()) })
            }
            Ops::CONTIGUOUS | Ops::DETACH | Ops::CONTIGUOUS_BACKWARD => {
                Err(Plan { kids: vec![(u.src[0].clone(), idx.clone(), valid.clone())], finish: Finish::Same })
            }
            Ops::RESHAPE => {
                let ss = src_shape();
                let mut j = Vec::with_capacity(ss.len());
                for (a, b) in sym_groups(shape, &ss) {
                    if a.len() == 1 && b.len() == 1 {
                        j.push(idx[a.start].clone());
                        continue;
                    }
                    // (dims merged into one: the flat index itself, which stays below their product; the first dim
                    // of a split needs no modulo, the last no division)
                    let (f, gs) = (flat(&idx[a.clone()], &shape[a]), &ss[b]);
                    j.extend(gs.iter().zip(strides(gs)).enumerate().map(|(k, (s, st))| match (s, &st) {
                        (Sint::Int(1), _) => idx_const(0),
                        _ if gs.len() == 1 => f.clone(),
                        (_, Sint::Int(1)) => &f % &s.uop(),
                        _ if k == 0 => &f / &st.uop(),
                        _ => (&f / &st.uop()) % &s.uop(),
                    }));
                }
                same(j)
            }
            Ops::PERMUTE => {
                let mut j = vec![idx_const(0); idx.len()];
                ints().iter().zip(idx.iter()).for_each(|(&p, i)| j[p as usize] = i.clone());
                same(j)
            }
            Ops::EXPAND => {
                let ss = src_shape();
                same(
                    idx.iter()
                        .zip(ss.iter().zip(shape))
                        .map(|(i, (s, o))| if *s == Sint::Int(1) && *o != Sint::Int(1) { idx_const(0) } else { i.clone() })
                        .collect(),
                )
            }
            Ops::SHRINK => same(idx.iter().zip(margs(u).chunks(2)).map(|(i, c)| i + &c[0].uop()).collect()),
            Ops::FLIP => {
                let ss = src_shape();
                same(
                    idx.iter()
                        .zip(ints().iter().zip(&ss))
                        .map(|(i, (&f, s))| if f != 0 { &(&s.uop() - 1) - i } else { i.clone() })
                        .collect(),
                )
            }
            Ops::PAD => {
                let (ss, pads) = (src_shape(), ints());
                let mut cond: Option<UOp> = None;
                let mut j = Vec::with_capacity(idx.len());
                for (k, i) in idx.iter().enumerate() {
                    let (b, s) = (pads[2 * k], ss[k].uop());
                    if pads[2 * k] != 0 || pads[2 * k + 1] != 0 {
                        cond = and(cond, i.cmplt(b).logical_not());
                        cond = and(cond, i.cmplt(&s + b));
                    }
                    j.push(i - b);
                }
                let Some(cond) = cond else { return same(j) };
                Err(Plan { kids: vec![(u.src[0].clone(), j.into(), and(valid.clone(), cond.clone()))], finish: Finish::Pad(cond) })
            }
            Ops::REDUCE_AXIS => {
                let Arg::ReduceAxis(_, axes) = &u.arg else { unreachable!() };
                let ss = src_shape();
                let mut ranges = Vec::new();
                let j: Vec<UOp> = idx
                    .iter()
                    .enumerate()
                    .map(|(k, i)| {
                        if axes.contains(&k) && ss[k] != Sint::Int(1) {
                            let r = UOp::range(ss[k].uop(), self.next_axis, AxisType::Reduce);
                            self.next_axis += 1;
                            ranges.push(r.clone());
                            r
                        } else if axes.contains(&k) {
                            idx_const(0)
                        } else {
                            i.clone()
                        }
                    })
                    .collect();
                Err(Plan { kids: vec![(u.src[0].clone(), j.into(), valid.clone())], finish: Finish::Reduce(u.clone(), ranges) })
            }
            op => panic!("rangeify: can't index {op} (shape {shape:?})"),
        }
    }
}

/// A node to index: the tensor node, its index (one expression per dim, shared by the sources of an elementwise op)
/// and the validity it is read under.
type Key = (UOp, Rc<[UOp]>, Option<UOp>);

/// The nodes a node's value needs, and how it is built from theirs.
struct Plan {
    kids: Vec<Key>,
    finish: Finish,
}

enum Finish {
    /// The one kid's value (movement ops).
    Same,
    /// The elementwise op `u` over the kids' values.
    Alu(UOp),
    /// The kid's value where `cond` holds, else 0.
    Pad(UOp),
    /// The reduction `u` of the kid's value over the new ranges.
    Reduce(UOp, Vec<UOp>),
}
/// The kernel computing tensor node `root` into `out` (DEFINE_GLOBAL 0), loading realized nodes from `bufs`;
/// returns the AST and the input BUFFERs by slot (from 1). An ASSIGN computes its value into its target.
pub fn build_kernel(root: &UOp, out: &UOp, bufs: &FxHashMap<UOp, UOp>) -> (UOp, Vec<UOp>) {
    let shape = root.sym_shape().unwrap();
    let mut ctx = Ctx { bufs, out, inputs: Vec::new(), next_axis: 0, memo: FxHashMap::with_capacity_and_hasher(64, Default::default()) };
    let idx: Vec<UOp> = shape
        .iter()
        .map(|s| {
            if *s == Sint::Int(1) {
                return idx_const(0);
            }
            let r = UOp::range(s.uop(), ctx.next_axis, AxisType::Loop);
            ctx.next_axis += 1;
            r
        })
        .collect();
    let src = match root.op {
        Ops::CONTIGUOUS => &root.src[0],
        Ops::ASSIGN => &root.src[1],
        _ => root,
    };
    let value = ctx.value(src, idx.clone(), None);
    let numel: usize = shape.iter().map(Sint::value).product();
    let g = UOp::new(Ops::DEFINE_GLOBAL, root.dtype.ptr(numel as i64, AddrSpace::Global), [], Arg::Int(0));
    let index = UOp::new(Ops::INDEX, g.dtype, [g, flat(&idx, &shape)], Arg::None);
    let store = UOp::new(Ops::STORE, dtypes::VOID, [index, value], Arg::None);
    (UOp::sink(vec![store]), ctx.inputs)
}
