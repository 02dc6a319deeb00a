//! `llm`: chat with, complete or benchmark a GGUF model (tinygrad `python -m tinygrad.llm`).
//!
//! `cargo run --release --bin llm -- --model FILE_OR_URL [--prompt TEXT --count N] [--benchmark N]
//! [--temperature T] [--top_k K] [--top_p P] [--seed S] [--max_context N] [--serve PORT [--host H] [--api-key KEY]
//! [--slots N]]`. Without `--prompt`, `--benchmark` or `--serve` it chats in the terminal (the file's chat template,
//! streamed replies; an empty line or EOF ends). `--serve` answers the OpenAI API and a chat page
//! ([`tinygrad::llm::serve`]).

use std::io::{BufRead, Write};
use std::time::Instant;
use tinygrad::llm::batch::{Batcher, Event, Request};
use tinygrad::llm::generate::{Sampler, Session};
use tinygrad::llm::model::Transformer;
use tinygrad::llm::tokenizer::{StreamDecoder, Tokenizer};
use tinygrad::llm::{chat_prompt, fetch_model, serve, tokenizer_from_gguf};
use tinygrad::nn::gguf::GgufFile;

struct Args {
    model: String,
    prompt: Option<String>,
    count: usize,
    benchmark: Option<usize>,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    seed: u64,
    max_context: usize,
    serve: Option<u16>,
    host: String,
    api_key: Option<String>,
    slots: usize,
}

const USAGE: &str = "usage: llm --model FILE_OR_URL [--prompt TEXT] [--count N] [--benchmark N] [--temperature T] [--top_k K] [--top_p P] [--seed S] [--max_context N] [--serve PORT [--host H] [--api-key KEY] [--slots N]]";

fn parse() -> Result<Args, String> {
    let mut a = Args {
        model: String::new(),
        prompt: None,
        count: 64,
        benchmark: None,
        temperature: 0.7,
        top_k: 0,
        top_p: 1.0,
        seed: 0,
        max_context: 1024,
        serve: None,
        host: "127.0.0.1".into(),
        api_key: None,
        slots: 4,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<f64>().map_err(|_| format!("{flag}: {v:?} is not a number"));
        match flag.as_str() {
            "--model" => a.model = value()?,
            "--prompt" => a.prompt = Some(value()?),
            "--count" => a.count = num(value()?)? as usize,
            "--benchmark" => a.benchmark = Some(num(value()?)? as usize),
            "--temperature" => a.temperature = num(value()?)? as f32,
            "--top_k" => a.top_k = num(value()?)? as usize,
            "--top_p" => a.top_p = num(value()?)? as f32,
            "--seed" => a.seed = num(value()?)? as u64,
            "--max_context" => a.max_context = (num(value()?)? as usize).max(2),
            "--serve" => a.serve = Some(value()?.parse().map_err(|_| "--serve: the port must be a number in 0..=65535".to_string())?),
            "--host" => a.host = value()?,
            "--api-key" => a.api_key = Some(value()?),
            "--slots" => a.slots = (num(value()?)? as usize).max(1),
            "--help" | "-h" => return Err(USAGE.into()),
            f => return Err(format!("unknown flag {f}\n{USAGE}")),
        }
    }
    if a.model.is_empty() {
        return Err(format!("--model is required\n{USAGE}"));
    }
    Ok(a)
}

/// GB/s this machine reads memory at, on all cores (the bound a decode step's weight reads sit under): sums of a
/// 256 MiB buffer split over rayon's threads, after one untimed pass.
fn read_bandwidth() -> f64 {
    use rayon::prelude::*;
    let v = vec![1u64; 32 << 20];
    let sum = || v.par_chunks(1 << 16).map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x))).reduce(|| 0, u64::wrapping_add);
    std::hint::black_box(sum());
    let t = Instant::now();
    (0..4).for_each(|_| {
        std::hint::black_box(sum());
    });
    4.0 * (v.len() * 8) as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn run(a: &Args) -> tinygrad::Result<()> {
    if let Some(port) = a.serve {
        // (listening before the model loads: /health says "loading model" meanwhile)
        let listener = std::net::TcpListener::bind((a.host.as_str(), port)).map_err(|e| tinygrad::Error::Io {
            path: format!("{}:{port} (--host, --serve: pick a free port)", a.host).into(),
            source: e,
        })?;
        let addr = listener.local_addr().map_err(|e| tinygrad::Error::Io { path: "the listening socket".into(), source: e })?;
        println!("listening on http://{addr}");
        let opts = serve::Options { api_key: a.api_key.clone(), temperature: a.temperature, top_k: a.top_k, top_p: a.top_p };
        return serve::serve(listener, opts, || serve::Model::load(&a.model, a.max_context, a.slots));
    }
    let file = GgufFile::open(fetch_model(&a.model)?)?;
    let tok = tokenizer_from_gguf(&file)?;
    let model = Transformer::from_gguf(&file, &tinygrad::runtime::default_device(), a.max_context)?;
    let weight_bytes: usize = file.tensors.iter().map(|t| file.raw(&t.name).map_or(0, <[u8]>::len)).sum();
    let mut sampler = Sampler::new(a.temperature, a.top_k, a.top_p, a.seed);
    let mut session = Session::new(&model)?;
    let out = std::io::stdout();
    if let Some(n) = a.benchmark {
        // prefill: 128 tokens (the second run, the first compiles), then n greedy decode steps after it
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(40);
        let prompt: Vec<u32> = tok.encode_with_bos(&text).into_iter().take(128.min(a.max_context / 2)).collect();
        let mut logits = Vec::new();
        for _ in 0..2 {
            session = Session::new(&model)?;
            let t = Instant::now();
            logits = session.prefill(&prompt)?;
            let s = t.elapsed().as_secs_f64();
            println!("prefill: {} tokens in {:.2} ms, {:.2} tok/s", prompt.len(), s * 1e3, prompt.len() as f64 / s);
        }
        // (greedy: the figures are the model's, not the sampler's)
        let mut sampler = Sampler::new(0.0, 0, 1.0, 0);
        let mut times = Vec::new();
        for i in 0..n.min(a.max_context - prompt.len()) {
            let t = Instant::now();
            logits = session.step(sampler.sample(&logits))?;
            let s = t.elapsed().as_secs_f64();
            times.push(s);
            println!("token {i:4}: {:8.2} ms, {:7.2} tok/s, {:6.2} GB/s (weights)", s * 1e3, 1.0 / s, weight_bytes as f64 / s / 1e9);
        }
        // (the median of the replays: the first two steps run and capture the TinyJit)
        let mut warm: Vec<f64> = times.iter().skip(2).copied().collect();
        warm.sort_by(f64::total_cmp);
        if let Some(&m) = warm.get(warm.len() / 2) {
            println!(
                "decode: {:.2} ms/token, {:.2} tok/s, {:.2} GB/s of weights per token",
                m * 1e3,
                1.0 / m,
                weight_bytes as f64 / m / 1e9
            );
        }
        println!("machine read bandwidth: {:.2} GB/s", read_bandwidth());
        batched_benchmark(&file, &tok, &prompt, n, a.max_context)?;
        return Ok(());
    }
    let ctx = model.cfg.max_context;
    // (stops at `count` tokens, an end token, or a full context; no step after the last token)
    let complete = |session: &mut Session, sampler: &mut Sampler, ids: &[u32], count: usize| -> tinygrad::Result<String> {
        if ids.is_empty() {
            return Err(tinygrad::Error::Context("the prompt encodes to no tokens".into()));
        }
        let mut logits = session.prefill(ids)?;
        let (mut dec, mut text) = (StreamDecoder::new(), String::new());
        for i in 0..count {
            let next = sampler.sample(&logits);
            if tok.is_end(next) {
                break;
            }
            let piece = dec.push(&tok, next);
            text.push_str(&piece);
            // (a closed stdout, as `| head` leaves it, ends the output, not the program with a panic)
            let mut o = out.lock();
            let _ = write!(o, "{piece}").and_then(|()| o.flush());
            if i + 1 == count || session.pos >= ctx {
                break;
            }
            logits = session.step(next)?;
        }
        text.push_str(&dec.finish());
        Ok(text)
    };
    if let Some(p) = &a.prompt {
        complete(&mut session, &mut sampler, &tok.encode_prompt(p), a.count)?;
        let _ = writeln!(out.lock());
        return Ok(());
    }
    let mut history: Vec<(String, String)> = Vec::new();
    let stdin = std::io::stdin();
    loop {
        let _ = write!(out.lock(), "> ");
        let _ = out.lock().flush();
        let mut line = String::new();
        if stdin.lock().read_line(&mut line).map_err(|e| tinygrad::Error::Io { path: "stdin".into(), source: e })? == 0
            || line.trim().is_empty()
        {
            return Ok(());
        }
        history.push(("user".into(), line.trim().into()));
        let msgs: Vec<(&str, &str)> = history.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
        let prompt = chat_prompt(&file, &tok, &msgs)?;
        // (each turn re-encodes the conversation into a fresh cache: simple, and the prompt is short)
        session = Session::new(&model)?;
        match complete(&mut session, &mut sampler, &tok.encode_prompt(&prompt), ctx) {
            Ok(reply) => {
                let _ = writeln!(out.lock());
                history.push(("assistant".into(), reply));
            }
            // (a conversation past the context starts over, rather than ending the program)
            Err(e @ tinygrad::Error::Context(_)) => {
                let _ = writeln!(out.lock(), "\n[{e}; the conversation starts over]");
                history.clear();
            }
            Err(e) => return Err(e),
        }
    }
}

/// Decode tokens/s of 1, 2 and 4 requests at once through the [`Batcher`] (the server's slots): each request
/// `n` greedy tokens after `prompt`, timed from the first token of all to the last.
fn batched_benchmark(file: &GgufFile, tok: &Tokenizer, prompt: &[u32], n: usize, max_context: usize) -> tinygrad::Result<()> {
    let batcher = Batcher::spawn(Transformer::from_gguf(file, &tinygrad::runtime::default_device(), max_context)?, |_| false, 4);
    let n = n.min(max_context - prompt.len() - 1);
    for streams in [1, 2, 4, 1, 2, 4] {
        let rxs: Vec<_> = (0..streams)
            .map(|i| {
                let (tx, rx) = std::sync::mpsc::channel();
                // (different prompts: each stream its own slot; the same sampler)
                let mut p = prompt.to_vec();
                p.push(tok.encode(&format!(" {i}"))[0]);
                batcher.submit(Request { prompt: p, max_tokens: n, sampler: Sampler::new(0.0, 0, 1.0, 0), events: tx }).map(|()| rx)
            })
            .collect::<tinygrad::Result<_>>()?;
        let (mut first, mut tokens) = (None, 0);
        for rx in rxs {
            for e in rx {
                match e {
                    Event::Token(_) => {
                        first.get_or_insert_with(Instant::now);
                        tokens += 1;
                    }
                    Event::Failed(m) => return Err(tinygrad::Error::Context(m)),
                    _ => {}
                }
            }
        }
        let s = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
        println!("batched decode: {streams} streams, {tokens} tokens in {:.2} s, {:.2} tok/s in total", s, tokens as f64 / s);
    }
    Ok(())
}

fn main() {
    if let Err(e) = tinygrad::runtime::check_env() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
