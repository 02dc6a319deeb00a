//! Serving several generations at once (llama-server's slots). In: [`Request`]s (prompt tokens, a sampler, a
//! token budget) from any thread. Out: each request's [`Event`]s on its own channel, in order. One thread owns
//! the model; each request gets a slot whose KV cache it keeps after it ends, so a later prompt that starts the
//! same way (a chat's next turn) prefills only what is new.

use super::generate::{chunk_inputs, Sampler, PREFILL_CHUNK};
use super::model::{KvCache, StartPos, Transformer};
use crate::error::{Error, Result};
use crate::{Tensor, TinyJit};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

/// One generation: `prompt` (token ids, BOS included) continued by at most `max_tokens` tokens drawn by `sampler`.
pub struct Request {
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub sampler: Sampler,
    /// Where the [`Event`]s go. Dropping the receiver cancels the request (its slot is freed at the next token).
    pub events: Sender<Event>,
}

/// Why a generation ended (OpenAI's `finish_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The model wrote an end-of-generation token (`"stop"`).
    Stop,
    /// `max_tokens` tokens were written, or the context is full (`"length"`).
    Length,
}

/// What a request's channel receives: `Started`, then `Token`s, then `Done` (or `Failed` at any point).
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The prompt is in the cache; `cached` of its tokens were reused from an earlier request's.
    Started {
        cached: usize,
    },
    /// A generated token (end-of-generation tokens are not sent).
    Token(u32),
    Done(Finish),
    /// The model failed (a device or compiler error); the message says what went wrong.
    Failed(String),
}

/// The handle to the thread that runs the model: cheap to clone, shareable between request threads.
#[derive(Clone)]
pub struct Batcher {
    tx: Sender<Request>,
    max_context: usize,
    /// False once the thread has ended (a panic in the model: every request after it fails).
    alive: Arc<AtomicBool>,
}

/// Marks the batcher stopped when its thread ends, by return or by panic.
struct Alive(Arc<AtomicBool>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Batcher {
    /// Moves `model` into a new thread that serves requests with `slots` KV caches (at least one); `is_end` tells
    /// the end-of-generation tokens.
    ///
    /// # Panics
    /// If the operating system can't start the thread.
    pub fn spawn(model: Transformer, is_end: impl Fn(u32) -> bool + Send + 'static, slots: usize) -> Batcher {
        let (tx, rx) = mpsc::channel();
        let max_context = model.cfg.max_context;
        let slots = slots.max(1);
        let alive = Arc::new(AtomicBool::new(true));
        let guard = Alive(alive.clone());
        std::thread::Builder::new()
            .name("llm-batcher".into())
            .spawn(move || {
                let _guard = guard;
                serve(&model, &is_end, slots, &rx)
            })
            .expect("spawn the batcher");
        Batcher { tx, max_context, alive }
    }

    /// Whether the model thread still runs (it ends only by a panic, which the failed requests report).
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The longest prompt plus generation a request may have, in tokens.
    pub fn max_context(&self) -> usize {
        self.max_context
    }

    /// Queues `r`; its events arrive on `r.events`.
    ///
    /// # Errors
    /// [`Error::Context`] when the prompt is empty, leaves no room for a token in the context, or the model thread
    /// has stopped.
    pub fn submit(&self, r: Request) -> Result<()> {
        if r.prompt.is_empty() {
            return Err(Error::Context("the prompt encodes to no tokens".into()));
        }
        if r.prompt.len() >= self.max_context {
            return Err(Error::Context(format!(
                "the prompt's {} tokens leave no room in the context of {} tokens",
                r.prompt.len(),
                self.max_context
            )));
        }
        self.tx.send(r).map_err(|_| Error::Context("the model thread has stopped".into()))
    }
}

/// A KV cache and the tokens in it (kept after its request ends, for the next prompt that shares a prefix).
struct Slot {
    cache: KvCache,
    tokens: Vec<u32>,
    busy: bool,
}

/// A request being decoded: the token to feed its slot next and how many it has written.
struct Active {
    slot: usize,
    req: Request,
    next: u32,
    made: usize,
}

/// The decode step a batcher's TinyJit replays: one capture per (sequences in the batch, a prompt chunk's length run
/// in the same pass or 0: [`chunk_inputs`]), for any slots (their caches are inputs) and any spans (bound variables).
type StepKey = (usize, usize);
type StepFn<'m> = Box<dyn FnMut(&[Tensor], &StepKey) -> Result<Vec<Tensor>> + 'm>;
/// A prompt chunk's pass, replayed by a TinyJit: one capture per chunk length, for any slot and span.
type ChunkKey = usize;
type ChunkFn<'m> = Box<dyn FnMut(&[Tensor], &ChunkKey) -> Result<Vec<Tensor>> + 'm>;

/// The batcher thread: admits queued requests into free slots (each prompt is prefilled past the longest prefix a
/// free slot already holds, a chunk per turn while other requests decode), then runs one decode step for every
/// active request at once, until the channel closes.
fn serve(model: &Transformer, is_end: &dyn Fn(u32) -> bool, slots: usize, rx: &Receiver<Request>) {
    let mut slots: Vec<Slot> = match (0..slots).map(|_| Ok(Slot { cache: model.new_cache()?, tokens: vec![], busy: false })).collect() {
        Ok(s) => s,
        Err(e) => return fail_all(rx, &e),
    };
    // inputs: the token ids (the rows' then the chunk's), the rows' span in blocks and each row's position (bound
    // variables), the chunk's start, last token's index and span in blocks (bound variables) if there is one, then
    // each row's cache tensors, then the chunk's
    let per_cache = 2 * model.cfg.n_layers;
    let f: StepFn = Box::new(move |x: &[Tensor], &(b, len): &StepKey| {
        let vars = 2 + b + if len == 0 { 0 } else { 3 };
        let caches: Vec<KvCache> = x[vars..].chunks(per_cache).map(KvCache::from_tensors).collect();
        let rows: Vec<_> = caches.iter().zip(&x[2..2 + b]).map(|(c, v)| (c, StartPos::Blocks(v, &x[1]))).collect();
        let logits = match len {
            0 => model.decode(&x[0], &rows),
            _ => model.decode_and_prefill(&x[0], &rows, (&caches[b], StartPos::Blocks(&x[2 + b], &x[4 + b]), &x[3 + b])),
        };
        Ok(vec![most_likely(&logits), logits])
    });
    let mut step = TinyJit::with_args(f);
    // inputs: the chunk's ids, its start, last token's index and span in blocks (bound variables), then the slot's
    // cache tensors
    let f: ChunkFn = Box::new(move |x: &[Tensor], _: &ChunkKey| {
        Ok(vec![model.prefill(&KvCache::from_tensors(&x[4..]), &x[0], StartPos::Blocks(&x[1], &x[3]), &x[2])])
    });
    let mut chunk_step = TinyJit::with_args(f);
    let (ctx, vocab) = (model.cfg.max_context, model.cfg.vocab);
    let mut queue: VecDeque<Request> = VecDeque::new();
    let mut prefilling: VecDeque<(usize, Request)> = VecDeque::new();
    let mut active: Vec<Active> = Vec::new();
    // (each step's most likely tokens, `[rows (+ 1 for a joining chunk)]`, and its logits when read, `[rows (+ 1),
    // vocab]`, into the same memory each step)
    let (mut best, mut logits): (Vec<i32>, Vec<f32>) = (Vec::new(), Vec::new());
    loop {
        if active.is_empty() && queue.is_empty() && prefilling.is_empty() {
            match rx.recv() {
                Ok(r) => queue.push_back(r),
                Err(_) => return,
            }
        }
        queue.extend(rx.try_iter());
        // admit: the free slot that holds the longest prefix of the prompt (at least one prompt token is run, for
        // its logits); its prompt is prefilled a chunk at a time below
        while !queue.is_empty() {
            let common = |s: &Slot| s.tokens.iter().zip(&queue[0].prompt).take_while(|(a, b)| a == b).count();
            let Some(i) = (0..slots.len()).filter(|&i| !slots[i].busy).max_by_key(|&i| common(&slots[i])) else { break };
            let keep = common(&slots[i]);
            let r = queue.pop_front().expect("a queued request");
            let keep = keep.min(r.prompt.len() - 1);
            slots[i].tokens.truncate(keep);
            // (a request cancelled while queued is not prefilled)
            if r.events.send(Event::Started { cached: keep }).is_err() {
                continue;
            }
            slots[i].busy = true;
            prefilling.push_back((i, r));
        }
        // the oldest prompt being prefilled: a whole chunk of its own while no stream decodes; else a chunk in the
        // streams' next decode step (continuous batching: each weight is read once for both), short enough that the
        // streams keep streaming (llama-server's way)
        let mut joining = None;
        if let Some((i, r)) = prefilling.pop_front() {
            let (at, left) = (slots[i].tokens.len(), r.prompt.len() - slots[i].tokens.len());
            if !active.is_empty() {
                joining = Some((i, r, JOIN_CHUNK.min(left)));
            } else {
                let n = PREFILL_CHUNK.min(left);
                match prefill_chunk(model, &mut chunk_step, &slots[i].cache, at, &r.prompt[at..at + n]) {
                    Ok(logits) => after_chunk(&mut slots[i], (i, r, n), Pick::Logits(&logits), ctx, is_end, &mut prefilling, &mut active),
                    Err(e) => fail(&mut slots[i], r, &e),
                }
            }
        }
        if active.is_empty() {
            continue;
        }
        // one decode step for every active request: row b feeds its token at its slot's position, through its slot's
        // cache (an input, so the step's capture serves any slots and spans: one per number of rows and joining chunk
        // length); the joining chunk's tokens follow the rows', padded to [`JOIN_CHUNK`] ([`chunk_inputs`])
        let b = active.len();
        let mut key: StepKey = (b, 0);
        let mut ids: Vec<i32> = active.iter().map(|a| a.next as i32).collect();
        let end = active.iter().map(|a| slots[a.slot].tokens.len() + 1).max().unwrap_or(ctx);
        let mut inputs: Vec<Tensor> = std::iter::once(model.span_blocks(end))
            .chain((0..b).map(|k| Tensor::bind_var(&format!("start_pos{k}"), 0, ctx as i64 - 1, slots[active[k].slot].tokens.len() as i64)))
            .collect();
        inputs.extend(active.iter().flat_map(|a| slots[a.slot].cache.tensors()));
        if let Some((i, r, n)) = &joining {
            let at = slots[*i].tokens.len();
            let (x, len) = chunk_inputs(model, &r.prompt[at..at + n], at, JOIN_CHUNK);
            ids.extend(r.prompt[at..at + n].iter().map(|&t| t as i32).chain(std::iter::repeat(0)).take(len));
            key = (b, len);
            inputs.splice(1 + b..1 + b, x.into_iter().skip(1));
            inputs.extend(slots[*i].cache.tensors());
        }
        inputs.insert(0, Tensor::from_slice(&ids, [ids.len()]));
        // (each row's most likely token comes from the step's kernels; the logits are read only for a row whose sampler
        // wants them, or whose argmax found none: a row of NaNs; a joining chunk before its prompt's last wants none)
        let mut greedy: Vec<bool> = active.iter().map(|a| a.req.sampler.is_greedy()).collect();
        greedy.extend(joining.as_ref().map(|(i, r, n)| r.sampler.is_greedy() || slots[*i].tokens.len() + n < r.prompt.len()));
        let read = step.call_with(&inputs, key).and_then(|out| {
            out[0].read_into(&mut best)?;
            if greedy.iter().zip(&best).all(|(&g, &t)| g && (0..vocab as i32).contains(&t)) {
                return Ok(());
            }
            out[1].read_into(&mut logits)
        });
        if let Err(e) = read {
            for a in active.drain(..) {
                fail(&mut slots[a.slot], a.req, &e);
            }
            if let Some((i, r, _)) = joining {
                fail(&mut slots[i], r, &e);
            }
            continue;
        }
        let mut still = Vec::with_capacity(b);
        for (k, mut a) in active.drain(..).enumerate() {
            let slot = &mut slots[a.slot];
            slot.tokens.push(a.next);
            if advance(&mut a, pick(k, &greedy, &best, &logits, vocab), slot.tokens.len(), ctx, is_end) {
                still.push(a);
            } else {
                slot.busy = false;
            }
        }
        active = still;
        if let Some((i, r, n)) = joining {
            after_chunk(&mut slots[i], (i, r, n), pick(b, &greedy, &best, &logits, vocab), ctx, is_end, &mut prefilling, &mut active);
        }
    }
}

/// Ends `r`, which held `slot`, with error `e` (the slot is freed and forgets its tokens).
fn fail(slot: &mut Slot, r: Request, e: &Error) {
    (slot.busy, slot.tokens) = (false, vec![]);
    let _ = r.events.send(Event::Failed(e.to_string()));
}

/// After a chunk of `n` of `r`'s prompt tokens entered `slot` (number `i`; `next`: after the chunk's last token): `r`
/// back at the front of `prefilling` while its prompt has more, else its first token sampled and `r` decoding in
/// `active` (or ended at that token, its slot freed).
fn after_chunk(
    slot: &mut Slot,
    (i, r, n): (usize, Request, usize),
    next: Pick,
    ctx: usize,
    is_end: &dyn Fn(u32) -> bool,
    prefilling: &mut VecDeque<(usize, Request)>,
    active: &mut Vec<Active>,
) {
    let at = slot.tokens.len();
    slot.tokens.extend_from_slice(&r.prompt[at..at + n]);
    if slot.tokens.len() < r.prompt.len() {
        return prefilling.push_front((i, r));
    }
    let mut a = Active { slot: i, req: r, next: 0, made: 0 };
    if advance(&mut a, next, slot.tokens.len(), ctx, is_end) {
        active.push(a);
    } else {
        slot.busy = false;
    }
}

/// Logits after `tokens` (at most [`PREFILL_CHUNK`]), which enter `cache` at `at`, through `jit`: padded to a power
/// of two ([`chunk_inputs`]), so a few captured graphs serve every chunk, a prompt's last one too.
fn prefill_chunk(
    model: &Transformer,
    jit: &mut TinyJit<ChunkFn, ChunkKey>,
    cache: &KvCache,
    at: usize,
    tokens: &[u32],
) -> Result<Vec<f32>> {
    let (inputs, key) = chunk_inputs(model, tokens, at, 1);
    let inputs: Vec<Tensor> = inputs.into_iter().chain(cache.tensors()).collect();
    jit.call_with(&inputs, key)?[0].to_vec::<f32>()
}

/// Prompt tokens a chunk joining a decode step takes: SmolLM2's 2-row step on a 2-core Zen 4 with a chunk at 500 and
/// 900 rows takes 1.30-1.37x a plain step's time with 2 tokens, 1.64-1.83x with 4 (the chunk's attention over the
/// rows before it grows with both). One length, not one adapted to timings, so the step's captures are the same from
/// one long prompt to the next: a new capture compiles, and a stall for compiling is what chunking avoids.
const JOIN_CHUNK: usize = 2;

/// A row's next token: the step's own most likely one ([`most_likely`]), or its logits (`[vocab]`) for the sampler.
enum Pick<'a> {
    Best(u32),
    Logits(&'a [f32]),
}

/// Row `k`'s [`Pick`] from a step's most likely tokens `best` and its `logits` (`[rows, vocab]`, read when some row
/// is not `greedy` or its `best` is no token): the most likely token for a greedy row where that is a token (a row
/// of NaNs gives -1).
fn pick<'a>(k: usize, greedy: &[bool], best: &[i32], logits: &'a [f32], vocab: usize) -> Pick<'a> {
    match u32::try_from(best[k]) {
        Ok(t) if greedy[k] && (t as usize) < vocab => Pick::Best(t),
        _ => Pick::Logits(&logits[k * vocab..(k + 1) * vocab]),
    }
}

/// The index of each row's largest logit (`logits`: `[rows, vocab]` float32; out: `[rows]` int32), the last of
/// equal ones, as the host's greedy [`Sampler`] picks it, -1 for a row of NaNs (the host samples those; a row with
/// some NaNs gets a token that depends on the kernels' order of maxima, where the host's `total_cmp` would take a
/// NaN's): computed by the step's kernels on every core, where the logits are, so a greedy row reads 4 bytes, not its
/// logits (Gemma 3's 1 MB a row). tinygrad's `generate` also samples on the device, in its jitted step (its `argmax`
/// takes the first of equal maxima).
fn most_likely(logits: &Tensor) -> Tensor {
    let vocab = logits.shape()[1];
    // (whole-number bounds: int32 ids)
    let ids = Tensor::arange(0.0, vocab as f64, 1.0);
    logits.eq(logits.max_keepdim(1)).where_(&ids, -1).max(1)
}

/// Takes `a`'s next token from `next` (its sampler draws it from logits) and sends it; false when the request has
/// ended (an end token, its budget spent, the context full at `pos` tokens, or its receiver gone), after sending
/// `Done`.
fn advance(a: &mut Active, next: Pick, pos: usize, ctx: usize, is_end: &dyn Fn(u32) -> bool) -> bool {
    let next = match next {
        Pick::Best(t) => t,
        Pick::Logits(l) => a.req.sampler.sample(l),
    };
    if is_end(next) {
        let _ = a.req.events.send(Event::Done(Finish::Stop));
        return false;
    }
    if a.req.events.send(Event::Token(next)).is_err() {
        return false;
    }
    (a.next, a.made) = (next, a.made + 1);
    if a.made >= a.req.max_tokens || pos >= ctx {
        let _ = a.req.events.send(Event::Done(Finish::Length));
        return false;
    }
    true
}

/// Answers every request with `e` (the model could not start).
fn fail_all(rx: &Receiver<Request>, e: &Error) {
    while let Ok(r) = rx.recv() {
        let _ = r.events.send(Event::Failed(e.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::most_likely;
    use crate::Tensor;

    /// Each row's most likely token is the last of its equal largest logits, as the host's greedy sampler picks it
    /// (`max_by(total_cmp)`), also for a row of minus infinities; a row of NaNs has none (-1: the batcher then hands
    /// its logits to the sampler).
    #[test]
    fn most_likely_is_the_last_largest_logit() {
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let rows = [[1.0, 3.0, -2.0, 3.0, 0.5], [-inf; 5], [0.25, 0.5, inf, 0.0, -inf], [nan; 5], [-7.0, -1.5, -3.0, -1.5, -9.0]];
        let logits = Tensor::from_slice(&rows.concat(), [rows.len(), 5]);
        assert_eq!(most_likely(&logits).to_vec::<i32>().unwrap(), [3, 4, 2, -1, 3]);
    }
}
