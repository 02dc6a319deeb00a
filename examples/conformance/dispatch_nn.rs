//! Conformance op table: reductions and scans, sorting, processing (matmul, einsum, convolution, pooling,
//! interpolation) and the nn functions (see dispatch.rs). Each parameter is read by position or by tinygrad's
//! keyword name.

use crate::runner::{Args, R};
use serde_json::Value;
use tinygrad::dtype::DType;
use tinygrad::tensor::{Conv2dOpts, InterpolateMode, Pool2dOpts, Reduction, SdpaOpts};
use tinygrad::Tensor;

/// `Some(outputs)` when `op` is one of this table's ops.
pub fn dispatch(op: &str, a: &Args) -> Option<R<Vec<Tensor>>> {
    run(op, a).transpose()
}

/// Parameter `name` of the method: positional argument `i` (0 is `self`) or the keyword.
fn p<'a>(a: &'a Args, i: usize, name: &str) -> Option<&'a Value> {
    a.arg(i).or_else(|| a.kw(name))
}
fn int(a: &Args, i: usize, name: &str, default: i64) -> R<i64> {
    p(a, i, name).map_or(Ok(default), |v| v.as_i64().ok_or_else(|| format!("{name} is not an int: {v}")))
}
fn float(a: &Args, i: usize, name: &str, default: f64) -> R<f64> {
    p(a, i, name).map_or(Ok(default), |v| v.as_f64().ok_or_else(|| format!("{name} is not a number: {v}")))
}
fn flag(a: &Args, i: usize, name: &str, default: bool) -> R<bool> {
    p(a, i, name).map_or(Ok(default), |v| v.as_bool().ok_or_else(|| format!("{name} is not a bool: {v}")))
}
fn text<'a>(a: &'a Args, i: usize, name: &str, default: &'a str) -> R<&'a str> {
    p(a, i, name).map_or(Ok(default), |v| v.as_str().ok_or_else(|| format!("{name} is not a string: {v}")))
}
fn ints(a: &Args, i: usize, name: &str) -> R<Option<Vec<i64>>> {
    p(a, i, name).map(Args::ints_of).transpose()
}
fn tensor(a: &Args, i: usize, name: &str) -> R<Option<Tensor>> {
    p(a, i, name).map(|v| a.tensor_of(v).ok_or_else(|| format!("{name} is not a tensor: {v}"))).transpose()
}
fn usizes(v: Vec<i64>) -> Vec<usize> {
    v.into_iter().map(|x| x as usize).collect()
}
/// The axes of an `axis` parameter: all dims when absent.
fn axes(a: &Args, i: usize, name: &str, x: &Tensor) -> R<Vec<i64>> {
    Ok(ints(a, i, name)?.unwrap_or_else(|| (0..x.ndim() as i64).collect()))
}
fn reduction(a: &Args, i: usize) -> R<Reduction> {
    let r = text(a, i, "reduction", "mean")?;
    Reduction::from_name(r).ok_or_else(|| format!("unknown reduction {r}"))
}
fn dtype(a: &Args, i: usize) -> R<Option<DType>> {
    p(a, i, "dtype").map(|v| v.as_str().and_then(DType::from_name).ok_or_else(|| format!("bad dtype {v}"))).transpose()
}

/// Conv options from `conv2d(weight, bias, groups, stride, dilation, padding, ...)`.
fn conv_opts(a: &Args) -> R<Conv2dOpts> {
    let mut o = Conv2dOpts { groups: int(a, 3, "groups", 1)? as usize, ..Default::default() };
    o.bias = tensor(a, 2, "bias")?;
    if let Some(s) = ints(a, 4, "stride")? {
        o.stride = usizes(s);
    }
    if let Some(d) = ints(a, 5, "dilation")? {
        o.dilation = usizes(d);
    }
    if let Some(pd) = ints(a, 6, "padding")? {
        o.padding = pd;
    }
    Ok(o)
}

/// Pool options from `(kernel_size, stride, dilation, padding, ceil_mode, ...)` starting at position `i`; an int
/// kernel size is repeated `int_kernel_dims` times.
fn pool_opts(a: &Args, i: usize, int_kernel_dims: usize) -> R<Pool2dOpts> {
    let mut o = Pool2dOpts::default();
    if let Some(k) = p(a, i, "kernel_size") {
        o.kernel_size =
            if k.is_number() { vec![k.as_u64().ok_or("bad kernel_size")? as usize; int_kernel_dims] } else { usizes(Args::ints_of(k)?) };
    }
    o.stride = ints(a, i + 1, "stride")?.map(usizes);
    if let Some(d) = ints(a, i + 2, "dilation")? {
        o.dilation = usizes(d);
    }
    if let Some(pd) = ints(a, i + 3, "padding")? {
        o.padding = pd;
    }
    o.ceil_mode = flag(a, i + 4, "ceil_mode", false)?;
    Ok(o)
}

fn run(op: &str, a: &Args) -> R<Option<Vec<Tensor>>> {
    let x = || a.t(0);
    let one = |t: Tensor| Ok(Some(vec![t]));
    let two = |(t, u): (Tensor, Tensor)| Ok(Some(vec![t, u]));
    let need = |i: usize, name: &str| tensor(a, i, name)?.ok_or_else(|| format!("{op}: no {name}"));
    match op {
        "var" | "std" | "var_mean" | "std_mean" => {
            let x = x()?;
            let (ax, keep, corr) = (axes(a, 1, "axis", &x)?, flag(a, 2, "keepdim", false)?, float(a, 3, "correction", 1.0)?);
            match op {
                "var" => one(x.var(ax, keep, corr)),
                "std" => one(x.std(ax, keep, corr)),
                "var_mean" => two(x.var_mean(ax, keep, corr)),
                _ => two(x.std_mean(ax, keep, corr)),
            }
        }
        "any" | "all" => {
            let x = x()?;
            let (ax, keep) = (axes(a, 1, "axis", &x)?, flag(a, 2, "keepdim", false)?);
            one(if op == "any" { x.any(ax, keep) } else { x.all(ax, keep) })
        }
        "argmax" | "argmin" => {
            let (ax, keep) = (p(a, 1, "axis").and_then(Value::as_i64), flag(a, 2, "keepdim", false)?);
            one(if op == "argmax" { x()?.argmax(ax, keep) } else { x()?.argmin(ax, keep) })
        }
        "cumsum" => one(x()?.cumsum(int(a, 1, "axis", 0)?)),
        "cumprod" => one(x()?.cumprod(int(a, 1, "axis", 0)?)),
        "cummax" => two(x()?.cummax(int(a, 1, "axis", 0)?)),
        "cummin" => two(x()?.cummin(int(a, 1, "axis", 0)?)),
        "logcumsumexp" => one(x()?.logcumsumexp(int(a, 1, "axis", 0)?)),
        "sort" => two(x()?.sort(int(a, 1, "dim", -1)?, flag(a, 2, "descending", false)?)),
        "argsort" => one(x()?.argsort(int(a, 1, "dim", -1)?, flag(a, 2, "descending", false)?)),
        "topk" => {
            if !flag(a, 4, "sorted_", true)? {
                return Err("topk: sorted_=False is not supported (as in tinygrad)".into());
            }
            let k = int(a, 1, "k", 0)? as usize;
            two(x()?.topk(k, int(a, 2, "dim", -1)?, flag(a, 3, "largest", true)?))
        }
        "matmul" | "dot" => {
            let (x, w) = (x()?, need(1, if op == "dot" { "w" } else { "x" })?);
            let (x, w) = if op == "matmul" && flag(a, 2, "reverse", false)? { (w, x) } else { (x, w) };
            one(match dtype(a, if op == "dot" { 2 } else { 3 })? {
                Some(dt) => x.cast(dt).matmul(&w.cast(dt)),
                None => x.matmul(&w),
            })
        }
        "einsum" => {
            if a.kw("dtype").is_some() {
                return Err("einsum: dtype is not supported".into());
            }
            let formula = a.arg(0).and_then(Value::as_str).ok_or("einsum: no formula")?;
            let ops: Vec<Tensor> = match a.arg(1) {
                Some(Value::Array(v)) => v.iter().map(|t| a.tensor_of(t).ok_or("einsum: bad operand")).collect::<Result<_, _>>()?,
                _ => a.tensors_from(1)?,
            };
            one(Tensor::einsum(formula, &ops.iter().collect::<Vec<_>>()))
        }
        "linear" => {
            let (mut x, mut w, mut b) = (x()?, need(1, "weight")?, tensor(a, 2, "bias")?);
            if let Some(dt) = dtype(a, 3)? {
                (x, w, b) = (x.cast(dt), w.cast(dt), b.map(|b| b.cast(dt)));
            }
            one(x.linear(&w, b.as_ref()))
        }
        "conv2d" => {
            let mut o = conv_opts(a)?;
            o.dtype = dtype(a, 7)?;
            one(x()?.conv2d(&need(1, "weight")?, o))
        }
        "conv_transpose2d" => {
            let mut o = conv_opts(a)?;
            if let Some(op) = ints(a, 7, "output_padding")? {
                o.output_padding = usizes(op);
            }
            one(x()?.conv_transpose2d(&need(1, "weight")?, o))
        }
        "avg_pool2d" => {
            let o = pool_opts(a, 1, 2)?;
            one(x()?.avg_pool2d(Pool2dOpts { count_include_pad: flag(a, 6, "count_include_pad", true)?, ..o }))
        }
        "max_pool2d" => {
            let o = pool_opts(a, 1, 2)?;
            if flag(a, 6, "return_indices", false)? {
                two(x()?.max_pool2d_with_indices(o))
            } else {
                one(x()?.max_pool2d(o))
            }
        }
        "max_unpool2d" => {
            let x = x()?;
            let o = pool_opts(a, 2, 1)?;
            let size = ints(a, 6, "output_size")?.map(usizes);
            one(x.max_unpool2d(&need(1, "indices")?, o, size.as_deref()))
        }
        "interpolate" => {
            let size = usizes(ints(a, 1, "size")?.ok_or("interpolate: no size")?);
            let mode = match text(a, 2, "mode", "linear")? {
                "linear" => InterpolateMode::Linear,
                "nearest" => InterpolateMode::Nearest,
                "nearest-exact" => InterpolateMode::NearestExact,
                m => return Err(format!("interpolate: unknown mode {m}")),
            };
            one(x()?.interpolate(&size, mode, flag(a, 3, "align_corners", false)?))
        }
        "softmax" | "softmin" => {
            if dtype(a, 2)?.is_some() {
                return Err(format!("{op}: dtype is not supported"));
            }
            let axis = int(a, 1, "axis", -1)?;
            one(if op == "softmax" { x()?.softmax(axis) } else { x()?.softmin(axis) })
        }
        "normalize" => one(x()?.normalize(float(a, 1, "p", 2.0)?, int(a, 2, "dim", 1)?, float(a, 3, "eps", 1e-12)?)),
        "layernorm" => {
            let x = x()?;
            one(x.layernorm(ints(a, 1, "axis")?.unwrap_or(vec![-1]), float(a, 2, "eps", 1e-5)?))
        }
        "batchnorm" => {
            let (w, b) = (tensor(a, 1, "weight")?, tensor(a, 2, "bias")?);
            let (mean, invstd) = (need(3, "mean")?, need(4, "invstd")?);
            one(x()?.batchnorm(w.as_ref(), b.as_ref(), &mean, &invstd, ints(a, 5, "axis")?.unwrap_or(vec![1])))
        }
        "scaled_dot_product_attention" => {
            let o = SdpaOpts {
                attn_mask: tensor(a, 3, "attn_mask")?,
                dropout_p: float(a, 4, "dropout_p", 0.0)?,
                is_causal: flag(a, 5, "is_causal", false)?,
                enable_gqa: flag(a, 6, "enable_gqa", false)?,
            };
            one(x()?.scaled_dot_product_attention(&need(1, "key")?, &need(2, "value")?, o))
        }
        "binary_crossentropy" => one(x()?.binary_crossentropy(&need(1, "Y")?, reduction(a, 2)?)),
        "binary_crossentropy_logits" => {
            one(x()?.binary_crossentropy_logits(&need(1, "Y")?, reduction(a, 2)?, tensor(a, 3, "pos_weight")?.as_ref()))
        }
        "cross_entropy" => one(x()?.cross_entropy(&need(1, "Y")?, reduction(a, 2)?, float(a, 3, "label_smoothing", 0.0)?)),
        "sparse_categorical_crossentropy" => one(x()?.sparse_categorical_crossentropy(
            &need(1, "Y")?,
            int(a, 2, "ignore_index", -1)?,
            float(a, 3, "label_smoothing", 0.0)?,
            reduction(a, 4)?,
        )),
        "nll_loss" => {
            let ignore = p(a, 3, "ignore_index").and_then(Value::as_i64);
            one(x()?.nll_loss(&need(1, "Y")?, tensor(a, 2, "weight")?.as_ref(), ignore, reduction(a, 4)?))
        }
        _ => Ok(None),
    }
}
