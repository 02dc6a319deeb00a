//! `llm`: chat with, complete or benchmark a GGUF model (tinygrad `python -m tinygrad.llm`).
//!
//! `cargo run --release --bin llm -- --model FILE_OR_URL [--prompt TEXT --count N] [--benchmark N]
//! [--temperature T] [--top_k K] [--top_p P] [--seed S] [--max_context N] [--serve PORT [--host H] [--api-key KEY]
//! [--slots N] [--allowed-hosts H,..] [--cors ORIGIN] [--max-connections N]]` (`--help` lists them; flags parsed by
//! clap, tinygrad's spellings with `_` and `-` both accepted). Without `--prompt`, `--benchmark` or `--serve` it chats
//! in the terminal (the file's chat template, streamed replies; an empty line or EOF ends). `--serve` answers the
//! OpenAI API and a chat page ([`tinygrad::llm::serve`]).

use std::io::{BufRead, Write};
use std::time::Instant;
use tinygrad::llm::batch::{Batcher, Event, Request};
use tinygrad::llm::generate::{Sampler, Session};
use tinygrad::llm::model::Transformer;
use tinygrad::llm::tokenizer::{StreamDecoder, Tokenizer};
use tinygrad::llm::{chat_prompt, fetch_model, serve, tokenizer_from_gguf};
use tinygrad::nn::gguf::GgufFile;

/// Chat with, complete or benchmark a GGUF model, or serve it with OpenAI's API (tinygrad `python -m tinygrad.llm`).
/// Without --prompt, --benchmark or --serve it chats in the terminal (an empty line or end of input ends).
#[derive(clap::Parser)]
#[command(name = "llm", version, allow_negative_numbers = true)]
struct Args {
    /// The model: a .gguf file (the first part of a split one), an https:// URL, or a name of tinygrad's (llama3.2:1b,
    /// llama3.2:1b-q4, llama3.2:3b, llama3.2:3b-f16, llama3.1:8b, qwen3:0.6b, qwen3:1.7b, qwen3:8b), downloaded to the
    /// cache
    #[arg(long)]
    model: String,
    /// Complete this prompt, then exit
    #[arg(long)]
    prompt: Option<String>,
    /// Tokens --prompt generates at most
    #[arg(long, default_value_t = 64)]
    count: usize,
    /// Time a prefill of --depth tokens and N decode steps (then 1, 2 and 4 streams at once), then exit
    #[arg(long, value_name = "N")]
    benchmark: Option<usize>,
    /// Tokens --benchmark prefills before its decode steps (llama-bench's `-p`; at most half of --max_context)
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = at_least::<1>)]
    depth: usize,
    /// Sampling temperature (0: greedy)
    #[arg(long, default_value_t = 0.7, value_parser = non_negative)]
    temperature: f32,
    /// Sample from the K most likely tokens only (0: all)
    #[arg(long = "top_k", visible_alias = "top-k", value_name = "K", default_value_t = 0)]
    top_k: usize,
    /// Sample from the smallest set of tokens whose probabilities sum to P (1: all)
    #[arg(long = "top_p", visible_alias = "top-p", value_name = "P", default_value_t = 1.0, value_parser = probability)]
    top_p: f32,
    /// Random seed of the sampler
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tokens of context (prompt and reply) a sequence may hold
    #[arg(long = "max_context", visible_alias = "max-context", value_name = "N", default_value_t = 1024, value_parser = at_least::<2>)]
    max_context: usize,
    /// Serve the OpenAI API and a chat page on this port (0: any free one)
    #[arg(long, value_name = "PORT")]
    serve: Option<u16>,
    /// The address --serve listens on
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Require `Authorization: Bearer KEY` on the API
    #[arg(long = "api-key", visible_alias = "api_key", value_name = "KEY")]
    api_key: Option<String>,
    /// Requests --serve decodes at once (KV caches kept)
    #[arg(long, default_value_t = 4, value_parser = at_least::<1>)]
    slots: usize,
    /// More names the Host header of a request to --serve may give, comma-separated (`*`: any); the bound address,
    /// localhost and 127.0.0.1 are always allowed
    #[arg(long = "allowed-hosts", visible_alias = "allowed_hosts", value_name = "HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// An origin other than the chat page's whose pages may call the API (`http://localhost:3000`; `*`: any)
    #[arg(long, value_name = "ORIGIN")]
    cors: Option<String>,
    /// Connections --serve holds at once; more are answered 503
    #[arg(long = "max-connections", visible_alias = "max_connections", value_name = "N", default_value_t = 64, value_parser = at_least::<1>)]
    max_connections: usize,
}

/// A float that is finite and not negative.
fn non_negative(v: &str) -> Result<f32, String> {
    v.parse::<f32>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| "expected a number >= 0".into())
}

/// A float in (0, 1].
fn probability(v: &str) -> Result<f32, String> {
    v.parse::<f32>().ok().filter(|x| *x > 0.0 && *x <= 1.0).ok_or_else(|| "expected a number in (0, 1]".into())
}

/// An integer of at least `MIN`.
fn at_least<const MIN: usize>(v: &str) -> Result<usize, String> {
    v.parse::<usize>().ok().filter(|x| *x >= MIN).ok_or_else(|| format!("expected an integer >= {MIN}"))
}

/// The arguments, or exits: `--help` and `--version` print to stdout (status 0); a bad flag is one line naming it
/// on stderr (status 1).
fn parse() -> Args {
    use clap::Parser;
    Args::try_parse().unwrap_or_else(|e| {
        if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) {
            print!("{e}");
            std::process::exit(0);
        }
        // clap's message up to its first blank line (then tips and usage), on one line
        let text = e.to_string();
        let first: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
        eprintln!("{}", first.join(" "));
        std::process::exit(1);
    })
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
        let opts = serve::Options {
            api_key: a.api_key.clone(),
            temperature: a.temperature,
            top_k: a.top_k,
            top_p: a.top_p,
            allowed_hosts: a.allowed_hosts.clone(),
            cors: a.cors.clone(),
            max_connections: a.max_connections,
        };
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
        // prefill: --depth tokens (the second run, the first compiles), then n greedy decode steps after it
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(a.depth.div_ceil(8));
        let prompt: Vec<u32> = tok.encode_with_bos(&text).into_iter().take(a.depth.min(a.max_context / 2)).collect();
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
            let next = sampler.sample(&logits);
            session.step_into(next, &mut logits)?;
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
            // (a closed stdout, as `| head` leaves it, ends the output, not the program with a panic; the lock released
            // before the step, whose kernels print from the CPU's worker threads under DEBUG)
            {
                let mut o = out.lock();
                let _ = write!(o, "{piece}").and_then(|()| o.flush());
            }
            if i + 1 == count || session.pos >= ctx {
                break;
            }
            session.step_into(next, &mut logits)?;
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
/// `n` greedy tokens after `prompt`, counted while every request decodes (from the last first token to the first
/// last token: each request's prompt joins the others' steps a chunk at a time before, and the requests end one by
/// one after). Each count first runs two rounds, not timed: the first leaves each slot holding its request's prompt
/// (a prompt new to its slot joins the other requests' steps a chunk at a time, so the first round may end before
/// all requests decode together), the second compiles and captures that count's decode step.
fn batched_benchmark(file: &GgufFile, tok: &Tokenizer, prompt: &[u32], n: usize, max_context: usize) -> tinygrad::Result<()> {
    let batcher = Batcher::spawn(Transformer::from_gguf(file, &tinygrad::runtime::default_device(), max_context)?, |_| false, 4);
    let n = n.min(max_context - prompt.len() - 1);
    for streams in [1, 2, 4] {
        for _ in 0..2 {
            batched_round(&batcher, tok, prompt, streams, n)?;
        }
        let times = batched_round(&batcher, tok, prompt, streams, n)?;
        let from = times.iter().filter_map(|t| t.first()).max();
        let to = times.iter().filter_map(|t| t.last()).min();
        // (tokens after `from` up to `to`: each request's gaps in the window)
        let made = times.iter().map(|t| t.iter().filter(|&x| Some(x) > from && Some(x) <= to).count()).sum::<usize>();
        match from.zip(to).and_then(|(f, t)| t.checked_duration_since(*f)).filter(|d| made > 0 && !d.is_zero()) {
            Some(d) => {
                let s = d.as_secs_f64();
                println!("batched decode: {streams} streams, {made} tokens in {s:.2} s, {:.2} tok/s in total", made as f64 / s)
            }
            None => println!("batched decode: {streams} streams: no tokens while all decoded (raise the benchmark's N)"),
        }
    }
    Ok(())
}

/// One round of [`batched_benchmark`]: `streams` requests of `n` greedy tokens each, request `i`'s prompt `prompt`
/// and " i" (each its own slot); when each request's tokens came.
fn batched_round(batcher: &Batcher, tok: &Tokenizer, prompt: &[u32], streams: usize, n: usize) -> tinygrad::Result<Vec<Vec<Instant>>> {
    let rxs: Vec<_> = (0..streams)
        .map(|i| {
            let (tx, rx) = std::sync::mpsc::channel();
            let mut p = prompt.to_vec();
            p.push(tok.encode(&format!(" {i}"))[0]);
            batcher.submit(Request { prompt: p, max_tokens: n, sampler: Sampler::new(0.0, 0, 1.0, 0), events: tx }).map(|()| rx)
        })
        .collect::<tinygrad::Result<_>>()?;
    // (a thread a request, each timing its tokens as they come)
    let threads: Vec<_> = rxs
        .into_iter()
        .map(|rx| {
            std::thread::spawn(move || {
                let mut times = vec![];
                for e in rx {
                    match e {
                        Event::Token(_) => times.push(Instant::now()),
                        Event::Failed(m) => return Err(tinygrad::Error::Context(m)),
                        _ => {}
                    }
                }
                Ok(times)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().expect("a benchmark request's thread")).collect()
}

fn main() {
    let args = parse();
    if let Err(e) = tinygrad::runtime::check_env() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
