//! The `com.microsoft` ops that exported transformers use (onnxruntime's contrib operators; tinygrad `nn/onnx.py`
//! has Attention, SkipLayerNormalization, EmbedLayerNormalization, BiasGelu, FastGelu): fused activations, skip and
//! embedding layer norms, the packed-QKV `Attention`, `FusedMatMul` and the 4-bit `MatMulNBits`.

use super::{arg, one, opt, Handler, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::{Index, Tensor};

/// `x` normalized over its last dim (`eps`), scaled by `gamma` and shifted by `beta`; with the mean and inverse
/// standard deviation.
fn layer_norm(x: &Tensor, gamma: &Tensor, beta: Option<&Tensor>, eps: f64) -> (Tensor, Tensor, Tensor) {
    let mean = x.mean_keepdim(-1);
    let inv = x.sub(&mean).square().mean_keepdim(-1).add(eps).rsqrt();
    let y = x.sub(&mean).mul(&inv).mul(gamma);
    (beta.map_or(y.clone(), |b| y.add(b)), mean, inv)
}

/// `SkipLayerNormalization(input, skip, gamma, beta, bias)`: layer norm of `input + skip + bias`; outputs the
/// result, the mean, the inverse standard deviation and the sum.
fn skip_layer_norm(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let sum = arg(a, 0)?.add(arg(a, 1)?);
    let sum = opt(a, 4).map_or(sum.clone(), |b| sum.add(b));
    let (y, mean, inv) = layer_norm(&sum, arg(a, 2)?, opt(a, 3), n.float("epsilon", 1e-12) as f64);
    Ok(vec![y, mean, inv, sum])
}

/// `SkipSimplifiedLayerNormalization(input, skip, gamma, bias)`: RMS norm of `input + skip + bias`.
fn skip_rms_norm(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let sum = arg(a, 0)?.add(arg(a, 1)?);
    let sum = opt(a, 3).map_or(sum.clone(), |b| sum.add(b));
    let inv = sum.square().mean_keepdim(-1).add(n.float("epsilon", 1e-12) as f64).rsqrt();
    Ok(vec![sum.mul(&inv).mul(arg(a, 2)?), Tensor::full_dtype([1usize; 0], 0.0, sum.dtype()), inv, sum])
}

/// `EmbedLayerNormalization(input_ids, segment_ids, word, position, segment, gamma, beta, mask, position_ids)`: the
/// word, position (0.. or `position_ids`) and segment embeddings summed and layer-normalized; outputs the result,
/// the mask index (tokens per sequence, int32) and the sum.
fn embed_layer_norm(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let ids = arg(a, 0)?;
    let (batch, seq) = (ids.shape()[0], ids.shape()[1]);
    let take = |table: &Tensor, idx: &Tensor| table.getitem(&[Index::Tensor(idx.clone())]);
    let pos = match opt(a, 8) {
        Some(p) => p.expand([batch as i64, seq as i64]),
        None => Tensor::arange(0.0, seq as f64, 1.0).cast(dtypes::INT64).reshape([1, seq]).expand([batch as i64, seq as i64]),
    };
    let mut sum = take(arg(a, 2)?, ids).add(take(arg(a, 3)?, &pos));
    if let (Some(seg), Some(table)) = (opt(a, 1), opt(a, 4)) {
        sum = sum.add(take(table, seg));
    }
    let (y, _, _) = layer_norm(&sum, arg(a, 5)?, opt(a, 6), n.float("epsilon", 1e-12) as f64);
    let mask = opt(a, 7)
        .map_or_else(|| Tensor::full_dtype([batch], seq as i64, dtypes::INT32), |m| m.cast(dtypes::INT32).sum(1).cast(dtypes::INT32));
    Ok(vec![y, mask, sum])
}

/// `Attention(input, weights, bias, mask_index, past)` (contrib): one packed QKV projection split by
/// `qkv_hidden_sizes`, `num_heads` heads, `scale` (default `1/sqrt(head)`), a mask (per-sequence lengths, or a
/// 0/1 mask of keys) and `unidirectional` causality filled with `mask_filter_value`; past keys and values prepended
/// and returned stacked as `present`.
fn attention(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, w) = (arg(a, 0)?, arg(a, 1)?);
    let (batch, seq) = (x.shape()[0], x.shape()[1]);
    let heads = n.int("num_heads", 1) as usize;
    let sizes: Vec<usize> = n.ints("qkv_hidden_sizes").map_or(vec![w.shape()[1] / 3; 3], |v| v.iter().map(|&s| s as usize).collect());
    let qkv = x.linear(w, opt(a, 2));
    let parts = qkv.split_sizes(&sizes, 2);
    let split = |t: &Tensor| t.reshape([batch as i64, seq as i64, heads as i64, -1]).permute([0, 2, 1, 3]);
    let (q, mut k, mut v) = (split(&parts[0]), split(&parts[1]), split(&parts[2]));
    let mut present = None;
    if let Some(p) = opt(a, 4) {
        k = p.getitem(&[Index::Int(0)]).cat(&[&k], 2);
        v = p.getitem(&[Index::Int(1)]).cat(&[&v], 2);
        present = Some(k.stack(&[&v], 0));
    }
    let scale = match n.attr("scale") {
        Some(s) if s.f() != 0.0 => s.f() as f64,
        _ => 1.0 / ((sizes[0] / heads) as f64).sqrt(),
    };
    let fill = n.float("mask_filter_value", -10000.0) as f64;
    let mut scores = q.matmul(&k.transpose(-1, -2)).mul(scale);
    let keys = k.shape()[2];
    if let Some(m) = opt(a, 3) {
        let allowed = if m.ndim() == 1 {
            Tensor::arange(0.0, keys as f64, 1.0).cast(dtypes::INT64).reshape([1, keys]).lt(m.cast(dtypes::INT64).reshape([batch, 1]))
        } else {
            m.ne(0)
        };
        let allowed = (allowed.ndim()..4).fold(allowed, |t, _| t.unsqueeze(1));
        scores = allowed.where_(&scores, fill);
    }
    if n.int("unidirectional", 0) != 0 {
        let past = keys - seq;
        let causal = Tensor::arange(0.0, keys as f64, 1.0)
            .reshape([1, keys])
            .le(Tensor::arange(past as f64, (past + seq) as f64, 1.0).reshape([seq, 1]));
        scores = causal.where_(&scores, fill);
    }
    let y = scores.softmax(-1).matmul(&v).permute([0, 2, 1, 3]).reshape([batch as i64, seq as i64, -1]);
    Ok(match present {
        Some(p) => vec![y, p],
        None => vec![y],
    })
}

/// `FusedMatMul(A, B)`: `alpha · A' · B'` with the last two dims of `A`/`B` transposed under `transA`/`transB`.
fn fused_matmul(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let t = |x: &Tensor, on: bool| if on { x.transpose(-1, -2) } else { x.clone() };
    let ab = t(arg(a, 0)?, n.int("transA", 0) != 0).matmul(&t(arg(a, 1)?, n.int("transB", 0) != 0));
    one(ab.mul(n.float("alpha", 1.0) as f64))
}

/// `MatMulNBits(A, B, scales, zero_points, g_idx, bias)`: `A · Wᵀ` with `W` `(N, K)` stored as `bits`-bit codes
/// (4 or 8) packed little end first in blocks of `block_size` along `K`, each block `(code - zero) · scale` (zero
/// `2^(bits-1)` without zero points; packed like the codes when uint8, else float per block).
fn matmul_nbits(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, packed, scales) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
    let (k, nn, bits, block) =
        (n.int("K", 0) as usize, n.int("N", 0) as usize, n.int("bits", 4) as usize, n.int("block_size", 32) as usize);
    if bits != 4 && bits != 8 {
        return Err(format!("MatMulNBits with {bits} bits is not supported"));
    }
    let blocks = k.div_ceil(block);
    let unpack = |b: &Tensor, count: usize| -> Tensor {
        let b = b.cast(dtypes::INT32);
        if bits == 8 {
            return b;
        }
        let lo = b.bitwise_and(15);
        let hi = b.rshift(4).bitwise_and(15);
        let s = lo.shape();
        let both = lo.unsqueeze(-1).cat(&[&hi.unsqueeze(-1)], -1).reshape([s[..s.len() - 1].to_vec(), vec![s[s.len() - 1] * 2]].concat());
        both.getitem(&[Index::Ellipsis, Index::Slice(None, Some(count as i64), None)])
    };
    let codes = unpack(&packed.reshape([nn, blocks, packed.numel() / (nn * blocks)]), block).cast(dtypes::FLOAT32);
    let zero = match opt(a, 3) {
        Some(z) if z.dtype() == dtypes::UINT8 => {
            unpack(&z.reshape([nn, z.numel() / nn]), blocks).cast(dtypes::FLOAT32).reshape([nn, blocks, 1])
        }
        Some(z) => z.cast(dtypes::FLOAT32).reshape([nn, blocks, 1]),
        None => Tensor::full_dtype([1usize, 1, 1], (1 << (bits - 1)) as f64, dtypes::FLOAT32),
    };
    let w = codes.sub(zero).mul(scales.cast(dtypes::FLOAT32).reshape([nn, blocks, 1])).reshape([nn, blocks * block]);
    let w = w.getitem(&[Index::Slice(None, None, None), Index::Slice(None, Some(k as i64), None)]).cast(x.dtype());
    let y = x.matmul(&w.transpose(0, 1));
    one(opt(a, 5).map_or(y.clone(), |b| y.add(b)))
}

/// The handler of `op` in `com.microsoft`.
pub(super) fn handler(op: &str) -> Option<Handler> {
    Some(match op {
        "Gelu" => |_, a| one(arg(a, 0)?.gelu_erf()),
        "BiasGelu" => |_, a| one(arg(a, 0)?.add(arg(a, 1)?).gelu_erf()),
        "FastGelu" => |_, a| {
            let x = arg(a, 0)?;
            one(opt(a, 1).map_or(x.clone(), |b| x.add(b)).gelu())
        },
        "QuickGelu" => |n, a| {
            let x = arg(a, 0)?;
            one(x.mul(x.mul(n.float("alpha", 1.702) as f64).sigmoid()))
        },
        "BiasAdd" => |_, a| one(arg(a, 0)?.add(arg(a, 1)?).add(arg(a, 2)?)),
        "SkipLayerNormalization" => skip_layer_norm,
        "SkipSimplifiedLayerNormalization" => skip_rms_norm,
        "EmbedLayerNormalization" => embed_layer_norm,
        "Attention" => attention,
        "FusedMatMul" => fused_matmul,
        "MatMulNBits" => matmul_nbits,
        _ => return None,
    })
}
