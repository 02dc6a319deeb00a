//! `llm::tokenizer`: tiny hand-made vocabularies whose ids are derived by hand, then the real SmolLM2 (byte-level BPE,
//! preset `smollm`) and Gemma 3 (SentencePiece) vocabularies against llama.cpp's ids in `tokenizer/reference.json`
//! (made by `tokenizer/gen_reference.py`). The real-vocabulary tests skip when the GGUF files are absent, unless `CI`
//! is set.

use std::sync::OnceLock;
use std::time::Instant;

use tinygrad::llm::tokenizer::{token_type as tt, StreamDecoder, Tokenizer, TokenizerSpec};

// ---- tiny vocabularies ----

/// A vocabulary of `(text, type, score)`.
fn spec(model: &str, pre: &str, toks: &[(&str, i32, f32)], merges: &[&str]) -> TokenizerSpec {
    TokenizerSpec {
        model: model.into(),
        pre: pre.into(),
        tokens: toks.iter().map(|t| t.0.to_string()).collect(),
        token_types: toks.iter().map(|t| t.1).collect(),
        scores: toks.iter().map(|t| t.2).collect(),
        merges: merges.iter().map(|m| m.to_string()).collect(),
        add_space_prefix: Some(false),
        ..Default::default()
    }
}

/// BPE tokens a=0 b=1 c=2 ab=3 bc=4 abc=5 Ġ=6 Ġab=7 <|x|>=8 (control) xy=9 (control) yzw=10 (control) x=11.
fn bpe(merges: &[&str]) -> Tokenizer {
    let n = tt::NORMAL;
    let toks = [("a", n), ("b", n), ("c", n), ("ab", n), ("bc", n), ("abc", n), ("Ġ", n), ("Ġab", n)];
    let specials = [("<|x|>", tt::CONTROL), ("xy", tt::CONTROL), ("yzw", tt::USER_DEFINED), ("x", n)];
    let all: Vec<_> = toks.iter().chain(&specials).map(|&(t, ty)| (t, ty, 0.0)).collect();
    Tokenizer::new(spec("gpt2", "gpt2", &all, merges)).unwrap()
}

#[track_caller]
fn check(tok: &Tokenizer, text: &str, ids: &[u32]) {
    assert_eq!(tok.encode(text), ids, "encode({text:?})");
}

#[test]
fn bpe_merges_by_rank() {
    // b+c ranks first: a, bc, and no "a bc" merge
    check(&bpe(&["b c", "a b"]), "abc", &[0, 4]);
    // a+b ranks first: ab, c; then "ab c" makes abc
    check(&bpe(&["a b", "b c", "ab c"]), "abc", &[5]);
    check(&bpe(&["a b", "b c"]), "abc", &[3, 2]);
    // equal pairs: the leftmost merges first
    check(&bpe(&["a b"]), "ababa", &[3, 3, 0]);
    // a space is GPT-2's Ġ; " ab" is one pre-token
    check(&bpe(&["a b", "Ġ a"]), " ab", &[6, 3]);
    // "Ġa" is no token, but merging it with b makes the token Ġab
    check(&bpe(&["Ġ a", "a b", "Ġa b"]), " ab", &[7]);
    check(&bpe(&["a b", "Ġ ab"]), " ab", &[7]);
}

#[test]
fn bpe_decode_undoes_byte_map() {
    let tok = bpe(&[]);
    assert_eq!(tok.decode_token(7), b" ab");
    assert_eq!(tok.decode_token(8), b"<|x|>");
    assert_eq!(tok.decode(&[7, 8, 2]), " ab<|x|>c");
}

#[test]
fn special_tokens_split_longest_first() {
    let tok = bpe(&["a b"]);
    check(&tok, "ab<|x|>ab", &[3, 8, 3]);
    check(&tok, "<|x|><|x|>", &[8, 8]);
    // llama.cpp cuts the longest special everywhere first: "yzw" (3 bytes) wins over the earlier "xy" (2 bytes)
    check(&tok, "xyzw", &[11, 10]);
    check(&tok, "xyxy", &[9, 9]);
}

#[track_caller]
fn check_pre(preset: &str, text: &str, pieces: &[&str]) {
    let tok = Tokenizer::new(TokenizerSpec { add_bos: Some(false), ..spec("gpt2", preset, &[("a", tt::NORMAL, 0.0)], &[]) }).unwrap();
    assert_eq!(tok.pre_tokenize(text), pieces, "{preset}: pre_tokenize({text:?})");
}

#[test]
fn pre_tokenizer_presets() {
    let s = "Hello's 12345 world!!\n\n  x";
    check_pre("gpt2", s, &["Hello", "'s", " 12345", " world", "!!", "\n\n ", " x"]);
    check_pre("smollm", s, &["Hello", "'s", " ", "1", "2", "3", "4", "5", " world", "!!", "\n\n ", " x"]);
    check_pre("llama-bpe", s, &["Hello", "'s", " ", "123", "45", " world", "!!\n\n", " ", " x"]);
    check_pre("qwen2", s, &["Hello", "'s", " ", "1", "2", "3", "4", "5", " world", "!!\n\n", " ", " x"]);
    // case: gpt2's contractions are lowercase only, llama3's either case
    check_pre("gpt2", "DON'T", &["DON", "'", "T"]);
    check_pre("llama3", "DON'T", &["DON", "'T"]);
    check_pre("gpt2", "it'S", &["it", "'", "S"]);
    check_pre("llama3", "it'S", &["it", "'S"]);
    // a whitespace run before a word leaves its last space to the word; a newline before a word stands alone
    check_pre("gpt2", "a   b\nc", &["a", "  ", " b", "\n", "c"]);
    check_pre("llama3", "a   b\nc", &["a", "  ", " b", "\n", "c"]);
    check_pre("llama3", "x  \n\n  y", &["x", "  \n\n", " ", " y"]);
    // the other presets' regexes compile and split case changes and digits as llama.cpp's do
    check_pre("tekken", "HelloWorld 123", &["Hello", "World", " ", "1", "2", "3"]);
    check_pre("gpt-4o", "HelloWorld's 12345", &["Hello", "World's", " ", "123", "45"]);
    check_pre("qwen35", "it's 12", &["it", "'s", " ", "1", "2"]);
    check_pre("default", "a, b 12345", &["a", ",", " b", " ", "123", "45"]);
    check_pre("no-such-preset", "a, b 12345", &["a", ",", " b", " ", "123", "45"]);
}

/// SentencePiece tokens: <unk>=0 <s>=1 </s>=2, <0x00>..<0xFF> = 3..259, then ▁=259 h i ▁h hi ▁hi a b c ab bc.
fn spm(add_space_prefix: bool) -> Tokenizer {
    let bytes: Vec<String> = (0..256).map(|b| format!("<0x{b:02X}>")).collect();
    let mut toks = vec![("<unk>", tt::UNKNOWN, 0.0), ("<s>", tt::CONTROL, 0.0), ("</s>", tt::CONTROL, 0.0)];
    toks.extend(bytes.iter().map(|b| (b.as_str(), tt::BYTE, 0.0)));
    let normal = [("▁", -1.0), ("h", -2.0), ("i", -2.0), ("▁h", -3.0), ("hi", -1.5), ("▁hi", -1.0)];
    let abc = [("a", -2.0), ("b", -2.0), ("c", -2.0), ("ab", -1.0), ("bc", -0.5)];
    toks.extend(normal.iter().chain(&abc).map(|&(t, s)| (t, tt::NORMAL, s)));
    let mut s = spec("llama", "default", &toks, &[]);
    s.add_space_prefix = Some(add_space_prefix);
    s.bos = Some(1);
    Tokenizer::new(s).unwrap()
}
const SPACE: u32 = 259;
const HI: u32 = 263;
const SHI: u32 = 264;

#[test]
fn spm_merges_by_score_with_byte_fallback() {
    let tok = spm(false);
    // bc (-0.5) beats ab (-1.0)
    check(&tok, "abc", &[265, 269]);
    // h+i -> hi; ▁ alone; é has no token: its UTF-8 bytes C3 A9 as byte tokens (3 + byte)
    check(&tok, "hi é", &[HI, SPACE, 3 + 0xC3, 3 + 0xA9]);
    // ▁+h (-3) and h+i (-1.5): hi first, then ▁+hi makes ▁hi
    check(&tok, " hi", &[SHI]);
    assert_eq!(tok.decode(&[SHI, 3 + 0xC3, 3 + 0xA9, 1]), " hié<s>");
    assert_eq!(tok.encode_with_bos("hi"), [1, HI]);
}

#[test]
fn spm_space_prefix_after_specials() {
    // add_space_prefix: a space before the text and after each special token, as llama.cpp's is_prev_special
    check(&spm(true), "hi<s>hi", &[SHI, 1, SHI]);
    check(&spm(false), "hi<s>hi", &[HI, 1, HI]);
}

#[test]
fn stream_decoder_holds_back_split_characters() {
    let tok = spm(false);
    let mut dec = StreamDecoder::new();
    assert_eq!(dec.push(&tok, HI), "hi");
    assert_eq!(dec.push(&tok, 3 + 0xC3), "", "the first byte of é is held back");
    assert_eq!(dec.push(&tok, 3 + 0xA9), "é");
    assert_eq!(dec.push_bytes(&[0xF0, 0x9F]), "");
    assert_eq!(dec.push_bytes(&[0x99, 0x82, b'!']), "🙂!");
    assert_eq!(dec.push_bytes(&[0xFF, b'a']), "\u{FFFD}a", "an invalid byte is replaced at once");
    assert_eq!(dec.push_bytes(&[0xE4, 0xB8]), "");
    assert_eq!(dec.finish(), "\u{FFFD}", "an unfinished character at the end is replaced");
    assert_eq!(dec.finish(), "");
}

#[test]
fn bad_specs_are_errors() {
    let toks = [("a", tt::NORMAL, 0.0), ("b", tt::NORMAL, 0.0)];
    assert!(Tokenizer::new(spec("bert", "", &toks, &[])).is_err());
    assert!(Tokenizer::new(spec("gpt2", "gpt2", &toks, &["ab"])).is_err());
    let mut s = spec("gpt2", "gpt2", &toks, &[]);
    s.token_types.pop();
    assert!(Tokenizer::new(s).is_err());
    let mut s = spec("llama", "", &toks, &[]);
    s.bos = Some(7);
    assert!(Tokenizer::new(s).is_err());
    // llama wants a BOS by default
    assert!(Tokenizer::new(spec("llama", "", &toks, &[])).is_err());
}

// ---- the real vocabularies ----

const SMOLLM: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";

/// The tokenizer of a model in `llm::models_dir()` (`$TINYGRAD_MODELS_DIR`), built once; None (test skipped) when the file is absent
/// and `CI` is not set.
fn real(name: &'static str) -> Option<&'static Tokenizer> {
    static CELLS: [OnceLock<Option<Tokenizer>>; 2] = [OnceLock::new(), OnceLock::new()];
    let cell = &CELLS[usize::from(name == GEMMA)];
    cell.get_or_init(|| {
        let path = tinygrad::llm::models_dir().join(name);
        if !path.exists() {
            assert!(std::env::var_os("CI").is_none(), "{} is missing (CI is set)", path.display());
            eprintln!("skipping: {} is missing", path.display());
            return None;
        }
        let file = tinygrad::nn::gguf::GgufFile::open(&path).unwrap();
        let t = Instant::now();
        let tok = tinygrad::llm::tokenizer_from_gguf(&file).unwrap();
        eprintln!("{name}: {} tokens, Tokenizer::new took {:?}", tok.vocab_size(), t.elapsed());
        Some(tok)
    })
    .as_ref()
}

/// Strings for round trips (the same as `gen_reference.py`'s, which also has each model's special tokens).
const VARIED: &[&str] = &[
    "The capital of France is",
    "Hello, world!",
    "  leading spaces and trailing   ",
    "line one\nline two\n\n\nthree newlines\r\nwindows",
    "tabs\there\t\tand\t\t\tmore",
    "digits 12345 and 3.14159 and 1,000,000",
    "don't won't I'll we've you're she'd it's DON'T",
    "héllo wörld naïve café",
    "héllo 世界 🙂",
    "日本語のテキストと한국어",
    "punctuation!!! ?? ... --- (parens) [brackets] {braces} <angle>",
    "def f(x):\n    return x**2  # code",
    "emoji 👍🏽 family 👨\u{200d}👩\u{200d}👧 flag 🇫🇷",
    "mixed CASE and camelCase and snake_case_words",
    "a",
    " ",
    "\n",
    "",
];

/// llama.cpp's (text, ids) pairs for a model.
fn reference(name: &str) -> Vec<(String, Vec<u32>)> {
    let json: serde_json::Value = serde_json::from_str(include_str!("tokenizer/reference.json")).unwrap();
    let cases = json[name].as_array().unwrap_or_else(|| panic!("no reference for {name}"));
    cases.iter().map(|c| (c["text"].as_str().unwrap().to_string(), serde_json::from_value(c["ids"].clone()).unwrap())).collect()
}

#[test]
fn smollm_ground_truth() {
    let Some(tok) = real(SMOLLM) else { return };
    check(tok, "The capital of France is", &[504, 3575, 282, 4649, 314]);
    assert_eq!(tok.encode_with_bos("The"), [504], "SmolLM2 does not add a BOS");
    assert!(tok.is_end(tok.token_id("<|im_end|>").unwrap()));
}

#[test]
fn gemma_ground_truth() {
    let Some(tok) = real(GEMMA) else { return };
    assert_eq!(tok.vocab_size(), 262144);
    assert_eq!(tok.encode_with_bos("")[..], [2], "Gemma adds <bos>");
    assert!(tok.is_end(tok.token_id("<end_of_turn>").unwrap()));
}

#[track_caller]
fn check_reference(name: &'static str) {
    let Some(tok) = real(name) else { return };
    let mut bad = vec![];
    for (text, ids) in reference(name) {
        let got = tok.encode(&text);
        if got != ids {
            bad.push(format!("{text:?}:\n  llama.cpp {ids:?}\n  ours      {got:?}"));
        }
    }
    assert!(bad.is_empty(), "{name}: {} strings differ from llama.cpp:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn smollm_matches_llama_cpp() {
    check_reference(SMOLLM);
}

#[test]
fn gemma_matches_llama_cpp() {
    check_reference(GEMMA);
}

#[track_caller]
fn check_round_trip(name: &'static str) {
    let Some(tok) = real(name) else { return };
    let texts = VARIED.iter().map(|t| t.to_string()).chain(reference(name).into_iter().map(|(t, _)| t));
    for text in texts {
        let ids = tok.encode(&text);
        assert_eq!(tok.decode(&ids), text, "{name}: decode(encode({text:?}))");
        let mut dec = StreamDecoder::new();
        let streamed: String = ids.iter().map(|&id| dec.push(tok, id)).collect::<String>() + &dec.finish();
        assert_eq!(streamed, text, "{name}: streamed decode of {text:?}");
    }
}

#[test]
fn smollm_round_trip() {
    check_round_trip(SMOLLM);
}

#[test]
fn gemma_round_trip() {
    check_round_trip(GEMMA);
}

#[test]
fn long_prompt_is_fast() {
    for name in [SMOLLM, GEMMA] {
        let Some(tok) = real(name) else { return };
        let text = VARIED.join(" ").repeat(40);
        let t = Instant::now();
        let ids = tok.encode(&text);
        let took = t.elapsed();
        eprintln!("{name}: {} bytes -> {} tokens in {took:?}", text.len(), ids.len());
        assert_eq!(tok.decode(&ids), text);
        assert!(took.as_secs_f64() < 2.0, "encoding took {took:?}");
    }
}
