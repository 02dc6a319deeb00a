//! Multi-device graphs. In: tensor-level graphs whose MULTI nodes hold a tensor's shards, one per device (split
//! along one axis in equal blocks, or replicated). Out: the same values as single-device graphs joined by COPYs, with
//! MULTI only at the roots: each op applied shard by shard, movement ops mapping the sharded axis, a reduction over it
//! as an allreduce (naive or ring), a mismatch of shardings resolved by copies. Follows tinygrad `schedule/multi.py`
//! and `schedule/allreduce.py` (its `RING` and `RING_ALLREDUCE_THRESHOLD` settings; not `ALL2ALL`).

use crate::helpers::{DEBUG, RING, RING_ALLREDUCE_THRESHOLD};
use crate::uop::{Arg, GroupOp, Ops, UOp};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A node's value after lowering: one graph, or one graph per device.
#[derive(Clone)]
enum Value {
    Plain(UOp),
    /// `xs[j]` on `devs[j]`; the logical tensor is their blocks along `axis` in order, or any of them (`None`).
    Multi {
        xs: Vec<UOp>,
        axis: Option<usize>,
        devs: Arc<[String]>,
    },
}

/// The axis MULTI node `u` is sharded on (`None`: replicated).
pub fn multi_axis(u: &UOp) -> Option<usize> {
    match u.arg {
        Arg::Int(a) if a >= 0 => Some(a as usize),
        _ => None,
    }
}

/// The device a single-device graph computes on: the target of the COPY nearest its root, else its buffers'
/// (`None`: constants only, computed wherever they are used).
pub fn graph_device(u: &UOp) -> Option<String> {
    let (mut stack, mut seen) = (vec![u.clone()], rustc_hash::FxHashSet::default());
    while let Some(u) = stack.pop() {
        match &u.arg {
            Arg::Str(d) if u.op == Ops::COPY => return Some(d.to_string()),
            Arg::Buffer(b) => return Some(b.device.to_string()),
            _ => stack.extend(u.src.iter().filter(|s| seen.insert((*s).clone())).cloned()),
        }
    }
    None
}

fn mop(x: &UOp, op: Ops, arg: Vec<i64>) -> UOp {
    UOp::new(op, x.dtype, [x.clone()], Arg::Ints(arg.into()))
}

/// `x` with `axis` cut to `[s, e)` (itself when that is all of it).
fn shrink_axis(x: &UOp, axis: usize, s: usize, e: usize) -> UOp {
    let shape = x.shape().expect("a tensor");
    if s == 0 && e == shape[axis] {
        return x.clone();
    }
    mop(x, Ops::SHRINK, shape.iter().enumerate().flat_map(|(i, &d)| if i == axis { [s as i64, e as i64] } else { [0, d as i64] }).collect())
}

/// `x` on device `d`: itself when it is there, or when it holds only constants that fuse into the kernels reading
/// them; else a COPY (constants with a reduction or a CONTIGUOUS get a kernel of their own: computed once on the
/// default device and copied, rather than one buffer read on several devices).
fn copy_to(x: &UOp, d: &str) -> UOp {
    let own_kernel = || x.toposort().iter().any(|u| matches!(u.op, Ops::REDUCE_AXIS | Ops::CONTIGUOUS | Ops::ASSIGN));
    match graph_device(x) {
        Some(at) if at == d => x.clone(),
        None if !own_kernel() => x.clone(),
        _ => UOp::new(Ops::COPY, x.dtype, [x.clone()], Arg::Str(d.into())),
    }
}

/// The blocks `parts` (equal sizes along `axis`, all on one device) joined along `axis`: each zero-padded to the
/// whole, then summed (ORed for bools).
fn cat(parts: &[UOp], axis: usize) -> UOp {
    let s = parts[0].shape().expect("a tensor")[axis];
    let n = parts.len();
    let padded = parts.iter().enumerate().map(|(j, p)| {
        let shape = p.shape().expect("a tensor");
        mop(
            p,
            Ops::PAD,
            (0..shape.len()).flat_map(|i| if i == axis { [(j * s) as i64, ((n - 1 - j) * s) as i64] } else { [0, 0] }).collect(),
        )
    });
    let join = if parts[0].dtype.scalar == crate::dtype::dtypes::BOOL.scalar { Ops::OR } else { Ops::ADD };
    padded.reduce(|a, b| a.alu(join, &[&b])).expect("at least one part")
}

impl Value {
    /// Its graph on each of `devs`, sharded along `axis` (`None`: the whole tensor on each): copies where the
    /// sharding differs.
    fn on(&self, devs: &[String], axis: Option<usize>) -> Vec<UOp> {
        let n = devs.len();
        let block = |x: &UOp, a: usize, j: usize| {
            let s = x.shape().expect("a tensor")[a] / n;
            shrink_axis(x, a, j * s, (j + 1) * s)
        };
        match (self, axis) {
            (Value::Plain(u), None) => devs.iter().map(|d| copy_to(u, d)).collect(),
            (Value::Plain(u), Some(a)) => devs.iter().enumerate().map(|(j, d)| copy_to(&block(u, a, j), d)).collect(),
            (Value::Multi { xs, axis: from, devs: have }, _) => {
                assert!(
                    **have == *devs,
                    "multi: an op on tensors sharded over different devices: {} and {}",
                    have.join(", "),
                    devs.join(", ")
                );
                match (*from, axis) {
                    (None, None) => xs.clone(),
                    (f, t) if f == t => xs.clone(),
                    (None, Some(a)) => xs.iter().enumerate().map(|(j, x)| block(x, a, j)).collect(),
                    (Some(f), t) => {
                        let whole: Vec<UOp> = devs.iter().map(|d| cat(&xs.iter().map(|x| copy_to(x, d)).collect::<Vec<_>>(), f)).collect();
                        match t {
                            None => whole,
                            Some(a) => {
                                let s = whole[0].shape().expect("a tensor")[a] / n;
                                whole.iter().enumerate().map(|(j, w)| shrink_axis(w, a, j * s, (j + 1) * s)).collect()
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The allreduce of `parts` (one per device, same shape) with `op` (ADD, MUL or MAX): on every device the reduction
/// of all of them, bitwise the same everywhere. Naive (every device copies every other's part: n(n-1) copies) or ring
/// (the flattened parts in n chunks, reduce-scattered then all-gathered around the ring: 2n(n-1) copies between n
/// pairs of neighbours), chosen as tinygrad chooses (`RING`).
pub fn allreduce(op: Ops, parts: &[UOp], devs: &[String]) -> Vec<UOp> {
    let n = parts.len();
    let shape = parts[0].shape().expect("a tensor").to_vec();
    let numel: usize = shape.iter().product();
    let ring = RING.value() >= 2 || (RING.value() == 1 && n > 2 && numel as i64 > RING_ALLREDUCE_THRESHOLD.value());
    if DEBUG.value() >= 2 {
        println!("{} ALLREDUCE {n}x{numel} | {}", if ring { "RING" } else { "NAIVE" }, parts[0].dtype);
    }
    let parts: Vec<UOp> = parts.iter().map(|p| UOp::new(Ops::CONTIGUOUS, p.dtype, [p.clone()], Arg::None)).collect();
    let fold = |xs: Vec<UOp>| xs.into_iter().reduce(|a, b| a.alu(op, &[&b])).expect("at least one");
    if !ring {
        return devs.iter().map(|d| fold(parts.iter().map(|p| copy_to(p, d)).collect())).collect();
    }
    // chunk boundaries: n nearly equal chunks, each a multiple of the largest power of two (up to 32) dividing numel
    let factor = [32, 16, 8, 4, 2].into_iter().find(|f| numel.is_multiple_of(*f)).unwrap_or(1);
    let (base, left) = ((numel / factor) / n, (numel / factor) % n);
    let mut bounds = vec![0];
    (0..n).for_each(|i| bounds.push(bounds[i] + (base + usize::from(i < left)) * factor));
    let flat: Vec<UOp> = parts.iter().map(|p| mop(p, Ops::RESHAPE, vec![numel as i64])).collect();
    let chunk = |j: usize, i: usize| shrink_axis(&flat[j], 0, bounds[i], bounds[i + 1]);
    // chunk i: reduced around the ring from device i, ending on device i-1, then passed on round the ring
    // each device's chunks, in chunk order
    let mut located: Vec<Vec<UOp>> = vec![Vec::with_capacity(n); n];
    for i in 0..n {
        let mut reduced = chunk(i, i);
        for step in 0..n - 1 {
            let dest = (i + step + 1) % n;
            reduced = UOp::new(Ops::COPY, reduced.dtype, [reduced], Arg::Str(devs[dest].as_str().into())).alu(op, &[&chunk(dest, i)]);
        }
        let mut at = (i + n - 1) % n;
        located[at].push(reduced.clone());
        for _ in 0..n - 1 {
            at = (at + 1) % n;
            reduced = UOp::new(Ops::COPY, reduced.dtype, [reduced], Arg::Str(devs[at].as_str().into()));
            located[at].push(reduced.clone());
        }
    }
    located
        .into_iter()
        .map(|chunks| {
            let padded = chunks.iter().enumerate().map(|(i, c)| mop(c, Ops::PAD, vec![bounds[i] as i64, (numel - bounds[i + 1]) as i64]));
            mop(&padded.reduce(|a, b| a.alu(Ops::ADD, &[&b])).expect("n chunks"), Ops::RESHAPE, shape.iter().map(|&d| d as i64).collect())
        })
        .collect()
}

/// The last axis of `new` whose leading dims hold as many elements as `old`'s before `axis`, if its size splits into
/// `n` blocks: where a reshape puts the sharded axis without moving elements between devices.
fn reshaped_axis(old: &[usize], new: &[usize], axis: usize, n: usize) -> Option<usize> {
    let before: usize = old[..axis].iter().product();
    let mut acc = 1;
    let mut found = None;
    for (j, &d) in new.iter().enumerate() {
        if acc == before {
            found = Some(j);
        }
        acc *= d;
    }
    found.filter(|&j| new[j].is_multiple_of(n))
}

/// Lowers one node whose sources are lowered (`vals`).
fn lower_node(u: &UOp, vals: &[Value], default_device: &str) -> Value {
    if u.op == Ops::MULTI {
        let xs: Vec<UOp> = vals
            .iter()
            .map(|v| match v {
                Value::Plain(x) => x.clone(),
                Value::Multi { .. } => panic!("multi: a MULTI of sharded tensors"),
            })
            .collect();
        let devs: Arc<[String]> = xs.iter().map(|x| graph_device(x).unwrap_or_else(|| default_device.to_string())).collect();
        return Value::Multi { xs, axis: multi_axis(u), devs };
    }
    let Some(Value::Multi { axis, devs, xs: first }) = vals.iter().find(|v| matches!(v, Value::Multi { .. })).cloned() else {
        let src: Vec<UOp> = vals.iter().map(|v| if let Value::Plain(x) = v { x.clone() } else { unreachable!() }).collect();
        // (a shard's block moved to its own device: no copy)
        if let (Ops::COPY, Arg::Str(d)) = (u.op, &u.arg) {
            if graph_device(&src[0]).is_some_and(|at| at == **d) {
                return Value::Plain(src[0].clone());
            }
        }
        return Value::Plain(if src.iter().zip(u.src.iter()).all(|(a, b)| a == b) { u.clone() } else { u.with_src(src) });
    };
    let n = devs.len();
    let shape = u.src[0].shape().expect("a tensor").to_vec();
    let per_shard = |xs: &[UOp], arg: &dyn Fn(&UOp) -> Arg| -> Vec<UOp> {
        xs.iter().map(|x| u.replace(u.op, u.dtype, [x.clone()], arg(x), u.tag)).collect()
    };
    let multi = |xs: Vec<UOp>, axis: Option<usize>| Value::Multi { xs, axis, devs: devs.clone() };
    let ints = |u: &UOp| -> Vec<i64> {
        match &u.arg {
            Arg::Ints(v) => v.to_vec(),
            a => panic!("{}: {a:?}", u.op),
        }
    };
    let whole = || {
        if DEBUG.value() >= 2 {
            println!("multi: {} {:?} of shape {shape:?} sharded on {axis:?} gathers it on every device", u.op, u.arg);
        }
        vals[0].on(&devs, None)
    };
    match u.op {
        op if GroupOp::ALU.contains(op)
            || matches!(op, Ops::CAST | Ops::BITCAST | Ops::CONTIGUOUS | Ops::CONTIGUOUS_BACKWARD | Ops::DETACH | Ops::ASSIGN) =>
        {
            // every source sharded like the first sharded one (else replicated)
            let axis = vals.iter().find_map(|v| if let Value::Multi { axis: Some(a), .. } = v { Some(*a) } else { None });
            let srcs: Vec<Vec<UOp>> = vals.iter().map(|v| v.on(&devs, axis)).collect();
            multi((0..n).map(|j| u.with_src(srcs.iter().map(|s| s[j].clone()).collect::<Vec<_>>())).collect(), axis)
        }
        Ops::REDUCE_AXIS => {
            let Arg::ReduceAxis(op, axes) = &u.arg else { unreachable!("REDUCE_AXIS arg") };
            let parts = per_shard(&first, &|_| u.arg.clone());
            match axis {
                Some(a) if axes.contains(&a) => multi(allreduce(*op, &parts, &devs), None),
                _ => multi(parts, axis),
            }
        }
        Ops::RESHAPE => {
            let new: Vec<usize> = ints(u).iter().map(|&d| d as usize).collect();
            let Some(a) = axis else { return multi(per_shard(&first, &|_| u.arg.clone()), None) };
            match reshaped_axis(&shape, &new, a, n) {
                Some(b) => {
                    let local: Vec<i64> = new.iter().enumerate().map(|(i, &d)| if i == b { d / n } else { d } as i64).collect();
                    multi(per_shard(&first, &|_| Arg::Ints(local.clone().into())), Some(b))
                }
                None => multi(whole().iter().map(|x| x.replace(u.op, u.dtype, [x.clone()], u.arg.clone(), u.tag)).collect(), None),
            }
        }
        Ops::PERMUTE => {
            let p = ints(u);
            multi(per_shard(&first, &|_| u.arg.clone()), axis.map(|a| p.iter().position(|&x| x as usize == a).expect("a permutation")))
        }
        Ops::EXPAND => {
            let new = ints(u);
            let keep = |i: usize, d: i64, s: usize| if s == 1 && Some(i) != axis { d } else { s as i64 };
            multi(
                per_shard(&first, &|x| {
                    Arg::Ints(new.iter().zip(x.shape().unwrap()).enumerate().map(|(i, (&d, &s))| keep(i, d, s)).collect())
                }),
                axis,
            )
        }
        Ops::PAD | Ops::SHRINK | Ops::FLIP => {
            let arg = ints(u);
            let Some(a) = axis else { return multi(per_shard(&first, &|_| u.arg.clone()), None) };
            let s = shape[a] / n;
            match u.op {
                Ops::PAD if arg[2 * a] == 0 && arg[2 * a + 1] == 0 => multi(per_shard(&first, &|_| u.arg.clone()), axis),
                Ops::SHRINK if arg[2 * a] == 0 && arg[2 * a + 1] as usize == shape[a] => {
                    let mut local = arg.clone();
                    local[2 * a + 1] = s as i64;
                    multi(per_shard(&first, &|_| Arg::Ints(local.clone().into())), axis)
                }
                // one shard's block: that shard, on its device
                Ops::SHRINK if (arg[2 * a] as usize).is_multiple_of(s) && (arg[2 * a + 1] - arg[2 * a]) as usize == s => {
                    let mut local = arg.clone();
                    (local[2 * a], local[2 * a + 1]) = (0, s as i64);
                    Value::Plain(u.replace(u.op, u.dtype, [first[arg[2 * a] as usize / s].clone()], Arg::Ints(local.into()), u.tag))
                }
                Ops::FLIP if arg[a] == 0 => multi(per_shard(&first, &|_| u.arg.clone()), axis),
                // flipped along the sharded axis: shard j is shard n-1-j flipped, moved to device j
                Ops::FLIP => {
                    let flipped = per_shard(&first, &|_| u.arg.clone());
                    multi((0..n).map(|j| copy_to(&flipped[n - 1 - j], &devs[j])).collect(), axis)
                }
                _ => multi(whole().iter().map(|x| x.replace(u.op, u.dtype, [x.clone()], u.arg.clone(), u.tag)).collect(), None),
            }
        }
        Ops::COPY => {
            let Arg::Str(d) = &u.arg else { unreachable!("COPY arg") };
            Value::Plain(match axis {
                None => first[devs.iter().position(|x| **x == **d).unwrap_or(0)].clone(),
                Some(a) => cat(&first.iter().map(|x| copy_to(x, d)).collect::<Vec<_>>(), a),
            })
            .map(|x| copy_to(&x, d))
        }
        op => panic!("multi: {op} of a sharded tensor is not supported"),
    }
}

impl Value {
    fn map(self, f: impl Fn(UOp) -> UOp) -> Value {
        match self {
            Value::Plain(x) => Value::Plain(f(x)),
            m => m,
        }
    }
}

/// `roots` lowered to single-device graphs: a root that is sharded becomes a MULTI of its per-device graphs (arg
/// the axis, -1 replicated), every other node reads no MULTI. Graphs holding only constants compute on
/// `default_device`.
///
/// # Panics
/// If an op meets tensors sharded over different devices, or an op on a sharded tensor has no rule here.
pub fn lower(roots: &[UOp], default_device: &str) -> Vec<UOp> {
    let mut vals: FxHashMap<UOp, Value> = FxHashMap::default();
    for u in UOp::sink(roots.to_vec()).toposort() {
        if u.op == Ops::SINK {
            continue;
        }
        let src: Vec<Value> = u.src.iter().map(|s| vals[s].clone()).collect();
        let v = lower_node(&u, &src, default_device);
        vals.insert(u, v);
    }
    roots
        .iter()
        .map(|r| match &vals[r] {
            Value::Plain(x) => x.clone(),
            Value::Multi { xs, axis, .. } => UOp::new(Ops::MULTI, xs[0].dtype, xs.clone(), Arg::Int(axis.map_or(-1, |a| a as i64))),
        })
        .collect()
}
