//! Shape arithmetic on the host (tinygrad's `OnnxRunner` computes shapes in Python). In: a `Shape`, `Size`,
//! `Gather`, `Slice`, `Concat`, `Squeeze`, `Unsqueeze`, `Reshape`, `Cast`, `Identity` or integer `Add`/`Sub`/`Mul`/
//! `Div`/`Max`/`Min` node whose int inputs the host knows ([`HostInts`]: small constants, or shapes). Out: its value
//! on the host, each element a constant or an expression over the graph's bound variables, so a `Reshape` or an
//! `Expand` downstream takes symbolic dims without reading a device buffer (which a TinyJit capture forbids).

use super::{axis_of, dtype_attr, Node};
use crate::dtype::{dtypes, DType};
use crate::tensor::Tensor;
use crate::uop::{Ops, Sint, UOp};

/// The most elements of an int initializer the host keeps a copy of (shapes, axes, counts).
pub const MAX_HOST: usize = 64;

/// An int tensor of rank 0 or 1 whose values the host knows: each a `weakint` constant or an expression over bound
/// variables (a dim of a symbolic shape).
#[derive(Clone, Debug)]
pub struct HostInts {
    /// Its dtype as a tensor.
    pub dtype: DType,
    /// Rank 0 (one value) rather than 1.
    pub scalar: bool,
    /// The values, simplified.
    pub vals: Vec<UOp>,
}

/// `v` as a `weakint` constant.
fn konst(v: i64) -> UOp {
    UOp::const_(dtypes::WEAKINT, v)
}

impl HostInts {
    /// The host copy of `t` when it is a small int tensor of rank 0 or 1 (read now: call outside a capture).
    pub fn of(t: &Tensor) -> Option<HostInts> {
        let ok = t.dtype().is_int() && t.ndim() <= 1 && t.numel() <= MAX_HOST && !t.uop().is_symbolic();
        let vals = ok.then(|| t.cast(dtypes::INT64).to_vec::<i64>().ok()).flatten()?;
        Some(HostInts { dtype: t.dtype(), scalar: t.ndim() == 0, vals: vals.into_iter().map(konst).collect() })
    }
    /// The values when all are constants.
    pub fn consts(&self) -> Option<Vec<i64>> {
        self.vals.iter().map(|v| v.const_int().map(|c| c as i64)).collect()
    }
    /// Whether some value is an expression over variables.
    pub fn is_symbolic(&self) -> bool {
        self.vals.iter().any(|v| v.const_int().is_none())
    }
    /// The values as dims (`None` where one is a negative constant).
    pub fn sints(&self) -> Option<Vec<Sint>> {
        self.vals.iter().map(|v| (v.const_int().is_none_or(|c| c >= 0)).then(|| Sint::from_uop(v))).collect()
    }
    /// The tensor holding these values: a buffer of the constants, or the bound variables' expressions (read by
    /// kernels, so a replay sees each run's values).
    pub fn tensor(&self) -> Tensor {
        let t = match self.consts() {
            Some(c) => Tensor::from_slice(&c, [c.len()]).cast(self.dtype),
            None => {
                let each: Vec<Tensor> = self.vals.iter().map(|v| Tensor::from_uop(v.clone()).cast(self.dtype).reshape([1])).collect();
                each[0].cat(&each[1..].iter().collect::<Vec<_>>(), 0)
            }
        };
        if self.scalar {
            t.reshape([0usize; 0])
        } else {
            t
        }
    }
    fn vector(dtype: DType, vals: Vec<UOp>) -> HostInts {
        HostInts { dtype, scalar: false, vals }
    }
}

/// `node`'s outputs computed on the host, when it is shape arithmetic on values the host knows (`host`, per input;
/// `Shape` and `Size` read only their input's shape); `None` leaves it to the node's handler.
pub fn eval(n: &Node, x: &[Option<Tensor>], host: &[Option<HostInts>]) -> Option<Vec<HostInts>> {
    let h = |i: usize| host.get(i)?.as_ref();
    let c = |i: usize| h(i)?.consts();
    let out = match n.proto.op_type() {
        "Shape" => {
            let dims = x.first()?.as_ref()?.sym_shape();
            let clamp = |v: i64| axis_of(v, dims.len()).clamp(0, dims.len() as i64) as usize;
            let (start, end) = (clamp(n.int("start", 0)), clamp(n.int("end", dims.len() as i64)));
            HostInts::vector(dtypes::INT64, dims[start..end.max(start)].iter().map(Sint::uop).collect())
        }
        "Size" => HostInts { dtype: dtypes::INT64, scalar: true, vals: vec![Sint::product(&x.first()?.as_ref()?.sym_shape()).uop()] },
        "Identity" => h(0)?.clone(),
        "Cast" => {
            let to = dtype_attr(n.int("to", 0)).ok().filter(|d| d.is_int() && d.itemsize() >= 4)?;
            HostInts { dtype: to, ..h(0)?.clone() }
        }
        "Squeeze" if h(0)?.vals.len() == 1 && !h(0)?.scalar => HostInts { scalar: true, ..h(0)?.clone() },
        "Unsqueeze" if h(0)?.scalar => HostInts { scalar: false, ..h(0)?.clone() },
        "Reshape" => {
            let (data, shape) = (h(0)?, c(1)?);
            let len = data.vals.len() as i64;
            let fits = match shape[..] {
                [] => len == 1,
                [d] => d == -1 || d == len,
                _ => false,
            };
            fits.then(|| HostInts { scalar: shape.is_empty(), ..data.clone() })?
        }
        "Concat" => {
            let parts: Vec<&HostInts> = (0..n.proto.input.len()).map(h).collect::<Option<_>>()?;
            let vals = parts.iter().filter(|p| !p.scalar).flat_map(|p| p.vals.iter().cloned()).collect();
            parts.iter().all(|p| !p.scalar).then(|| HostInts::vector(parts[0].dtype, vals))?
        }
        "Gather" if n.int("axis", 0) == 0 && !h(0)?.scalar => {
            let (data, idx) = (h(0)?, h(1)?);
            let len = data.vals.len() as i64;
            let pick = |i: i64| data.vals.get(usize::try_from(if i < 0 { i + len } else { i }).ok()?).cloned();
            HostInts { dtype: data.dtype, scalar: idx.scalar, vals: idx.consts()?.into_iter().map(pick).collect::<Option<_>>()? }
        }
        "Slice" if !h(0)?.scalar => {
            let data = h(0)?;
            let (starts, ends) = (c(1)?, c(2)?);
            let axes = if n.proto.input.len() > 3 && !n.proto.input[3].is_empty() { c(3)? } else { vec![0] };
            let step = if n.proto.input.len() > 4 && !n.proto.input[4].is_empty() { c(4)? } else { vec![1] };
            if starts.len() != 1 || ends.len() != 1 || axis_of(axes[0], 1) != 0 || step != [1] {
                return None;
            }
            let len = data.vals.len() as i64;
            let norm = |v: i64| if v < 0 { v.saturating_add(len) } else { v }.clamp(0, len) as usize;
            let (s, e) = (norm(starts[0]), norm(ends[0]));
            HostInts::vector(data.dtype, data.vals[s..e.max(s)].to_vec())
        }
        op @ ("Add" | "Sub" | "Mul" | "Div" | "Max" | "Min") => {
            let (a, b) = (h(0)?, h(1)?);
            let n_out = a.vals.len().max(b.vals.len());
            if !(a.vals.len() == n_out || a.vals.len() == 1) || !(b.vals.len() == n_out || b.vals.len() == 1) {
                return None;
            }
            let at = |v: &HostInts, i: usize| v.vals[if v.vals.len() == 1 { 0 } else { i }].clone();
            let vals = (0..n_out)
                .map(|i| {
                    let (p, q) = (at(a, i), at(b, i));
                    let r = match op {
                        "Add" => p.alu(Ops::ADD, &[&q]),
                        "Sub" => p.alu(Ops::ADD, &[&-&q]),
                        "Mul" => p.alu(Ops::MUL, &[&q]),
                        // (C division truncates, as ONNX's integer Div; by zero is the handler's to report)
                        "Div" if q.const_int().is_some_and(|d| d != 0) => p.alu(Ops::CDIV, &[&q]),
                        "Max" => p.alu(Ops::MAX, &[&q]),
                        "Min" => -&(-&p).alu(Ops::MAX, &[&-&q]),
                        _ => return None,
                    };
                    Some(r.simplify())
                })
                .collect::<Option<Vec<_>>>()?;
            HostInts { dtype: a.dtype, scalar: a.scalar && b.scalar, vals }
        }
        _ => return None,
    };
    Some(vec![out])
}

/// The dim `-1` stands for in a reshape of `from` to `to` (the other dims): the product of `from`'s factors (each
/// dim split into its multiplied terms) left after `to`'s are taken out, when every term of `to` is one of
/// `from`'s and the constant parts divide.
pub fn infer_dim(from: &[Sint], to: &[Sint]) -> Option<Sint> {
    fn factors(u: &UOp, konst: &mut i128, terms: &mut Vec<UOp>) {
        match (u.op, u.const_int()) {
            (_, Some(c)) => *konst *= c,
            (Ops::MUL, _) => u.src.iter().for_each(|s| factors(s, konst, terms)),
            _ => terms.push(u.clone()),
        }
    }
    let (mut kf, mut tf, mut kt, mut tt) = (1i128, Vec::new(), 1i128, Vec::new());
    from.iter().for_each(|d| factors(&d.uop(), &mut kf, &mut tf));
    to.iter().for_each(|d| factors(&d.uop(), &mut kt, &mut tt));
    for t in tt {
        let i = tf.iter().position(|f| *f == t)?;
        tf.swap_remove(i);
    }
    if kt == 0 || kf % kt != 0 {
        return None;
    }
    let rest = tf.iter().fold(konst((kf / kt) as i64), |acc, t| acc.alu(Ops::MUL, &[t]));
    Some(Sint::from_uop(&rest))
}
