//! Generation. In: a [`Transformer`] and prompt tokens. Out: next tokens, one at a time: the prompt prefilled in
//! chunks, then one decode step per token, replayed by a TinyJit whose start position and span are bound variables
//! (so every token after the first two runs the captured kernels: no scheduling, no compiling), and sampled greedily
//! or by temperature, top-k and top-p from a seeded generator (tinygrad `llm/model.py` `generate`).

use super::model::{KvCache, StartPos, Transformer};
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
    /// OpenAI's `presence_penalty`: subtracted from the logit of each token drawn before (0: none).
    pub presence_penalty: f32,
    /// OpenAI's `frequency_penalty`: subtracted from a token's logit once for each time it was drawn before (0: none).
    pub frequency_penalty: f32,
    /// OpenAI's `logit_bias`: added to these tokens' logits before anything else (ids past the vocabulary ignored).
    pub logit_bias: Vec<(u32, f32)>,
    /// How often each token was drawn (kept while a penalty is set, for the sampler's life: one sampler a request).
    drawn: rustc_hash::FxHashMap<u32, u32>,
    /// The logits with the bias and penalties applied.
    adjusted: Vec<f32>,
    /// [`Sampler::sample`]'s candidate tokens and their weights, kept from draw to draw.
    order: Vec<usize>,
    probs: Vec<f64>,
    /// Every token's weight summed a chunk at a time ([`chunk_sums`]), kept from draw to draw.
    chunks: Vec<f64>,
    state: u64,
}

impl Sampler {
    /// A sampler seeded with `seed` (the same seed draws the same tokens).
    pub fn new(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
        Sampler {
            temperature,
            top_k,
            top_p,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: vec![],
            drawn: Default::default(),
            adjusted: vec![],
            order: vec![],
            probs: vec![],
            chunks: vec![],
            state: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// A uniform draw in `[0, 1)` (splitmix64).
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next token from `logits` (`[vocab]`, float32), after [`Sampler::logit_bias`] and the penalties for this
    /// sampler's earlier draws (OpenAI's `logit_bias`, `presence_penalty`, `frequency_penalty`): the most likely at
    /// temperature 0, else a draw after llama.cpp's default chain (top-k, then top-p on the untempered probabilities,
    /// then temperature). NaN or infinite logits still give a token of the vocabulary.
    ///
    /// # Panics
    /// If `logits` is empty.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let penalized = self.presence_penalty != 0.0 || self.frequency_penalty != 0.0;
        if !penalized && self.logit_bias.is_empty() {
            return self.draw(logits);
        }
        // (OpenAI's: `logit - count * frequency_penalty - (count > 0) * presence_penalty + bias`, over this sampler's
        // draws; a copy only where something is set)
        let mut adjusted = std::mem::take(&mut self.adjusted);
        adjusted.clear();
        adjusted.extend_from_slice(logits);
        for &(t, b) in &self.logit_bias {
            if let Some(x) = adjusted.get_mut(t as usize) {
                *x += b;
            }
        }
        for (&t, &n) in &self.drawn {
            if let Some(x) = adjusted.get_mut(t as usize) {
                *x -= n as f32 * self.frequency_penalty + self.presence_penalty;
            }
        }
        let token = self.draw(&adjusted);
        self.adjusted = adjusted;
        if penalized {
            *self.drawn.entry(token).or_default() += 1;
        }
        token
    }

    /// Whether [`Sampler::sample`] takes the most likely token of the logits as they are (temperature 0, no bias,
    /// no penalty): a caller that knows it (a decode step's argmax) need not pass the logits.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 && self.presence_penalty == 0.0 && self.frequency_penalty == 0.0 && self.logit_bias.is_empty()
    }

    /// [`Sampler::sample`]'s draw from `logits` as they are.
    fn draw(&mut self, logits: &[f32]) -> u32 {
        let best = argmax(logits);
        if self.temperature <= 0.0 {
            return best as u32;
        }
        let top = logits[best];
        if (self.top_k == 0 || self.top_k >= logits.len()) && (self.top_p >= 1.0 || self.top_p.is_nan()) {
            // (every token a candidate, the common case: no candidate list, and the weights' running sum in chunks)
            // (times the temperature's reciprocal: a division waits 3 cycles a vector)
            let (u, inv) = (self.uniform(), 1.0 / self.temperature);
            let r = u * chunk_sums(logits, top, inv, &mut self.chunks);
            return pick(logits, (top, inv), &self.chunks, r).unwrap_or(best) as u32;
        }
        // (as llama.cpp's default chain: top-k, then top-p on the untempered probabilities, then temperature; only what
        // either can keep is sorted: the k most likely, or without top-k the tokens of probability (1 - top_p) / vocab
        // or more, since all those below hold less than 1 - top_p together and none is in the nucleus; a whole
        // vocabulary's sort cost about as much as a decode step)
        let weight = |i: usize, t: f32| f64::from(exp((logits[i] - top) / t));
        let desc = |a: &usize, b: &usize| logits[*b].total_cmp(&logits[*a]);
        // (the candidates and their weights in vectors kept from draw to draw: fresh ones cost their pages each token,
        // about 1 ms of Gemma 3's 262,144)
        let (mut order, mut probs) = (std::mem::take(&mut self.order), std::mem::take(&mut self.probs));
        let mut total = None;
        if self.top_k > 0 && self.top_k < logits.len() {
            top_candidates(logits, self.top_k, &mut order);
            order.select_nth_unstable_by(self.top_k - 1, desc);
            order.truncate(self.top_k);
        } else if self.top_p < 1.0 {
            let all = chunk_sums(logits, top, 1.0, &mut self.chunks);
            // (weight(i) >= (1 - top_p) / vocab * all, in logits; not with NaN or infinite logits, or a negative top_p,
            // where the floor passes the best token)
            let floor = f64::from(top) + ((1.0 - f64::from(self.top_p)) / logits.len() as f64 * all).ln();
            order.clear();
            if floor <= f64::from(top) {
                // (a chunk of 64 read only where one of its logits reaches the floor in float32: rounding is monotone,
                // so a float32 logit at least the float64 floor is at least its float32 rounding)
                let low = floor as f32;
                for (c, part) in logits.chunks(CHUNK).enumerate().filter(|(_, p)| p.iter().fold(false, |f, &l| f | (l >= low))) {
                    order.extend((c * CHUNK..c * CHUNK + part.len()).filter(|&i| f64::from(logits[i]) >= floor));
                }
                total = Some(all);
            } else {
                order.extend(0..logits.len());
            }
        }
        let mut keep = order.len();
        if self.top_p < 1.0 {
            // (sorted a head at a time until the nucleus ends: a few of the thousands kept are in it)
            let total = total.unwrap_or_else(|| order.iter().map(|&i| weight(i, 1.0)).sum());
            let (mut acc, mut sorted) = (0.0, 0);
            while sorted < order.len() {
                let end = (2 * sorted).max(256).min(order.len());
                if end < order.len() {
                    order[sorted..].select_nth_unstable_by(end - sorted - 1, desc);
                }
                order[sorted..end].sort_unstable_by(desc);
                if let Some(i) = order[sorted..end].iter().position(|&i| {
                    acc += weight(i, 1.0) / total;
                    acc >= f64::from(self.top_p)
                }) {
                    keep = sorted + i + 1;
                    break;
                }
                sorted = end;
            }
        }
        probs.clear();
        probs.extend(order[..keep].iter().map(|&i| weight(i, self.temperature)));
        let mass: f64 = probs.iter().sum();
        let mut r = self.uniform() * mass;
        // (rounding, or NaN weights: the last kept token, or the best if none is kept)
        let at = probs.iter().position(|p| {
            r -= p;
            r < 0.0
        });
        let token = at.or(keep.checked_sub(1)).map_or(best as u32, |i| order[i] as u32);
        (self.order, self.probs) = (order, probs);
        token
    }
}

/// The weights `exp((l - top) * inv)` of `logits` summed a chunk of [`CHUNK`] at a time, each chunk's sum (float32 in
/// 16 lanes, then float64) into `chunks`; their float64 total returned. Neither a vector of the weights (1 MB for Gemma
/// 3's 262,144 logits, written then read again) nor a running float64 sum (4 cycles an addition: 0.4 ms for Gemma 3).
fn chunk_sums(logits: &[f32], top: f32, inv: f32, chunks: &mut Vec<f64>) -> f64 {
    chunks.clear();
    chunks.extend(logits.chunks(CHUNK).map(|c| {
        let mut lanes = [0.0f32; 16];
        for part in c.chunks(16) {
            for (s, &l) in lanes.iter_mut().zip(part) {
                *s += exp((l - top) * inv);
            }
        }
        f64::from(lanes.iter().sum::<f32>())
    }));
    chunks.iter().sum()
}

/// The index of `logits` where the running sum of their weights ([`chunk_sums`]' `(top, inv)`) first passes `r`:
/// the chunks' sums first, then the weights of the chunk that passes it, in float64 (where its float32 sum passed but
/// its weights do not, its last positive weight); where rounding or NaN weights let no chunk pass, the last positive
/// weight's; None where no weight is positive.
fn pick(logits: &[f32], (top, inv): (f32, f32), chunks: &[f64], mut r: f64) -> Option<usize> {
    let weight = |l: f32| exp((l - top) * inv);
    let found = chunks.iter().position(|&s| {
        r -= s;
        r < 0.0
    });
    if let Some(c) = found {
        r += chunks[c];
        let at = logits[c * CHUNK..].iter().take(CHUNK).position(|&l| {
            r -= f64::from(weight(l));
            r < 0.0
        });
        // (rounding: the chunk's float32 sum above its weights' float64 one; its last positive weight)
        return at.or_else(|| logits[c * CHUNK..].iter().take(CHUNK).rposition(|&l| weight(l) > 0.0)).map(|i| c * CHUNK + i);
    }
    logits.iter().rposition(|&l| weight(l) > 0.0)
}

/// Weights a chunk of [`chunk_sums`] sums.
const CHUNK: usize = 64;

/// `e^x` in float32 by Cephes' `expf` method (the exponent's integer part rounded out, a degree-7 polynomial for the
/// rest): within 2 ulp of the C library's `expf` over [-87, 0], 0 below -87 (where Cephes returns subnormals down to
/// -103.3), NaN for NaN. Plain arithmetic, so a loop over a vocabulary's logits runs in vector registers, where the C
/// library's `expf` took 2.2 ns a call. For `x <= 88` only (its scale's exponent bits overflow past 88.7): a sampler's
/// weights, logits minus their maximum, are at most 0.
fn exp(x: f32) -> f32 {
    debug_assert!(x <= 88.0 || x.is_nan(), "exp({x}): past float32's range");
    // (adding 1.5 * 2^23 rounds a float of magnitude below 2^22 to an integer: its low bits then hold it)
    const ROUND: f32 = 12_582_912.0;
    let t = x * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 0.166_666_65) * r + 0.5;
    let scale = f32::from_bits(t.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    if x < -87.0 {
        0.0
    } else {
        (p * r * r + r + 1.0) * scale
    }
}

/// The index of the largest of `logits` by [`f32::total_cmp`], the last of equal ones (as `Iterator::max_by`): each
/// float as the integer that orders as `total_cmp` does, the maximum over chunks of 64 (vectorized), then the last
/// chunk holding it searched (49,152 logits: 8-14 us against 42 for `max_by`'s compare-and-branch).
///
/// # Panics
/// If `logits` is empty.
fn argmax(logits: &[f32]) -> usize {
    let top = logits.chunks(CHUNK).map(chunk_max).max().expect("logits of at least one token");
    let c = logits.chunks(CHUNK).rposition(|c| c.iter().fold(false, |f, &x| f | (key(x) == top))).expect("the maximum's chunk");
    let tail = logits[c * CHUNK..].iter().take(CHUNK).rposition(|&x| key(x) == top).expect("the maximum in its chunk");
    c * CHUNK + tail
}

/// The largest [`key`] of a chunk of logits (a loop of integer maxima the compiler vectorizes).
fn chunk_max(c: &[f32]) -> i32 {
    c.iter().fold(i32::MIN, |m, &x| m.max(key(x)))
}

/// `x` as the integer that orders as [`f32::total_cmp`] does: a negative float's bits but the sign flipped.
fn key(x: f32) -> i32 {
    let b = x.to_bits() as i32;
    b ^ (((b >> 31) as u32) >> 1) as i32
}

/// Into `order`, the indices of `logits` that can be among the `k` largest (by [`f32::total_cmp`]): those at least
/// the k-th largest of the maxima of the chunks of 64 (k chunks hold one as large each), found chunk by chunk, the
/// chunks below it skipped; every index where there are fewer than k chunks. A top-k draw then selects among tens
/// of candidates, not a vocabulary (Gemma 3's 262,144: 0.7 ms).
fn top_candidates(logits: &[f32], k: usize, order: &mut Vec<usize>) {
    let maxima: Vec<i32> = logits.chunks(CHUNK).map(chunk_max).collect();
    order.clear();
    if k > maxima.len() {
        return order.extend(0..logits.len());
    }
    let mut sorted = maxima.clone();
    let floor = *sorted.select_nth_unstable_by(k - 1, |a, b| b.cmp(a)).1;
    for (c, _) in maxima.iter().enumerate().filter(|(_, &m)| m >= floor) {
        order.extend((c * CHUNK..logits.len().min((c + 1) * CHUNK)).filter(|&i| key(logits[i]) >= floor));
    }
}

/// The decode step a session's TinyJit replays: one capture, its position and span bound variables.
type DecodeFn<'m> = Box<dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>> + 'm>;
type DecodeStep<'m> = TinyJit<DecodeFn<'m>>;

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
/// each padded to a power of two ([`chunk_inputs`]) and run with its start, last index and span as bound variables,
/// so that a prompt of any length at any position runs graphs already compiled (seven chunk lengths). A chunk whose
/// padding would pass the end of the context runs unpadded.
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
        let (x, _) = chunk_inputs(model, chunk, start + i * PREFILL_CHUNK, 1);
        logits = model.prefill(cache, &x[0], StartPos::Blocks(&x[1], &x[3]), &x[2]).to_vec::<f32>()?;
    }
    Ok(logits)
}

/// The inputs of a pass of `tokens` (at most [`PREFILL_CHUNK`]) entering the cache at `at` ([`Transformer::prefill`],
/// [`Transformer::decode_and_prefill`]): the ids (`[len]` int32, padded with zeros to a power of two of at least
/// `pad` and 2 unless that passes the context: a pass of one token would run a decode step's kernels, which sum the
/// keys in another order than a chunk's, and a prompt's logits and cache rows would then depend on how it was cut into
/// chunks: alone, beside streams, after a cached prefix), then the bound variables `prefill_start` (`at`),
/// `prefill_last` (the last real token's index) and `chunk_blocks` ([`Transformer::chunk_blocks`]: the start is
/// `StartPos::Blocks(&x[1], &x[3])`); and the padded length, which keys a captured graph.
pub(crate) fn chunk_inputs(model: &Transformer, tokens: &[u32], at: usize, pad: usize) -> ([Tensor; 4], usize) {
    let ctx = model.cfg.max_context;
    let len = Some(tokens.len().next_power_of_two().max(pad).max(2)).filter(|n| at + n <= ctx).unwrap_or(tokens.len());
    let mut ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
    ids.resize(len, 0);
    let pos = Tensor::bind_var("prefill_start", 0, ctx as i64 - 1, at as i64);
    let last = Tensor::bind_var("prefill_last", 0, PREFILL_CHUNK as i64 - 1, tokens.len() as i64 - 1);
    ([Tensor::from_slice(&ids, [len]), pos, last, model.chunk_blocks(at + len)], len)
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
        let mut logits = Vec::new();
        self.step_into(token, &mut logits)?;
        Ok(logits)
    }

    /// As [`Session::step`], the logits written into `logits` (`[vocab]`, its allocation reused: a decode loop's
    /// logits cost a copy into memory already mapped, [`Tensor::read_into`]).
    ///
    /// # Errors
    /// As [`Session::step`].
    pub fn step_into(&mut self, token: u32, logits: &mut Vec<f32>) -> Result<()> {
        self.room(1)?;
        let max = self.model.cfg.max_context as i64 - 1;
        let pos = Tensor::bind_var("start_pos", 0, max, self.pos as i64);
        let blocks = self.model.span_blocks(self.pos + 1);
        let out = self.decode.call(&[Tensor::from_slice(&[token as i32], [1]), pos, blocks])?;
        self.pos += 1;
        out[0].read_into(logits)
    }
}

#[cfg(test)]
mod tests {
    use super::{argmax, chunk_sums, exp, pick, top_candidates, Sampler, CHUNK};

    /// `argmax` picks what `max_by(total_cmp)` picks, the last of equals: ties within and across chunks of 64, NaNs
    /// of either sign (a positive one above infinity, a negative one below minus infinity), -0 below +0, at every
    /// length across the chunk edges.
    #[test]
    fn argmax_is_max_by_total_cmp() {
        let reference = |l: &[f32]| (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap();
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(5);
        let pool = [1.0f32, 3.0, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN, -2.5, 3.0];
        for n in 1..300 {
            let mut l: Vec<f32> = (0..n).map(|_| pool[rand::Rng::random_range(&mut rng, 0..pool.len())]).collect();
            assert_eq!(argmax(&l), reference(&l), "{l:?}");
            l[rand::Rng::random_range(&mut rng, 0..n)] = f32::NAN;
            assert_eq!(argmax(&l), reference(&l), "{l:?}");
        }
        assert_eq!(argmax(&[2.0; 130]), 129);
    }

    /// How often each token of `logits` is drawn in `n` draws.
    fn frequencies(s: &mut Sampler, logits: &[f32], n: usize) -> Vec<f64> {
        let mut f = vec![0.0; logits.len()];
        for _ in 0..n {
            f[s.sample(logits) as usize] += 1.0 / n as f64;
        }
        f
    }

    /// Probabilities 0.5, 0.3, 0.15, 0.05 (and a vocabulary's tail far below): greedy takes the first; top-p 0.75
    /// keeps the first two (0.8 >= 0.75) at 5:3; top-k 3 the first three at 10:6:3; plain sampling draws each at
    /// its probability (temperature 1); temperature 0.5 squares the odds (25:9:2.25:0.25).
    #[test]
    fn draws_follow_the_kept_probabilities() {
        let mut logits: Vec<f32> = [0.5f32, 0.3, 0.15, 0.05].iter().map(|p| p.ln()).collect();
        logits.extend(std::iter::repeat_n(-40.0, 1000));
        let n = 40_000;
        let near = |f: &[f64], want: &[f64]| {
            let z: f64 = want.iter().sum();
            want.iter().enumerate().all(|(i, w)| (f[i] - w / z).abs() < 0.01) && f[want.len()..].iter().all(|&x| x == 0.0)
        };
        assert_eq!(Sampler::new(0.0, 0, 1.0, 1).sample(&logits), 0);
        let f = frequencies(&mut Sampler::new(1.0, 0, 0.75, 1), &logits, n);
        assert!(near(&f, &[5.0, 3.0]), "top-p 0.75: {:?}", &f[..4]);
        let f = frequencies(&mut Sampler::new(1.0, 3, 1.0, 2), &logits, n);
        assert!(near(&f, &[10.0, 6.0, 3.0]), "top-k 3: {:?}", &f[..4]);
        let f = frequencies(&mut Sampler::new(1.0, 0, 1.0, 3), &logits, n);
        assert!(near(&f[..4], &[0.5, 0.3, 0.15, 0.05]), "plain: {:?}", &f[..4]);
        let f = frequencies(&mut Sampler::new(1.0, 0, f32::NAN, 13), &logits, n);
        assert!(near(&f[..4], &[0.5, 0.3, 0.15, 0.05]), "top-p NaN (none): {:?}", &f[..4]);
        let f = frequencies(&mut Sampler::new(0.5, 0, 1.0, 4), &logits, n);
        assert!(near(&f[..4], &[25.0, 9.0, 2.25, 0.25]), "temperature 0.5: {:?}", &f[..4]);
        // (top-k, then top-p over the k kept: 0.5 / 0.8 < 0.7 <= 0.8 / 0.8; and 0.6 <= 0.5 / 0.8, the first alone)
        let f = frequencies(&mut Sampler::new(1.0, 2, 0.7, 5), &logits, n);
        assert!(near(&f, &[5.0, 3.0]), "top-k 2, top-p 0.7: {:?}", &f[..4]);
        let f = frequencies(&mut Sampler::new(1.0, 2, 0.6, 6), &logits, n);
        assert!(near(&f, &[1.0]), "top-k 2, top-p 0.6: {:?}", &f[..4]);
        // (top-p 0: the best alone; top-k past the vocabulary: all of it)
        assert!(near(&frequencies(&mut Sampler::new(1.0, 0, 0.0, 7), &logits, 1000), &[1.0]));
        let f = frequencies(&mut Sampler::new(1.0, 5000, 1.0, 8), &logits, n);
        assert!(near(&f[..4], &[0.5, 0.3, 0.15, 0.05]), "top-k 5000: {:?}", &f[..4]);
    }

    /// Greedy draws of logits 1.0, 0.9, -5.0: a frequency penalty of 0.5 alternates the first two (each drawn lowers
    /// it 0.5 more: 0.5 < 0.9, then 0.4 < 0.5, 0.0 < 0.4, ...); a presence penalty of 0.5 lowers each once (the first
    /// at 0.5 stays above the second's 0.4 after both were drawn); a bias of 10 on the last picks it (one past the
    /// vocabulary is ignored); without any, the first every time.
    #[test]
    fn penalties_and_bias_move_greedy_draws() {
        let logits = [1.0f32, 0.9, -5.0];
        let draws = |s: &mut Sampler| (0..6).map(|_| s.sample(&logits)).collect::<Vec<_>>();
        let mut s = Sampler::new(0.0, 0, 1.0, 1);
        assert_eq!(draws(&mut s), [0; 6]);
        s.frequency_penalty = 0.5;
        assert_eq!(draws(&mut s), [0, 1, 0, 1, 0, 1]);
        let mut s = Sampler::new(0.0, 0, 1.0, 1);
        s.presence_penalty = 0.5;
        assert_eq!(draws(&mut s), [0, 1, 0, 0, 0, 0]);
        let mut s = Sampler::new(0.0, 0, 1.0, 1);
        s.logit_bias = vec![(2, 10.0), (3, 50.0)];
        assert_eq!(draws(&mut s), [2; 6]);
    }

    /// A nucleus longer than the first sorted head (256): 3,000 logits falling 0.001 apart, shuffled; top-p 0.5
    /// draws every token of the nucleus (as a full sort's running sum finds it) and none past it.
    #[test]
    fn top_p_nucleus_past_the_first_sorted_head() {
        let n = 3000;
        let mut logits: Vec<f32> = (0..n).map(|i| -0.001 * i as f32).collect();
        let p: Vec<f64> = logits.iter().map(|&l| f64::from(l).exp()).collect();
        let total: f64 = p.iter().sum();
        let mut acc = 0.0;
        let keep = p.iter().position(|w| {
            acc += w / total;
            acc >= 0.5
        });
        let keep = keep.expect("a nucleus") + 1;
        assert!(keep > 512, "nucleus {keep}");
        let perm: Vec<usize> = (0..n).map(|i| i * 1237 % n).collect();
        logits = perm.iter().map(|&i| logits[i]).collect();
        let f = frequencies(&mut Sampler::new(1.0, 0, 0.5, 12), &logits, 50_000);
        for (j, &i) in perm.iter().enumerate() {
            assert_eq!(f[j] > 0.0, i < keep, "token of rank {i} drawn {} (nucleus {keep})", f[j]);
        }
    }

    /// `top_candidates` holds the k largest logits (by `total_cmp`, as a sort finds them): ties, NaNs and
    /// infinities, k below and above the number of chunks of 64, lengths across the chunk edges.
    #[test]
    fn top_candidates_hold_the_k_largest() {
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(11);
        let pool = [1.0f32, 3.0, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, -2.5];
        let mut order = vec![];
        for n in [1, 63, 64, 65, 200, 1000, 4099] {
            for k in [1, 2, 3, 17, 40, 70] {
                let l: Vec<f32> = (0..n)
                    .map(|_| match rand::Rng::random_range(&mut rng, 0..20) {
                        i if i < pool.len() => pool[i],
                        _ => rand::Rng::random_range(&mut rng, -8.0..8.0),
                    })
                    .collect();
                let k = k.min(n);
                top_candidates(&l, k, &mut order);
                let desc = |a: &f32, b: &f32| b.total_cmp(a);
                let mut got: Vec<f32> = order.iter().map(|&i| l[i]).collect();
                got.sort_unstable_by(desc);
                let mut want = l.clone();
                want.sort_unstable_by(desc);
                assert_eq!(
                    got[..k].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    want[..k].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "n {n} k {k}"
                );
            }
        }
    }

    /// The sampler's `exp` within 2 ulp of the C library's `expf` over [-87, 0] (sampled every 1/4096), exact at 0, 0
    /// below -87 and for minus infinity, NaN for NaN.
    #[test]
    fn exp_is_expf_within_two_ulp() {
        for i in 0..=87 * 4096 {
            let x = -(i as f32) / 4096.0;
            let (got, want) = (exp(x), x.exp());
            assert!((got.to_bits() as i32 - want.to_bits() as i32).abs() <= 2, "exp({x}) = {got}, expf {want}");
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!((exp(-87.5), exp(f32::NEG_INFINITY)), (0.0, 0.0));
        assert!(exp(f32::NAN).is_nan());
    }

    /// `pick` takes the index where the running sum of the weights passes `r`, across chunk edges; past the total
    /// (rounding), the last positive weight; with none positive, None. Weights 1 (logits at the top) and 0 (minus
    /// infinity), exact in float32.
    #[test]
    fn pick_finds_where_the_running_sum_passes() {
        let mut logits = vec![f32::NEG_INFINITY; 3 * CHUNK];
        for i in [5, CHUNK - 1, CHUNK + 2, 2 * CHUNK + 7] {
            logits[i] = 2.5;
        }
        let mut chunks = vec![];
        assert_eq!(chunk_sums(&logits, 2.5, 0.5, &mut chunks), 4.0);
        assert_eq!(chunks, [2.0, 1.0, 1.0]);
        for (r, want) in [
            (0.0, 5),
            (0.99, 5),
            (1.0, CHUNK - 1),
            (1.99, CHUNK - 1),
            (2.0, CHUNK + 2),
            (3.0, 2 * CHUNK + 7),
            (3.99, 2 * CHUNK + 7),
            (4.0, 2 * CHUNK + 7),
        ] {
            assert_eq!(pick(&logits, (2.5, 0.5), &chunks, r), Some(want), "r = {r}");
        }
        // (a short last chunk: 130 logits, the weight in its last two)
        let mut short = vec![f32::NEG_INFINITY; 130];
        (short[128], short[129]) = (0.0, 0.0);
        assert_eq!(chunk_sums(&short, 0.0, 1.0, &mut chunks), 2.0);
        assert_eq!([0.5, 1.5, 2.0].map(|r| pick(&short, (0.0, 1.0), &chunks, r)), [Some(128), Some(129), Some(129)]);
        let none = vec![f32::NEG_INFINITY; 100];
        chunk_sums(&none, 0.0, 1.0, &mut chunks);
        assert_eq!(pick(&none, (0.0, 1.0), &chunks, 0.0), None);
    }

    /// NaN or infinite logits (a diverged model) draw some token of the vocabulary, never a panic: the server's
    /// batcher thread samples every stream's token.
    #[test]
    fn draws_from_broken_logits_stay_in_the_vocabulary() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let logits = [1.0, bad, 0.5, 0.25];
            for (k, p, t) in [(0, 0.9, 1.0), (0, 1.0, 0.7), (2, 0.5, 1.0), (0, -1.0, 1.0), (0, 0.9, 0.0)] {
                let got = Sampler::new(t, k, p, 9).sample(&logits);
                assert!(got < 4, "{bad} with top-k {k}, top-p {p}, temperature {t}: token {got}");
            }
        }
    }
}
