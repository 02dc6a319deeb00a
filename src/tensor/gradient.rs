//! Autograd. In: a tensor-level UOp, the gradient flowing into it, and target UOps. Out: each target's gradient
//! as a UOp graph (lazy, like everything else). One rule per op, applied in reverse topological order over the
//! nodes between the root and the targets; broadcasts sum back through EXPAND. The rules are written with
//! [`Tensor`] ops (so under tensor/, which they build on). Follows tinygrad `gradient.py`.

use super::Tensor;
use crate::dtype::{dtypes, sum_acc_dtype};
use crate::uop::{Arg, Ops, UOp};
use rustc_hash::{FxHashMap, FxHashSet};
use std::f64::consts::{FRAC_PI_2, LN_2};

fn ints(u: &UOp) -> Vec<i64> {
    match &u.arg {
        Arg::Ints(v) => v.to_vec(),
        a => panic!("{}: bad arg {a:?}", u.op),
    }
}

/// The gradients of `ret`'s sources given the gradient `g` of `ret` (`None`: no gradient flows there).
fn rule(ret: &UOp, g: &Tensor) -> Vec<Option<Tensor>> {
    let t = |i: usize| Tensor::from_uop(ret.src[i].clone());
    let r = || Tensor::from_uop(ret.clone());
    let src_shape = || ret.src[0].shape().unwrap().to_vec();
    match ret.op {
        Ops::CAST => vec![Some(g.cast(ret.src[0].dtype))],
        Ops::RECIPROCAL => vec![Some(g.neg() * r() * r())],
        Ops::SIN => vec![Some(t(0).neg().add(FRAC_PI_2).sin() * g)],
        Ops::LOG2 => vec![Some(g.div(t(0) * LN_2))],
        Ops::EXP2 => vec![Some(r() * g * LN_2)],
        Ops::SQRT => vec![Some(g.div(r() * 2.0))],
        Ops::TRUNC => vec![Some(g.zeros_like())],
        Ops::ADD => vec![Some(g.clone()), Some(g.clone())],
        Ops::MUL => vec![Some(t(1) * g), Some(t(0) * g)],
        Ops::MAX => {
            let (x, y) = (t(0), t(1));
            let half = x.eq(&y).where_(g * 0.5, 0.0);
            vec![Some(x.gt(&y).where_(g, &half)), Some(x.lt(&y).where_(g, &half))]
        }
        Ops::POW => {
            let (b, e) = (t(0), t(1));
            let db = e.eq(0.0).where_(&e, &e * b.pow_tensor(&e - 1.0)) * g;
            let de = b.eq(0.0).where_(e.lt(0.0).where_(f64::NEG_INFINITY, 0.0), r() * b.log2() * LN_2) * g;
            vec![Some(db), Some(de)]
        }
        Ops::WHERE => vec![None, Some(t(0).where_(g, 0.0)), Some(t(0).where_(0.0, g))],
        Ops::CMPLT | Ops::CMPNE | Ops::CMPEQ | Ops::DETACH | Ops::BITCAST => vec![None; ret.src.len()],
        Ops::CONTIGUOUS => vec![Some(g.clone())],
        Ops::COPY => vec![Some(g.to(&t(0).device()))],
        // every process's output is the sum of every process's input: each input's gradient sums every output's
        Ops::ALLREDUCE => vec![Some(g.allreduce_processes())],
        // shard j gets its block of the gradient; a replicated tensor's gradient goes through its first shard once
        Ops::MULTI => {
            let (devs, axis) = Tensor::multi_devices(ret);
            (0..ret.src.len()).map(|j| (axis.is_some() || j == 0).then(|| g.shard_part(j, &devs, axis))).collect()
        }
        Ops::CONTIGUOUS_BACKWARD => vec![Some(g.contiguous())],
        // the value passes g on; each input's gradient is its template with g for the placeholder
        Ops::CUSTOM_GRADIENT => {
            let map = FxHashMap::from_iter([(ret.src[1].clone(), g.uop())]);
            let given = ret.src[2..].chunks(2).flat_map(|p| [Some(Tensor::from_uop(p[1].substitute(&map))), None]);
            [Some(g.clone()), None].into_iter().chain(given).collect()
        }
        Ops::RESHAPE => vec![Some(g.reshape(src_shape()))],
        Ops::PERMUTE => {
            let p = ints(ret);
            let mut inv = vec![0i64; p.len()];
            p.iter().enumerate().for_each(|(i, &x)| inv[x as usize] = i as i64);
            vec![Some(g.permute(inv))]
        }
        Ops::EXPAND => {
            let ss = src_shape();
            let axes: Vec<usize> = ss.iter().zip(ret.shape().unwrap()).enumerate().filter(|(_, (s, o))| s != o).map(|(i, _)| i).collect();
            vec![Some(g.cast(sum_acc_dtype(g.dtype())).sum_keepdim(axes).cast(g.dtype()))]
        }
        Ops::PAD => {
            let p = ints(ret);
            vec![Some(
                g.shrink(&src_shape().iter().enumerate().map(|(i, &s)| (p[2 * i] as usize, p[2 * i] as usize + s)).collect::<Vec<_>>()),
            )]
        }
        Ops::SHRINK => {
            let (p, ss) = (ints(ret), src_shape());
            vec![Some(g.pad(&ss.iter().enumerate().map(|(i, &s)| (p[2 * i], s as i64 - p[2 * i + 1])).collect::<Vec<_>>()))]
        }
        Ops::FLIP => {
            let f = ints(ret);
            vec![Some(g.flip(f.iter().enumerate().filter(|(_, &x)| x != 0).map(|(i, _)| i as i64).collect::<Vec<_>>()))]
        }
        Ops::REDUCE_AXIS => {
            let Arg::ReduceAxis(op, axes) = &ret.arg else { unreachable!() };
            let (x, shape) = (t(0), src_shape());
            let ge = g.expand(shape.clone());
            match op {
                Ops::ADD => vec![Some(ge)],
                Ops::MAX => {
                    let mask = x.eq(r().expand(shape.clone())).cast(g.dtype());
                    vec![Some(mask.div(mask.sum_keepdim(axes.to_vec()).expand(shape)) * ge)]
                }
                _ => {
                    // d(prod x)/dx_j: ret/x_j where x_j != 0, else the product of the others when x_j is the only zero
                    let is_zero = x.eq(0.0);
                    let safe = is_zero.where_(1.0, &x);
                    let zeros = is_zero.cast(dtypes::INT32).sum_keepdim(axes.to_vec()).expand(shape.clone());
                    let others = safe.prod_keepdim(axes.to_vec()).expand(shape.clone());
                    let d = is_zero.where_(zeros.eq(1).where_(others, 0.0), r().expand(shape).div(&safe));
                    vec![Some(d * ge)]
                }
            }
        }
        op => panic!("gradient: no rule for {op}"),
    }
}

impl Tensor {
    /// `self`'s values, with the gradient reaching each of `inputs` through `self` given by `grads`, not derived
    /// from `self`'s graph: `grads(g)[i]` is `inputs[i]`'s gradient (of `inputs[i]`'s shape) when `g` (of `self`'s
    /// shape and dtype) flows into `self`. Gradients to tensors other than `inputs` in `self`'s graph are derived as
    /// usual. The graph `grads` builds is kept (lazy) until a gradient needs it. For a gradient cheaper than
    /// the derived one, e.g. [`Tensor::conv2d`]'s input gradient as a transposed convolution.
    ///
    /// # Panics
    /// If a gradient's shape is not its input's.
    pub fn custom_gradient(&self, inputs: &[&Tensor], grads: impl FnOnce(&Tensor) -> Vec<Tensor>) -> Tensor {
        let detached: FxHashMap<UOp, UOp> = inputs.iter().map(|x| (x.uop(), x.detach().uop())).collect();
        let (shape, dtype) = (self.shape(), self.dtype());
        let placeholder = Tensor::from_uop(crate::engine::new_buffer(dtype, shape.iter().product(), &self.device())).reshape(shape);
        let given = grads(&placeholder);
        assert_eq!(given.len(), inputs.len(), "custom_gradient: {} gradients for {} inputs", given.len(), inputs.len());
        let pairs = inputs.iter().zip(&given).flat_map(|(x, dx)| {
            assert_eq!(x.shape(), dx.shape(), "custom_gradient: gradient of shape {:?} for an input of shape {:?}", dx.shape(), x.shape());
            [x.uop(), dx.cast(x.dtype()).uop()]
        });
        let src: Vec<UOp> = [self.uop().substitute(&detached), placeholder.uop()].into_iter().chain(pairs).collect();
        Tensor::from_uop(UOp::new(Ops::CUSTOM_GRADIENT, self.dtype(), src, Arg::None))
    }
}

/// The gradient of `root` with respect to each of `targets`, given `root_grad` flowing into `root` (tinygrad
/// `compute_gradient`); `None` for a target `root` does not depend on.
pub fn compute_gradient(root: &UOp, root_grad: &UOp, targets: &[UOp]) -> Vec<Option<UOp>> {
    let topo = root.toposort();
    let tset: FxHashSet<&UOp> = targets.iter().collect();
    // nodes on a path to a target
    let mut on_path: FxHashSet<&UOp> = FxHashSet::default();
    for u in &topo {
        if tset.contains(u) || u.src.iter().any(|s| on_path.contains(s)) {
            on_path.insert(u);
        }
    }
    let mut grads: FxHashMap<UOp, Tensor> = FxHashMap::default();
    grads.insert(root.clone(), Tensor::from_uop(root_grad.clone()));
    for u in topo.iter().rev() {
        let Some(g) = grads.get(u).cloned() else { continue };
        if !on_path.contains(u) || u.src.is_empty() {
            continue;
        }
        for (s, sg) in u.src.iter().zip(rule(u, &g)) {
            let Some(sg) = sg else { continue };
            if !on_path.contains(s) {
                continue;
            }
            let acc = match grads.remove(s) {
                Some(prev) => prev.add(&sg),
                None => sg,
            };
            grads.insert(s.clone(), acc);
        }
    }
    targets.iter().map(|t| grads.get(t).map(|g| g.uop())).collect()
}
