//! The Transformer (tinygrad `llm/model.py`). In: a GGUF model's metadata and weights, token ids and the
//! position of the first. Out: next-token logits, with each layer's keys and values kept in a KV cache. Covers the
//! `llama` architecture (RMSNorm, RoPE on GGUF's interleaved q/k pairs, Llama 3's frequency divisors, grouped-query
//! attention, SwiGLU), `qwen2` (llama's with biases on q, k and v, and RoPE on halves), `qwen3` (llama's with QK-norm
//! and RoPE on halves: the tinygrad `llm` models `qwen3:0.6b` and up) and `gemma3` (embeddings scaled by √dim,
//! QK-norm, norms after attention and FFN, GeGLU, RoPE on halves, local layers with a sliding window and their own
//! RoPE base). Weights stay quantized as the file has them: on the CPU the projections take integer dot products with
//! the repacked quants (`QuantMatrix`), elsewhere (and for the token embeddings) a lazy dequantization of the bytes,
//! which the kernels that read it fuse.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::nn::gguf::{GgufFile, GgufValue, QuantMatrix, QuantRows};
use crate::uop::Sint;
use crate::{dtypes, Tensor};
use std::cell::OnceCell;

/// Which family of Transformer a GGUF file holds (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama and its kin (SmolLM2, Qwen-style llama files).
    Llama,
    /// Qwen 2 and 2.5 (and their distillations, DeepSeek-R1-Distill-Qwen): llama's layers with q, k and v biases.
    Qwen2,
    /// Qwen 3 (dense): llama's layers with an RMSNorm over each head of q and k before RoPE.
    Qwen3,
    /// Gemma 3.
    Gemma3,
}

/// Hyper-parameters from GGUF metadata (`{arch}.*` keys).
#[derive(Clone, Debug)]
pub struct Config {
    pub arch: Arch,
    /// Model width (`embedding_length`).
    pub dim: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    /// Width of one attention head (`attention.key_length`, else dim / heads).
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub eps: f32,
    /// RoPE base of the global layers.
    pub rope_theta: f32,
    /// RoPE base of Gemma 3's local (sliding-window) layers.
    pub rope_local_theta: f32,
    /// Divisors of the global layers' RoPE frequencies, one per pair of a head's dims (`[head_dim / 2]`: the
    /// `rope_freqs` tensor of Llama 3.1 and 3.2 files, their long-context scaling, as llama.cpp's `freq_factors`).
    pub rope_factors: Option<Vec<f32>>,
    /// Tokens a local layer attends to (Gemma 3); `None`: every layer is global.
    pub sliding_window: Option<usize>,
    /// Vocabulary size.
    pub vocab: usize,
    /// Longest context the KV cache holds.
    pub max_context: usize,
}

/// One layer's weights (lazy dequantizations, `[out, in]` as GGUF stores them).
struct Block {
    attn_norm: Tensor,
    q: Weight,
    k: Weight,
    v: Weight,
    o: Weight,
    /// q, k and v's biases (Qwen 2), each `[out]`.
    qkv_bias: Option<[Tensor; 3]>,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    post_attn_norm: Option<Tensor>,
    ffn_norm: Tensor,
    gate: Weight,
    up: Weight,
    down: Weight,
    post_ffn_norm: Option<Tensor>,
    /// q, k and v's integer matrices stacked into one where they have the same type ([`QuantMatrix::cat`]): one launch
    /// and one weight stream where there were three. The parts' [`Weight::q`] are then None.
    qkv: Option<QuantMatrix>,
    /// gate and up's integer matrices stacked likewise.
    gate_up: Option<QuantMatrix>,
    /// Whether this layer attends through a sliding window (Gemma 3's local layers).
    local: bool,
}

/// A projection's `[out, in]` weight: its lazy dequantization, and on the CPU, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
/// Q5_K and Q6_K, its repacking for integer dot products, which every pass takes (see [`Input`]).
struct Weight {
    w: Tensor,
    /// None on other devices and types, under `QUANT_DOT=0`, and where the block holds it stacked with others.
    q: Option<QuantMatrix>,
}

/// Where a forward pass starts: a known position, or a bound symbolic variable (one compiled graph for every
/// position: a TinyJit-replayed prefill chunk) with the cache rows it attends over (`span`, past the last position:
/// rounded up to a multiple of 128, so one graph serves 128 positions; a prompt chunk must end in its span's last 128
/// rows, which Gemma 3's local layers rely on to skip rows before their window, while the rows of a batched decode
/// step may share their largest span); or a bound variable position attending over [`Transformer::decode_block`]
/// times the bound variable `blocks` rows (`Blocks(start, blocks)`: one compiled graph for every position and span,
/// as tinygrad's decode attends over `start_pos + 1` rows: a decode step's token, or a prompt chunk,
/// [`Transformer::chunk_blocks`]).
#[derive(Clone, Copy)]
pub enum StartPos<'a> {
    Const(usize),
    Var(&'a Tensor, usize),
    Blocks(&'a Tensor, &'a Tensor),
}

/// The granule of the cache rows a pass over a constant span attends over ([`StartPos::Var`]): its spans are multiples
/// of it (each a graph of its own), and a KV cache holds a whole number of them.
pub const SPAN: usize = 128;

/// The granule of the cache rows a decode step (or a prompt chunk over a variable span) on the CPU attends over:
/// `blocks` (a bound variable) of it ([`StartPos::Blocks`], [`Transformer::decode_block`]). Finer than [`SPAN`], as a
/// step reads half a granule of rows past its position on average, and coarse enough for a static axis of keys to
/// split over the cores (SmolLM2's 4-row batched step at positions 128-192, `DEBUG=2` medians: attention 1,226 us at
/// 128 rows a block, 947-1,059 at 32; 16 was slower, 64 about the same).
pub const BLOCK: usize = 32;

/// The rows of a KV cache for a context of `ctx` tokens: `ctx` rounded up to a multiple of [`SPAN`].
fn cache_rows(ctx: usize) -> usize {
    ctx.div_ceil(SPAN) * SPAN
}

/// One sequence of a forward pass: its cache, where its tokens enter it, how many of the pass's tokens are its (they
/// follow the earlier sequences'), and which of them gives its logits: the token at a bound variable's index, or
/// (None) its last.
struct Seq<'a> {
    cache: &'a KvCache,
    start: StartPos<'a>,
    len: usize,
    pick: Option<&'a Tensor>,
}

/// One sequence's KV cache: for each layer, its keys and values, `[rows, n_kv_heads * head_dim]` (rows: the context
/// rounded up to a multiple of [`SPAN`]) of the model's cache dtype (float16, or float32 under `HALF_KV=0`), written
/// in place by the forward passes that use it. Cloning shares the buffers.
#[derive(Clone)]
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
}

impl KvCache {
    /// The cache's tensors, each layer's keys then its values (`2 * n_layers` of `[rows, n_kv_heads *
    /// head_dim]`): passed to a TinyJit as inputs, one capture serves every cache of the model.
    pub fn tensors(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect()
    }

    /// The cache whose tensors [`KvCache::tensors`] listed (sharing their buffers).
    ///
    /// # Panics
    /// If `tensors` has an odd length.
    pub fn from_tensors(tensors: &[Tensor]) -> KvCache {
        assert!(tensors.len().is_multiple_of(2), "KvCache::from_tensors: {} tensors, not key and value pairs", tensors.len());
        KvCache { layers: tensors.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect() }
    }
}

/// A Transformer with its KV cache (tinygrad `llm.model.Transformer`).
pub struct Transformer {
    pub cfg: Config,
    /// The device the weights and caches live on.
    pub device: String,
    tok_embd: Tensor,
    blocks: Vec<Block>,
    output_norm: Tensor,
    /// The output projection (the token embedding's when tied).
    output: Weight,
    /// The KV cache's dtype: float16, or float32 under `HALF_KV=0` (read at load).
    kv_dtype: DType,
}

fn meta<'a>(file: &'a GgufFile, key: &str) -> Result<&'a GgufValue> {
    file.metadata.get(key).ok_or_else(|| Error::Format { path: file.path.clone(), msg: format!("metadata `{key}` is missing") })
}

fn meta_usize(file: &GgufFile, key: &str) -> Result<usize> {
    meta(file, key)?.as_usize().ok_or_else(|| Error::Format { path: file.path.clone(), msg: format!("metadata `{key}` is not an integer") })
}

fn meta_f32(file: &GgufFile, key: &str, default: f32) -> f32 {
    file.metadata.get(key).and_then(GgufValue::as_f32).unwrap_or(default)
}

impl Config {
    /// The configuration in `file`'s metadata, with a KV cache of `max_context` tokens (at most the model's).
    ///
    /// # Errors
    /// [`Error::Format`] for an architecture other than `llama`, `qwen2`, `qwen3` and `gemma3`, a missing key, RoPE
    /// scaling by `rope.scaling.type` (linear, YaRN), which is not implemented, or a `rope_freqs` tensor that is not
    /// `head_dim / 2` floats.
    pub fn from_gguf(file: &GgufFile, max_context: usize) -> Result<Config> {
        let name = meta(file, "general.architecture")?.as_str().unwrap_or("").to_string();
        let arch = match name.as_str() {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            a => {
                return Err(Error::Format {
                    path: file.path.clone(),
                    msg: format!("architecture `{a}` is not supported (llama, qwen2, qwen3 and gemma3 are)"),
                })
            }
        };
        let k = |s: &str| format!("{name}.{s}");
        // (RoPE scaling changes every position's angle: a file that asks for one not done here would run wrong, so it is
        // refused; Llama 3's is its `rope_freqs` tensor, below)
        let scaling = file.metadata.get(&k("rope.scaling.type")).and_then(GgufValue::as_str).filter(|t| *t != "none");
        if let Some(t) = scaling {
            return Err(Error::Format { path: file.path.clone(), msg: format!("RoPE scaling `{t}` is not supported yet") });
        }
        let dim = meta_usize(file, &k("embedding_length"))?;
        let n_heads = meta_usize(file, &k("attention.head_count"))?;
        let head_dim = meta_usize(file, &k("attention.key_length")).unwrap_or(dim / n_heads.max(1));
        let rope_factors = match file.info("rope_freqs.weight") {
            Some(_) => Some(file.tensor("rope_freqs.weight", "CPU")?.cast(dtypes::FLOAT32).to_vec::<f32>()?),
            None => None,
        };
        if rope_factors.as_ref().is_some_and(|f| 2 * f.len() != head_dim) {
            return Err(Error::Format {
                path: file.path.clone(),
                msg: format!("`rope_freqs` is not {} floats (head_dim / 2)", head_dim / 2),
            });
        }
        let vocab = match file.metadata.get(&k("vocab_size")).and_then(GgufValue::as_usize) {
            Some(v) => v,
            None => meta(file, "tokenizer.ggml.tokens")?.as_array().map_or(0, <[GgufValue]>::len),
        };
        Ok(Config {
            arch,
            dim,
            n_layers: meta_usize(file, &k("block_count"))?,
            n_heads,
            n_kv_heads: meta_usize(file, &k("attention.head_count_kv")).unwrap_or(n_heads),
            head_dim,
            eps: meta_f32(file, &k("attention.layer_norm_rms_epsilon"), 1e-5),
            rope_theta: meta_f32(file, &k("rope.freq_base"), 10000.0),
            rope_local_theta: 10000.0,
            rope_factors,
            sliding_window: (arch == Arch::Gemma3).then(|| meta_usize(file, &k("attention.sliding_window")).unwrap_or(512)),
            vocab,
            max_context: max_context.min(meta_usize(file, &k("context_length")).unwrap_or(max_context)).max(1),
        })
    }
}

/// `x` normalized by its root mean square over the last axis, times `w`.
fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Tensor {
    let ms = x.square().mean_keepdim(-1);
    &(x * &(ms + eps).rsqrt()) * w
}

/// A projection's input `[n, in]`, quantized once for all the weights that take it by integer dot products (llama.cpp's
/// way, in prefill and decode alike). Each row is quantized alone and the integer kernels are batch-invariant, so a
/// sequence's tokens do not depend on how its prompt was chunked or which other sequences shared its steps.
struct Input {
    x: Tensor,
    q: OnceCell<QuantRows>,
}

impl Input {
    fn new(x: Tensor) -> Input {
        Input { x, q: OnceCell::new() }
    }
}

/// `x @ w.T` for a GGUF weight `w` of `[out, in]`: by integer dot products where `w` has them.
fn project(x: &Input, w: &Weight) -> Tensor {
    match &w.q {
        Some(q) => project_q(x, q),
        _ => x.x.matmul(&w.w.transpose(0, 1)),
    }
}

/// `x @ q.T` by integer dot products.
fn project_q(x: &Input, q: &QuantMatrix) -> Tensor {
    q.matmul_t(x.q.get_or_init(|| QuantRows::new(&x.x.contiguous())))
}

/// `ws`' integer matrices stacked and realized, each weight then dropping its own; None (the weights left as they
/// are) where one has none or they differ in type.
fn fuse(ws: &mut [&mut Weight]) -> Result<Option<QuantMatrix>> {
    let parts: Option<Vec<&QuantMatrix>> = ws.iter().map(|w| w.q.as_ref()).collect();
    let Some(mut m) = parts.and_then(|p| QuantMatrix::cat(&p)) else { return Ok(None) };
    m.realize()?;
    for w in ws.iter_mut() {
        w.q = None;
    }
    Ok(Some(m))
}

/// RoPE's rotation at positions `pos` (`[T]`, float32) for head size `d`, each frequency divided by its `factors` entry
/// when given (`[d / 2]`): `(cos, sin)`, each `[T, 1, d / 2]` float32, realized once per pass and read by every layer
/// (computed in each layer's kernels, they were 4 `sinf` per element).
fn rope_angles(pos: &Tensor, theta: f32, d: usize, factors: Option<&[f32]>, device: &str) -> (Tensor, Tensor) {
    let (t, half) = (pos.shape()[0], d / 2);
    let inv: Vec<f32> = (0..half).map(|i| theta.powf(-2.0 * i as f32 / d as f32) / factors.map_or(1.0, |f| f[i])).collect();
    let angle = pos.reshape([t, 1, 1]) * Tensor::from_slice(&inv, [1, 1, half]).to(device);
    (angle.cos().contiguous(), angle.sin().contiguous())
}

/// RoPE over the last axis of `x` (`[T, heads, head_dim]`) by the angles of [`rope_angles`]: pairs of neighbours
/// rotate (`interleaved`, llama's GGUF layout) or the two halves do (Gemma's).
fn rope(x: &Tensor, (cos, sin): &(Tensor, Tensor), interleaved: bool) -> Tensor {
    let (t, h, d) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    let half = d / 2;
    let (a, b) = if interleaved {
        let p = x.reshape([t, h, half, 2]);
        (
            p.shrink(&[(0, t), (0, h), (0, half), (0, 1)]).reshape([t, h, half]),
            p.shrink(&[(0, t), (0, h), (0, half), (1, 2)]).reshape([t, h, half]),
        )
    } else {
        (x.shrink(&[(0, t), (0, h), (0, half)]), x.shrink(&[(0, t), (0, h), (half, d)]))
    };
    let (ra, rb) = (&(&a * cos) - &(&b * sin), &(&a * sin) + &(&b * cos));
    if interleaved {
        ra.stack(&[&rb], -1).reshape([t, h, d])
    } else {
        ra.cat(&[&rb], -1)
    }
}

/// Sequences whose attention runs as one set of kernels: their range among a pass's sequences, their tokens' range
/// among its tokens, the cache rows they attend over (the span's dims: see [`attention`]), their causal mask and
/// sliding-window mask (`[rows, span dims..]`), and where their local layers read only their window's blocks, that
/// read ([`Window`]).
type Group = (std::ops::Range<usize>, std::ops::Range<usize>, Vec<Sint>, (Tensor, Option<Tensor>), Option<Window>);

/// The cache rows the local layers of sequences over a [`StartPos::Blocks`] span read (Gemma 3's sliding window): each
/// sequence's first cache row (a multiple of the block, a symbolic expression of its bound start), the key dims
/// (`[min(blocks, n), block]`: the `n` blocks that hold any window of `w` rows of a sequence's `T` tokens, fewer while
/// the span is shorter) and the window mask over them (`[rows, min(blocks, n), block]`).
type Window = (Vec<Sint>, Vec<Sint>, Tensor);

/// A group's local-layer read ([`Window`]), where it reads fewer rows than the span can: a model with a sliding window
/// of `w` rows, sequences of `T` tokens each over a [`StartPos::Blocks`] span that may pass the `n` blocks of `w + T +
/// block - 2` rows (any window of the tokens' keys lies in them: from the block holding the first's, `start - w + 1`;
/// the cache, `cap` rows, holds the span's most, so those too). None elsewhere.
fn window_read(c: &Config, cap: usize, seqs: &[Seq], pos: &Tensor, span: &[Sint]) -> Option<Window> {
    let (Some(w), [blocks, Sint::Int(block)]) = (c.sliding_window, span) else { return None };
    let (block, t) = (*block, seqs[0].len);
    let n = (w + t + block - 2).div_ceil(block);
    if seqs.iter().any(|s| s.len != t) || blocks.max() <= n {
        return None;
    }
    // a sequence's first row: the block holding its first token's window's first row (at least 0; at most the row
    // whose n blocks end at the cache's end), as a dim for the reads and in float32 for the mask of each of its tokens
    let last = cap - n * block;
    let (starts, firsts): (Vec<Sint>, Vec<Tensor>) = seqs
        .iter()
        .map(|s| match s.start {
            StartPos::Blocks(v, _) => {
                let p = v.uop();
                let first = Sint::from_uop(&((&p - (w as i64 - 1)).maximum(0i64) / block as i64 * block as i64).minimum(last as i64));
                let f = ((v.cast(dtypes::FLOAT32).reshape([1]) - (w as f32 - 1.0)).maximum(0.0f32) / block as f32).floor();
                (first, (f * block as f32).minimum(last as f32).expand([t]))
            }
            _ => unreachable!("a span of blocks is a Blocks start's"),
        })
        .unzip();
    let (rows, kb) = (pos.shape()[0], Sint::from_uop(&blocks.uop().minimum(n as i64)));
    let first = firsts[0].cat(&firsts[1..].iter().collect::<Vec<_>>(), 0).reshape([rows, 1, 1]);
    let b = Tensor::arange(0.0, n as f64, 1.0).shrink_sym(&[(0.into(), kb.clone())]).reshape_sym(&[1.into(), kb.clone(), 1.into()]);
    let j = first + b * block as f64 + Tensor::arange(0.0, block as f64, 1.0).reshape([1, 1, block]);
    let qpos = pos.reshape([rows, 1, 1]);
    let mask = j.le(&qpos).bitwise_and(j.gt(&(&qpos - w as f32)));
    Some((starts, vec![kb, Sint::Int(block)], mask))
}

/// `cache` (`[rows, width]`) with rows `start..start+T` replaced by `x` (`[T, width]`, cast to the cache's
/// dtype).
fn write_rows(cache: &Tensor, x: &Tensor, start: StartPos) -> Tensor {
    let (ctx, t, w) = (cache.shape()[0], x.shape()[0], x.shape()[1]);
    let x = &x.cast(cache.dtype());
    let rows = Tensor::arange(0.0, ctx as f64, 1.0).reshape([ctx, 1]);
    match start {
        StartPos::Const(s) => {
            let mask = rows.ge(s as f32).bitwise_and(rows.lt((s + t) as f32));
            mask.where_(x.pad(&[(s as i64, (ctx - s - t) as i64), (0, 0)]), cache)
        }
        // (an integer compare of the row with the variable: codegen stores the one row it pins)
        StartPos::Var(var, _) | StartPos::Blocks(var, _) if t == 1 => {
            rows.cast(dtypes::INT32).eq(var.cast(dtypes::INT32).reshape([1, 1])).where_(x, cache)
        }
        StartPos::Var(var, _) | StartPos::Blocks(var, _) => {
            // row r takes token r - start when that is in 0..T: a one-hot sum codegen turns into a gated load,
            // stored only in the rows it covers
            let off = &rows.cast(dtypes::INT32) - &var.cast(dtypes::INT32).reshape([1, 1]);
            let mask = off.ge(0).bitwise_and(off.lt(t as i32));
            let at = off.reshape([ctx, 1, 1]).eq(Tensor::arange(0.0, t as f64, 1.0).cast(dtypes::INT32).reshape([1, t, 1]));
            mask.where_(at.where_(x.reshape([1, t, w]), 0.0f32).sum(1), cache)
        }
    }
}

/// Attention of `B` sequences' queries `q` (`[B * T, heads * head_dim]`, T a sequence) over rows `starts[b]..` of
/// their caches (`layers[b]`: layer's keys and values of sequence b), as many as the span's dims `keys` hold (`[span]`,
/// or `[blocks, block]` where `blocks` is symbolic: the kernels then see a static axis of keys to upcast and thread),
/// key rows masked by `visible` (`[B * T, keys..]`, true where seen); each query head attends over its group's key
/// head. Out: `[B * T, heads * head_dim]`.
fn attention(q: &Tensor, layers: &[&(Tensor, Tensor)], visible: &Tensor, (starts, keys): (&[Sint], &[Sint]), c: &Config) -> Tensor {
    let (hd, nkv, bs, int) = (c.head_dim, c.n_kv_heads, layers.len(), Sint::Int);
    let (g, t, n) = (c.n_heads / nkv, q.shape()[0] / bs, Sint::product(keys));
    let (nk, ones) = (keys.len(), vec![int(1); keys.len()]);
    let shape = |parts: &[&[Sint]]| parts.concat();
    let head = |n: usize| [int(bs), int(nkv), int(g), int(t)][..n].to_vec();
    // (a batch's caches are separate buffers: the kernels read them side by side, as a stack; each gains its dim of 1
    // by a symbolic reshape, which keeps a symbolic dim bound to 1 in its place, and is cast to float32 first, so the
    // stack's sum of gated loads adds float vectors, not float16 lane by lane): [B, keys.., kv heads, head_dim]
    let rows = |pick: fn(&(Tensor, Tensor)) -> &Tensor| {
        let one = shape(&[&[int(1)], keys, &[int(nkv), int(hd)]]);
        let r: Vec<Tensor> = layers
            .iter()
            .zip(starts)
            .map(|(l, s)| {
                // (from the start to the end, then the span: a symbolic start plus a symbolic span would be a sum whose
                // terms' order follows the bound values' nodes, a new schedule for every position)
                let (x, w) = (pick(l), int(nkv * hd));
                let x = x.shrink_sym(&[(s.clone(), int(x.shape()[0])), (int(0), w.clone())]);
                x.shrink_sym(&[(int(0), n.clone()), (int(0), w)]).reshape_sym(&one).cast(dtypes::FLOAT32)
            })
            .collect();
        r[0].cat(&r[1..].iter().collect::<Vec<_>>(), 0)
    };
    let qh = q.reshape([bs, t, nkv, g, hd]).permute([0, 2, 3, 1, 4]).reshape_sym(&shape(&[&head(4), &ones, &[int(hd)]]));
    let kh = rows(|l| &l.0).permute([vec![0, nk + 1], (1..=nk).collect(), vec![nk + 2]].concat());
    let kh = kh.reshape_sym(&shape(&[&head(2), &[int(1), int(1)], keys, &[int(hd)]]));
    let scores = (qh * kh).sum(-1) * (1.0 / (hd as f32).sqrt());
    let scores = visible.reshape_sym(&shape(&[&[int(bs), int(1), int(1), int(t)], keys])).where_(&scores, f32::NEG_INFINITY);
    // (softmax's division after the values' sums: the exponentials computed once, into a buffer the sum and the
    // values kernel both read; a softmax computed them again to normalize)
    let axes: Vec<usize> = (4..4 + nk).collect();
    let e = (&scores - scores.max_keepdim(axes.clone())).exp().contiguous();
    let vh = rows(|l| &l.1).permute([vec![0, nk + 1, nk + 2], (1..=nk).collect()].concat());
    let vh = vh.reshape_sym(&shape(&[&head(2), &[int(1), int(1), int(hd)], keys]));
    let out = (e.reshape_sym(&shape(&[&head(4), &[int(1)], keys])) * vh).sum((5..5 + nk).collect::<Vec<_>>());
    let sums = e.sum_keepdim(axes).reshape([bs, nkv, g, t, 1]);
    (out / sums).permute([0, 3, 1, 2, 4]).reshape([bs * t, c.n_heads * hd])
}

impl Transformer {
    /// The model in `file` on `device`, its weights lazy dequantizations of the file's bytes, with an empty KV
    /// cache of `max_context` tokens.
    ///
    /// # Errors
    /// As [`Config::from_gguf`]; [`Error::Format`] for a missing or unreadable weight.
    pub fn from_gguf(file: &GgufFile, device: &str, max_context: usize) -> Result<Transformer> {
        let cfg = Config::from_gguf(file, max_context)?;
        let w = |n: &str| file.tensor(n, device);
        let opt = |n: &str| file.info(n).map(|_| file.tensor(n, device)).transpose();
        let dot = crate::helpers::QUANT_DOT.value() != 0 && crate::runtime::canonicalize_device(device) == "CPU";
        let lanes = crate::renderer::CpuFeatures::host().vector_bytes() / 4;
        let weight = |n: &str| -> Result<Weight> {
            Ok(Weight { w: file.tensor(n, device)?, q: if dot { file.quant_matrix(n, device, lanes)? } else { None } })
        };
        let blocks = (0..cfg.n_layers)
            .map(|i| {
                let b = |s: &str| format!("blk.{i}.{s}.weight");
                let (mut q, mut k, mut v) = (weight(&b("attn_q"))?, weight(&b("attn_k"))?, weight(&b("attn_v"))?);
                let (mut gate, mut up) = (weight(&b("ffn_gate"))?, weight(&b("ffn_up"))?);
                let (qkv, gate_up) = (fuse(&mut [&mut q, &mut k, &mut v])?, fuse(&mut [&mut gate, &mut up])?);
                let bias = |s: &str| opt(&format!("blk.{i}.{s}.bias"));
                let qkv_bias = match (bias("attn_q")?, bias("attn_k")?, bias("attn_v")?) {
                    (Some(q), Some(k), Some(v)) => Some([q, k, v]),
                    (None, None, None) => None,
                    _ => {
                        return Err(Error::Format {
                            path: file.path.clone(),
                            msg: format!("layer {i} has biases on some of q, k and v, not all"),
                        })
                    }
                };
                Ok(Block {
                    attn_norm: w(&b("attn_norm"))?,
                    q,
                    k,
                    v,
                    o: weight(&b("attn_output"))?,
                    qkv_bias,
                    q_norm: opt(&b("attn_q_norm"))?,
                    k_norm: opt(&b("attn_k_norm"))?,
                    post_attn_norm: opt(&b("post_attention_norm"))?,
                    ffn_norm: w(&b("ffn_norm"))?,
                    gate,
                    up,
                    down: weight(&b("ffn_down"))?,
                    post_ffn_norm: opt(&b("post_ffw_norm"))?,
                    qkv,
                    gate_up,
                    // (Gemma 3: every sixth layer is global)
                    local: cfg.arch == Arch::Gemma3 && (i + 1) % 6 != 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Transformer {
            tok_embd: w("token_embd.weight")?,
            output_norm: w("output_norm.weight")?,
            output: weight(if file.info("output.weight").is_some() { "output.weight" } else { "token_embd.weight" })?,
            blocks,
            cfg,
            device: device.to_string(),
            kv_dtype: if crate::helpers::HALF_KV.value() != 0 { dtypes::FLOAT16 } else { dtypes::FLOAT32 },
        })
    }

    /// The rows of a decode step's (or a prompt chunk's) span block ([`StartPos::Blocks`]): [`BLOCK`] on the CPU,
    /// [`SPAN`] elsewhere (a device with a launch grid bakes the span's variable into the grid, a capture for each
    /// value: one every 128 tokens, not every 32). tinygrad has no counterpart: its decode attends over `start_pos + 1`
    /// rows.
    pub fn decode_block(&self) -> usize {
        if self.device.starts_with("CPU") {
            BLOCK
        } else {
            SPAN
        }
    }

    /// The bound variable `span_blocks` (a scalar, [`Tensor::bind_var`]'s): how many [`Transformer::decode_block`]s of
    /// cache rows a decode step whose last position is `end - 1` attends over ([`StartPos::Blocks`]). Decode steps
    /// attend over what the context has used, not what it allows, in one captured graph for every span.
    ///
    /// # Panics
    /// If `end` is 0 or passes the context rounded up to a whole block.
    pub fn span_blocks(&self, end: usize) -> Tensor {
        self.blocks("span_blocks", end)
    }

    /// The bound variable `chunk_blocks`: as [`Transformer::span_blocks`], for a prompt chunk whose last token (padding
    /// included) is at `end - 1` ([`Transformer::prefill`], [`Transformer::decode_and_prefill`]), so one captured graph
    /// serves the chunks of every span (a sliding window's layers read only the blocks the window can reach). tinygrad
    /// has no counterpart: its prompt chunks attend over `start_pos + T` rows, a graph for each.
    ///
    /// # Panics
    /// If `end` is 0 or passes the context rounded up to a whole block.
    pub fn chunk_blocks(&self, end: usize) -> Tensor {
        self.blocks("chunk_blocks", end)
    }

    fn blocks(&self, name: &str, end: usize) -> Tensor {
        let (ctx, block) = (self.cfg.max_context, self.decode_block());
        Tensor::bind_var(name, 1, ctx.div_ceil(block) as i64, end.div_ceil(block) as i64)
    }

    /// An empty KV cache for one sequence, on the model's device.
    ///
    /// # Errors
    /// Realize errors (the device could not allocate it).
    pub fn new_cache(&self) -> Result<KvCache> {
        let c = &self.cfg;
        let zeros = || {
            let t = Tensor::zeros([cache_rows(c.max_context), c.n_kv_heads * c.head_dim])
                .cast(self.kv_dtype)
                .to(self.device.as_str())
                .contiguous();
            t.realize().map(|_| t.clone())
        };
        Ok(KvCache { layers: (0..c.n_layers).map(|_| Ok((zeros()?, zeros()?))).collect::<Result<_>>()? })
    }

    /// Logits of the last of `tokens` (`[T]` int32 ids at positions `start..start+T`): `[vocab]` float32. Writes
    /// the tokens' keys and values into `cache` (their assigns run when the logits are realized).
    ///
    /// # Panics
    /// If the tokens pass the end of the KV cache, or `start` is a variable and `T > 1`.
    pub fn forward(&self, cache: &KvCache, tokens: &Tensor, start: StartPos) -> Tensor {
        let n = tokens.shape()[0];
        self.run(tokens, &[Seq { cache, start, len: n, pick: None }], false).reshape([self.cfg.vocab])
    }

    /// As [`Transformer::forward`], with the logits at every position: `[T, vocab]`.
    ///
    /// # Panics
    /// As [`Transformer::forward`].
    pub fn logits(&self, cache: &KvCache, tokens: &Tensor, start: StartPos) -> Tensor {
        let n = tokens.shape()[0];
        self.run(tokens, &[Seq { cache, start, len: n, pick: None }], true)
    }

    /// One decode step of several sequences at once (llama-server's batched slots): `tokens` (`[B]` int32), token
    /// `b` entering `rows[b]`'s cache at its start position. The projections read each weight once for the whole
    /// batch; each sequence attends over its own cache. Out: `[B, vocab]` float32 logits.
    ///
    /// # Panics
    /// If `tokens` is not `[rows.len()]`, or a position passes the end of its cache.
    pub fn decode(&self, tokens: &Tensor, rows: &[(&KvCache, StartPos)]) -> Tensor {
        assert_eq!(tokens.shape(), [rows.len()], "decode: tokens {:?} for {} sequences", tokens.shape(), rows.len());
        self.run(tokens, &rows.iter().map(|&(cache, start)| Seq { cache, start, len: 1, pick: None }).collect::<Vec<_>>(), false)
    }

    /// Logits after the token at index `last` (a bound variable) of `tokens` (`[T]` int32 ids entering `cache` at
    /// `start`: a bound variable, attending over a constant span, [`StartPos::Var`], or over a variable one,
    /// [`StartPos::Blocks`] with [`Transformer::chunk_blocks`]): `[vocab]` float32. The positions are variables, so
    /// one compiled graph serves every prompt chunk of `T` tokens (of each span, for a constant one): a caller pads a
    /// chunk to one of a few lengths (the padding's keys and values land past the prompt, where the next tokens
    /// overwrite them before any query can see them).
    ///
    /// # Panics
    /// If the span passes the end of the KV cache.
    pub fn prefill(&self, cache: &KvCache, tokens: &Tensor, start: StartPos, last: &Tensor) -> Tensor {
        let n = tokens.shape()[0];
        self.run(tokens, &[Seq { cache, start, len: n, pick: Some(last) }], false).reshape([self.cfg.vocab])
    }

    /// A decode step of `rows` and a prompt chunk in one pass (llama-server's continuous batching): `tokens` (`[B + T]`
    /// int32) holds the rows' tokens, as [`Transformer::decode`] takes them, then the chunk's `T`, entering `cache` at
    /// `start` (a [`StartPos::Var`] as [`Transformer::prefill`] takes it, or a [`StartPos::Blocks`] whose span is a
    /// variable too, [`Transformer::chunk_blocks`]: one captured graph for every span). Each weight is read once for
    /// both, so the chunk costs the streams far less than a pass of its own. Out: `[B + 1, vocab]` float32, the rows'
    /// logits, then the chunk's after its token at the bound variable index `last`.
    ///
    /// # Panics
    /// If `tokens` has no more than `rows.len()` entries, or a position or span passes the end of its cache.
    pub fn decode_and_prefill(
        &self,
        tokens: &Tensor,
        rows: &[(&KvCache, StartPos)],
        (cache, start, last): (&KvCache, StartPos, &Tensor),
    ) -> Tensor {
        let (n, b) = (tokens.shape()[0], rows.len());
        assert!(n > b, "decode_and_prefill: {n} tokens for {b} rows and a chunk");
        let mut seqs: Vec<Seq> = rows.iter().map(|&(cache, start)| Seq { cache, start, len: 1, pick: None }).collect();
        seqs.push(Seq { cache, start, len: n - b, pick: Some(last) });
        self.run(tokens, &seqs, false)
    }

    /// The forward pass of `tokens` (`[N]`): `seqs` splits them into sequences (one for a prompt, one token each for
    /// a batched decode step, both for continuous batching), each with its cache and start position. Out: `[N,
    /// vocab]` with `all`, else each sequence's picked row: `[seqs.len(), vocab]`.
    fn run(&self, tokens: &Tensor, seqs: &[Seq], all: bool) -> Tensor {
        let c = &self.cfg;
        let n = tokens.shape()[0];
        let (hd, nh, nkv, ctx) = (c.head_dim, c.n_heads, c.n_kv_heads, c.max_context);
        let cap = cache_rows(ctx);
        let dev = self.device.as_str();
        assert_eq!(
            seqs.iter().map(|s| s.len).sum::<usize>(),
            n,
            "forward: {n} tokens for sequences of {:?}",
            seqs.iter().map(|s| s.len).collect::<Vec<_>>()
        );
        // each sequence's first token among the pass's
        let offs: Vec<usize> = seqs.iter().scan(0, |o, s| Some(std::mem::replace(o, *o + s.len))).collect();
        // the token embeddings: a one-hot sum, which codegen turns into a gather of each id's row
        let onehot = tokens.reshape([n, 1]).eq(Tensor::arange(0.0, c.vocab as f64, 1.0).cast(dtypes::INT32).reshape([1, c.vocab]));
        let mut x = onehot.cast(dtypes::FLOAT32).matmul(&self.tok_embd.cast(dtypes::FLOAT32));
        if c.arch == Arch::Gemma3 {
            x = x * (c.dim as f32).sqrt();
        }
        // each sequence's positions ([len] float32) and the cache rows it attends over
        let spans: Vec<(Tensor, Vec<Sint>)> = seqs
            .iter()
            .map(|&Seq { start, len: t, .. }| match start {
                StartPos::Const(s) => {
                    assert!(s + t <= ctx, "forward: tokens {s}..{} pass the KV cache's {ctx}", s + t);
                    // (the positions as data, not constants: a rotary angle folded from a constant rounds otherwise
                    // than one from a variable, as a batched step's are, and each position would be a new kernel)
                    (Tensor::from_slice(&(s..s + t).map(|p| p as f32).collect::<Vec<_>>(), [t]).to(dev), vec![Sint::Int(s + t)])
                }
                StartPos::Var(v, span) => {
                    assert!(span <= ctx, "forward: a span of {span} rows passes the KV cache's {ctx}");
                    let s = v.cast(dtypes::FLOAT32).reshape([1]);
                    (if t == 1 { s } else { s + Tensor::arange(0.0, t as f64, 1.0) }, vec![Sint::Int(span)])
                }
                StartPos::Blocks(v, blocks) => {
                    let blocks = Sint::from_uop(&blocks.uop());
                    let block = self.decode_block();
                    assert!(blocks.max() * block <= cap, "forward: spans of up to {} rows pass the KV cache's {cap}", blocks.max() * block);
                    let s = v.cast(dtypes::FLOAT32).reshape([1]);
                    (if t == 1 { s } else { s + Tensor::arange(0.0, t as f64, 1.0) }, vec![blocks, Sint::Int(block)])
                }
            })
            .collect();
        let cat =
            |parts: &[Tensor]| if parts.len() == 1 { parts[0].clone() } else { parts[0].cat(&parts[1..].iter().collect::<Vec<_>>(), 0) };
        let positions = cat(&spans.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
        // key position j is visible to query i when j <= start + i (and, in a local layer, j > start + i - window)
        // (a symbolic span's key index as blocks * block + key, from the two dims: one flat index would be split
        // again by a modulo of the span)
        let visible = |pos: &Tensor, keys: &[Sint]| {
            let j = match keys {
                [Sint::Int(span)] => Tensor::arange(0.0, *span as f64, 1.0).reshape([1, *span]),
                [blocks, Sint::Int(block)] => {
                    let b = Tensor::arange(0.0, (cap / block) as f64, 1.0).shrink_sym(&[(0.into(), blocks.clone())]);
                    (b.reshape_sym(&[1.into(), blocks.clone(), 1.into()]) * *block as f64)
                        + Tensor::arange(0.0, *block as f64, 1.0).reshape([1, 1, *block])
                }
                _ => unreachable!("a span's dims are (span) or (blocks, block)"),
            };
            let qpos = pos.reshape([[pos.shape()[0]].as_slice(), &vec![1; keys.len()]].concat());
            let causal = j.le(&qpos);
            let window = c.sliding_window.map(|w| causal.bitwise_and(j.gt(&(&qpos - w as f32))));
            (causal, window)
        };
        // the sequences whose attention runs as one set of kernels: neighbouring single tokens that attend over the
        // same span (a batched decode step's rows: llama-server's batched slots, B times the rows a kernel, split over
        // the cores), else each alone; with each group's masks ([group rows, span dims..])
        let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
        for (i, s) in seqs.iter().enumerate() {
            match runs.last_mut() {
                Some(r) if s.len == 1 && seqs[r.start].len == 1 && spans[r.start].1 == spans[i].1 => r.end = i + 1,
                _ => runs.push(i..i + 1),
            }
        }
        let groups: Vec<Group> = runs
            .into_iter()
            .map(|r| {
                let pos = cat(&spans[r.clone()].iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
                let tokens = offs[r.start]..offs[r.end - 1] + seqs[r.end - 1].len;
                let span = spans[r.start].1.clone();
                let masks = visible(&pos, &span);
                let read = window_read(c, cap, &seqs[r.clone()], &pos, &span);
                (r, tokens, span, masks, read)
            })
            .collect();
        let global_angles = rope_angles(&positions, c.rope_theta, hd, c.rope_factors.as_deref(), dev);
        let any_local = self.blocks.iter().any(|b| b.local);
        let local_angles = if any_local { rope_angles(&positions, c.rope_local_theta, hd, None, dev) } else { global_angles.clone() };
        for (l, b) in self.blocks.iter().enumerate() {
            // (the normed input and the q/k projections are realized: each is read by many outputs, and RoPE reads
            // each projected element twice; q is realized again after RoPE, which would otherwise fuse into the scores
            // kernel and be recomputed for every key)
            let h = Input::new(rms_norm(&x, &b.attn_norm, c.eps).contiguous());
            let (q, k, v) = match &b.qkv {
                Some(m) => {
                    let (qkv, (a, w)) = (project_q(&h, m).contiguous(), (nh * hd, nkv * hd));
                    debug_assert_eq!(m.rows(), a + 2 * w, "stacked q, k and v rows");
                    let cols = |from: usize, to: usize| qkv.shrink(&[(0, n), (from, to)]);
                    (cols(0, a), cols(a, a + w), cols(a + w, a + 2 * w))
                }
                None => (project(&h, &b.q).contiguous(), project(&h, &b.k).contiguous(), project(&h, &b.v)),
            };
            let (q, k, v) = match &b.qkv_bias {
                Some([bq, bk, bv]) => (q + bq, k + bk, v + bv),
                None => (q, k, v),
            };
            let (mut q, mut k) = (q.reshape([n, nh, hd]), k.reshape([n, nkv, hd]));
            if let (Some(qn), Some(kn)) = (&b.q_norm, &b.k_norm) {
                (q, k) = (rms_norm(&q, qn, c.eps), rms_norm(&k, kn, c.eps));
            }
            let angles = if b.local { &local_angles } else { &global_angles };
            let interleaved = c.arch == Arch::Llama;
            let (q, k) = (rope(&q, angles, interleaved).contiguous(), rope(&k, angles, interleaved).reshape([n, nkv * hd]));
            // each sequence's keys and values into its cache, rows start..start+T
            for (s, &o) in seqs.iter().zip(&offs) {
                let part = |x: &Tensor| if s.len == n { x.clone() } else { x.shrink(&[(o, o + s.len), (0, nkv * hd)]) };
                let (cache_k, cache_v) = &s.cache.layers[l];
                cache_k.assign(write_rows(cache_k, &part(&k), s.start));
                cache_v.assign(write_rows(cache_v, &part(&v), s.start));
            }
            let q = q.reshape([n, nh * hd]);
            let attn: Vec<Tensor> = groups
                .iter()
                .map(|(seq, rows, keys, (causal, window), read)| {
                    // (a local layer masks keys to its window; one sequence's prompt chunk over a constant span also
                    // reads only the rows the window can reach: its T tokens end in the span's last 128 rows, so none
                    // sees a key before span - 128 - T - window; a pass over a span of blocks reads each sequence's
                    // window's blocks, [`Window`]: from a whole block, each key keeps its lane, and the masked keys a
                    // longer read would add are exact zeros, so a token's bits depend neither on its batch's span nor
                    // on how its prompt was cut into chunks)
                    let zeros = vec![Sint::Int(0); seq.len()];
                    let (visible, starts, keys) = match (b.local, read, window, c.sliding_window, &keys[..]) {
                        (true, Some((starts, keys, m)), ..) => (m.clone(), starts.clone(), keys.clone()),
                        (true, None, Some(m), Some(w), &[Sint::Int(span)]) if seq.len() == 1 && rows.len() > 1 => {
                            let lo = span.saturating_sub(w + SPAN + rows.len());
                            (m.shrink(&[(0, rows.len()), (lo, span)]), vec![Sint::Int(lo)], vec![Sint::Int(span - lo)])
                        }
                        (true, None, Some(m), ..) => (m.clone(), zeros, keys.clone()),
                        _ => (causal.clone(), zeros, keys.clone()),
                    };
                    let layers: Vec<&(Tensor, Tensor)> = seqs[seq.clone()].iter().map(|s| &s.cache.layers[l]).collect();
                    attention(&q.shrink(&[(rows.start, rows.end), (0, nh * hd)]), &layers, &visible, (&starts, &keys), c)
                })
                .collect();
            let mut out = project(&Input::new(cat(&attn).contiguous()), &b.o);
            if let Some(n) = &b.post_attn_norm {
                out = rms_norm(&out, n, c.eps);
            }
            // (the residual stream realized at each add, which fuses into the projection's kernel: left lazy, every
            // layer's norm and add re-summed all earlier layers' outputs, 2L buffers read by two kernels in layer L)
            x = (x + out).contiguous();
            let h = Input::new(rms_norm(&x, &b.ffn_norm, c.eps).contiguous());
            // (realized: a kernel with two reductions over different loops optimizes only one)
            let (gate, up) = match &b.gate_up {
                Some(m) => {
                    let (gu, f) = (project_q(&h, m).contiguous(), m.rows() / 2);
                    (gu.shrink(&[(0, n), (0, f)]), gu.shrink(&[(0, n), (f, 2 * f)]))
                }
                None => (project(&h, &b.gate).contiguous(), project(&h, &b.up)),
            };
            let act = if c.arch == Arch::Gemma3 { gate.gelu() } else { gate.silu() };
            let mut out = project(&Input::new(act * up), &b.down);
            if let Some(n) = &b.post_ffn_norm {
                out = rms_norm(&out, n, c.eps);
            }
            x = (x + out).contiguous();
        }
        // each sequence's picked row (a decode step's rows are all of them)
        let x = if all || seqs.iter().all(|s| s.len == 1) {
            x
        } else {
            let rows: Vec<Tensor> = seqs
                .iter()
                .zip(&offs)
                .map(|(s, &o)| {
                    let x = if s.len == n { x.clone() } else { x.shrink(&[(o, o + s.len), (0, c.dim)]) };
                    match s.pick {
                        None if s.len == 1 => x,
                        None => x.shrink(&[(s.len - 1, s.len), (0, c.dim)]),
                        Some(r) => {
                            let at = Tensor::arange(0.0, s.len as f64, 1.0).cast(dtypes::INT32).reshape([s.len, 1]);
                            at.eq(r.cast(dtypes::INT32).reshape([1, 1])).where_(&x, 0.0f32).sum_keepdim(0)
                        }
                    }
                })
                .collect();
            cat(&rows)
        };
        project(&Input::new(rms_norm(&x, &self.output_norm, c.eps)), &self.output)
    }
}
