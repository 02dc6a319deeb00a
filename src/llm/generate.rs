//! Generation. In: a [`Transformer`] and prompt tokens. Out: next tokens, one at a time: the prompt prefilled in
//! chunks, then one decode step per token, replayed by a TinyJit whose start position and span are bound variables
//! (so every token after the first two runs the captured kernels: no scheduling, no compiling), and sampled greedily
//! or by temperature, top-k and top-p from a seeded generator (tinygrad `llm/model.py` `generate`).

use super::model::{KvCache, StartPos, Transformer, SPAN};
use crate::error::{Error, Result};
use crate::{Tensor, TinyJit};

/// How the next token is drawn from logits (tinygrad's `temperature`; top-k and top-p as llama.cpp's samplers).
#[derive(Clone, Debug)]
pub struct Sampler {
    /// 0: greedy (the most likely token, deterministic).
    pub temperature: f32,
    /// Only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Only the most likely tokens whose probabilities sum to `top_p` (1: all).
    pub top_p: f32,
    state: u64,
}

impl Sampler {
    /// A sampler seeded with `seed` (the same seed draws the same tokens).
    pub fn new(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
        Sampler { temperature, top_k, top_p, state: seed ^ 0x9e37_79b9_7f4a_7c15 }
    }

    /// A uniform draw in `[0, 1)` (splitmix64).
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next token from `logits` (`[vocab]`).
    ///
    /// # Panics
    /// If `logits` is empty.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).expect("logits of at least one token");
        if self.temperature <= 0.0 {
            return best as u32;
        }
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_unstable_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        if self.top_k > 0 {
            order.truncate(self.top_k);
        }
        // (as llama.cpp's default chain: top-k, then top-p on the untempered probabilities, then temperature)
        let top = f64::from(logits[best]);
        let probs = |t: f64| -> Vec<f64> {
            let p: Vec<f64> = order.iter().map(|&i| ((f64::from(logits[i]) - top) / t).exp()).collect();
            let total: f64 = p.iter().sum();
            p.into_iter().map(|x| x / total).collect()
        };
        let mut keep = order.len();
        if self.top_p < 1.0 {
            let mut acc = 0.0;
            keep = probs(1.0)
                .iter()
                .position(|p| {
                    acc += p;
                    acc >= f64::from(self.top_p)
                })
                .map_or(order.len(), |i| i + 1);
        }
        let probs = probs(f64::from(self.temperature));
        let mass: f64 = probs[..keep].iter().sum();
        let mut r = self.uniform() * mass;
        for (i, p) in probs[..keep].iter().enumerate() {
            r -= p;
            if r < 0.0 {
                return order[i] as u32;
            }
        }
        order[keep - 1] as u32
    }
}

/// The decode step a session's TinyJit replays: one capture, its position and span bound variables.
type DecodeFn<'m> = Box<dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>> + 'm>;
type DecodeStep<'m> = TinyJit<DecodeFn<'m>>;

/// The cache rows a prompt chunk attends over when its last position is `end - 1`: `end` rounded up to a multiple of
/// [`SPAN`], at most the context `ctx`.
pub(crate) fn span(end: usize, ctx: usize) -> usize {
    (end.div_ceil(SPAN) * SPAN).min(ctx)
}

/// The bound variable `span_blocks`: how many [`SPAN`]s of cache rows a decode step whose last position is `end - 1`
/// attends over ([`StartPos::Blocks`]), in a context of `ctx`. Decode steps attend over what the context has used,
/// not what it allows, in one captured graph for every span.
pub(crate) fn span_blocks(end: usize, ctx: usize) -> Tensor {
    Tensor::bind_var("span_blocks", 1, ctx.div_ceil(SPAN) as i64, end.div_ceil(SPAN) as i64)
}

/// A model with its KV cache filled up to `pos`: prefill a prompt, then decode one token at a time.
pub struct Session<'m> {
    model: &'m Transformer,
    cache: KvCache,
    /// Tokens in the KV cache.
    pub pos: usize,
    decode: DecodeStep<'m>,
}

/// Tokens one prefill pass takes at most (longer prompts go in chunks).
pub(crate) const PREFILL_CHUNK: usize = 128;

/// Logits after `tokens` (`[vocab]` float32), which enter `cache` at position `start`: in chunks of at most 128,
/// each padded to a power of two and run with its start and last index as bound variables, so that a prompt of any
/// length at any position runs graphs already compiled (eight chunk lengths, a span per 128 positions). A chunk
/// whose padding would pass the end of the context runs unpadded.
///
/// # Errors
/// Realize errors.
///
/// # Panics
/// If the tokens pass the end of the context or `tokens` is empty.
pub fn prefill(model: &Transformer, cache: &KvCache, start: usize, tokens: &[u32]) -> Result<Vec<f32>> {
    let ctx = model.cfg.max_context;
    assert!(!tokens.is_empty() && start + tokens.len() <= ctx, "prefill: tokens {start}..{} in a context of {ctx}", start + tokens.len());
    let mut logits = Vec::new();
    for (i, chunk) in tokens.chunks(PREFILL_CHUNK).enumerate() {
        let ([ids, pos, last], (_, _, span)) = chunk_inputs(chunk, start + i * PREFILL_CHUNK, 1, ctx);
        logits = model.prefill(cache, &ids, &pos, &last, span).to_vec::<f32>()?;
    }
    Ok(logits)
}

/// The inputs of [`Transformer::prefill`] for `tokens` (at most [`PREFILL_CHUNK`]) entering the cache at `at` in a
/// context of `ctx`: the ids (`[len]` int32, padded with zeros to a power of two of at least `pad` unless that
/// passes the context) and the bound variables `prefill_start` (`at`) and `prefill_last` (the last real token's
/// index); then `(len, at, span)`, the cache rows the chunk attends over.
pub(crate) fn chunk_inputs(tokens: &[u32], at: usize, pad: usize, ctx: usize) -> ([Tensor; 3], (usize, usize, usize)) {
    let len = Some(tokens.len().next_power_of_two().max(pad)).filter(|n| at + n <= ctx).unwrap_or(tokens.len());
    let mut ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
    ids.resize(len, 0);
    let pos = Tensor::bind_var("prefill_start", 0, ctx as i64 - 1, at as i64);
    let last = Tensor::bind_var("prefill_last", 0, PREFILL_CHUNK as i64 - 1, tokens.len() as i64 - 1);
    ([Tensor::from_slice(&ids, [len]), pos, last], (len, at, span(at + len, ctx)))
}

impl<'m> Session<'m> {
    /// A session on `model` with an empty cache.
    ///
    /// # Errors
    /// When the device can't allocate the cache.
    pub fn new(model: &'m Transformer) -> Result<Session<'m>> {
        let cache = model.new_cache()?;
        let c = cache.clone();
        let f: DecodeFn<'m> = Box::new(move |x: &[Tensor]| Ok(vec![model.forward(&c, &x[0], StartPos::Blocks(&x[1], &x[2]))]));
        Ok(Session { model, cache, pos: 0, decode: TinyJit::new(f) })
    }

    fn room(&self, n: usize) -> Result<()> {
        let ctx = self.model.cfg.max_context;
        if self.pos + n > ctx {
            return Err(Error::Context(format!("{} tokens exceed the context of {ctx} tokens (raise --max_context)", self.pos + n)));
        }
        Ok(())
    }

    /// Logits after `tokens` (`[vocab]` float32), which enter the cache at `pos` (see [`prefill`]).
    ///
    /// # Errors
    /// When the tokens pass the end of the context; realize errors.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.room(tokens.len())?;
        let logits = prefill(self.model, &self.cache, self.pos, tokens)?;
        self.pos += tokens.len();
        Ok(logits)
    }

    /// Logits after `token` at `pos` (the TinyJit-replayed decode step).
    ///
    /// # Errors
    /// When the context is full; realize errors.
    pub fn step(&mut self, token: u32) -> Result<Vec<f32>> {
        self.room(1)?;
        let max = self.model.cfg.max_context as i64 - 1;
        let pos = Tensor::bind_var("start_pos", 0, max, self.pos as i64);
        let blocks = span_blocks(self.pos + 1, self.model.cfg.max_context);
        let out = self.decode.call(&[Tensor::from_slice(&[token as i32], [1]), pos, blocks])?;
        self.pos += 1;
        out[0].to_vec::<f32>()
    }
}
