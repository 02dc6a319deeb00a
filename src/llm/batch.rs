//! Serving several generations at once (llama-server's slots). In: [`Request`]s (prompt tokens, a sampler, a
//! token budget) from any thread. Out: each request's [`Event`]s on its own channel, in order. One thread owns
//! the model; each request gets a slot whose KV cache it keeps after it ends, so a later prompt that starts the
//! same way (a chat's next turn) prefills only what is new.

use super::generate::{chunk_inputs, span, Sampler, PREFILL_CHUNK};
use super::model::{KvCache, StartPos, Transformer};
use crate::error::{Error, Result};
use crate::{Tensor, TinyJit};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// The decode step a batcher's TinyJit replays: one capture per (sequences in the batch, cache rows attended), for
/// any slots (their caches are inputs).
type StepKey = (usize, usize);
type StepFn<'m> = Box<dyn FnMut(&[Tensor], &StepKey) -> Result<Vec<Tensor>> + 'm>;
/// A prompt chunk's pass, replayed by a TinyJit: one capture per (chunk length, cache rows attended), for any slot.
type ChunkKey = (usize, usize);
type ChunkFn<'m> = Box<dyn FnMut(&[Tensor], &ChunkKey) -> Result<Vec<Tensor>> + 'm>;

/// The batcher thread: admits queued requests into free slots (each prompt is prefilled past the longest prefix a
/// free slot already holds, a chunk per turn while other requests decode), then runs one decode step for every
/// active request at once, until the channel closes.
fn serve(model: &Transformer, is_end: &dyn Fn(u32) -> bool, slots: usize, rx: &Receiver<Request>) {
    let mut slots: Vec<Slot> = match (0..slots).map(|_| Ok(Slot { cache: model.new_cache()?, tokens: vec![], busy: false })).collect() {
        Ok(s) => s,
        Err(e) => return fail_all(rx, &e),
    };
    // inputs: the token ids, each row's position (a bound variable), then each row's cache tensors
    let f: StepFn = Box::new(move |x: &[Tensor], &(b, span): &StepKey| {
        let caches: Vec<KvCache> = x[1 + b..].chunks(x[1 + b..].len() / b).map(KvCache::from_tensors).collect();
        let rows: Vec<_> = caches.iter().zip(&x[1..=b]).map(|(c, v)| (c, StartPos::Var(v, span))).collect();
        Ok(vec![model.decode(&x[0], &rows)])
    });
    let mut step = TinyJit::with_args(f);
    // inputs: the chunk's ids, its start and last token's index (bound variables), then the slot's cache tensors
    let f: ChunkFn = Box::new(move |x: &[Tensor], &(_, span): &ChunkKey| {
        Ok(vec![model.prefill(&KvCache::from_tensors(&x[3..]), &x[0], &x[1], &x[2], span)])
    });
    let mut chunk_step = TinyJit::with_args(f);
    let (ctx, vocab) = (model.cfg.max_context, model.cfg.vocab);
    let mut queue: VecDeque<Request> = VecDeque::new();
    let mut prefilling: VecDeque<(usize, Request)> = VecDeque::new();
    let mut active: Vec<Active> = Vec::new();
    let (mut chunk, mut step_time) = (MIN_CHUNK, Duration::ZERO);
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
        // one chunk of the oldest prompt being prefilled: all of it when no stream waits, else a chunk that takes
        // about one decode step, so the streams' gaps between tokens about double (llama-server's chunked prefill)
        if let Some((i, r)) = prefilling.pop_front() {
            let slot = &mut slots[i];
            let (at, left) = (slot.tokens.len(), r.prompt.len() - slot.tokens.len());
            let (n, pad) = if active.is_empty() { (PREFILL_CHUNK.min(left), 1) } else { (chunk.min(left), chunk) };
            let t = Instant::now();
            match prefill_chunk(&mut chunk_step, &slot.cache, pad, at, &r.prompt[at..at + n], ctx) {
                Ok(logits) => {
                    slot.tokens.extend_from_slice(&r.prompt[at..at + n]);
                    if !active.is_empty() {
                        chunk = next_chunk(chunk, n, t.elapsed(), step_time);
                    }
                    if n < left {
                        prefilling.push_front((i, r));
                    } else {
                        let mut a = Active { slot: i, req: r, next: 0, made: 0 };
                        if advance(&mut a, &logits, slot.tokens.len(), ctx, is_end) {
                            active.push(a);
                        } else {
                            slot.busy = false;
                        }
                    }
                }
                Err(e) => {
                    (slot.busy, slot.tokens) = (false, vec![]);
                    let _ = r.events.send(Event::Failed(e.to_string()));
                }
            }
        }
        if active.is_empty() {
            continue;
        }
        // one decode step for every active request: row b feeds its token at its slot's position, through its slot's
        // cache (an input, so the step's capture serves any slots: one per number of rows and span)
        let key: StepKey = (active.len(), active.iter().map(|a| span(slots[a.slot].tokens.len() + 1, ctx)).max().unwrap_or(ctx));
        let ids: Vec<i32> = active.iter().map(|a| a.next as i32).collect();
        let mut inputs = vec![Tensor::from_slice(&ids, [ids.len()])];
        inputs.extend(
            active
                .iter()
                .enumerate()
                .map(|(b, a)| Tensor::bind_var(&format!("start_pos{b}"), 0, ctx as i64 - 1, slots[a.slot].tokens.len() as i64)),
        );
        inputs.extend(active.iter().flat_map(|a| slots[a.slot].cache.tensors()));
        let t = Instant::now();
        let logits = step.call_with(&inputs, key).and_then(|out| out[0].to_vec::<f32>());
        step_time = t.elapsed();
        let logits = match logits {
            Ok(l) => l,
            Err(e) => {
                for a in active.drain(..) {
                    (slots[a.slot].busy, slots[a.slot].tokens) = (false, vec![]);
                    let _ = a.req.events.send(Event::Failed(e.to_string()));
                }
                continue;
            }
        };
        let mut still = Vec::with_capacity(active.len());
        for (b, mut a) in active.drain(..).enumerate() {
            let slot = &mut slots[a.slot];
            slot.tokens.push(a.next);
            if advance(&mut a, &logits[b * vocab..(b + 1) * vocab], slot.tokens.len(), ctx, is_end) {
                still.push(a);
            } else {
                slot.busy = false;
            }
        }
        active = still;
    }
}

/// Logits after `tokens` (at most [`PREFILL_CHUNK`]), which enter `cache` at `at`, through `jit`: padded to a power
/// of two of at least `pad` ([`chunk_inputs`]), so a few captured graphs serve every chunk, a prompt's last one too.
fn prefill_chunk(
    jit: &mut TinyJit<ChunkFn, ChunkKey>,
    cache: &KvCache,
    pad: usize,
    at: usize,
    tokens: &[u32],
    ctx: usize,
) -> Result<Vec<f32>> {
    let (inputs, (len, _, span)) = chunk_inputs(tokens, at, pad, ctx);
    let inputs: Vec<Tensor> = inputs.into_iter().chain(cache.tensors()).collect();
    jit.call_with(&inputs, (len, span))?[0].to_vec::<f32>()
}

/// Prompt tokens a prefill chunk takes at least while streams decode (a power of two, as prefill's chunk lengths; at
/// most [`PREFILL_CHUNK`]).
const MIN_CHUNK: usize = 4;

/// The next chunk length after one of `n` tokens took `took` beside decode steps of `step`: half when it took
/// longer than a step, double when it took under half of one.
fn next_chunk(chunk: usize, n: usize, took: Duration, step: Duration) -> usize {
    if took > step {
        (n.next_power_of_two() / 2).clamp(MIN_CHUNK, PREFILL_CHUNK)
    } else if n == chunk && took < step / 2 {
        (chunk * 2).min(PREFILL_CHUNK)
    } else {
        chunk
    }
}

/// Samples `a`'s next token from `logits` and sends it; false when the request has ended (an end token, its
/// budget spent, the context full at `pos` tokens, or its receiver gone), after sending `Done`.
fn advance(a: &mut Active, logits: &[f32], pos: usize, ctx: usize, is_end: &dyn Fn(u32) -> bool) -> bool {
    let next = a.req.sampler.sample(logits);
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
