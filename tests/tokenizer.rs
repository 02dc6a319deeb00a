//! `llm::tokenizer`: tiny hand-made vocabularies whose ids are derived by hand, then the real SmolLM2 (byte-level BPE,
//! preset `smollm`) and Gemma 3 (SentencePiece) vocabularies against llama.cpp's ids in `tokenizer/reference.json`
//! (made by `tokenizer/gen_reference.py`). The real-vocabulary tests skip when the GGUF files are absent, unless `CI`
//! is set.

use std::path::PathBuf;
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

/// TEMPORARY, test only: reads a GGUF file's metadata (version 2/3 header and key/values, stopping before the tensor
/// infos) into a TokenizerSpec. Switch to `nn::gguf` once it is merged.
mod gguf_meta {
    use std::collections::HashMap;
    use std::io::{BufReader, Read};

    #[derive(Debug)]
    pub enum Val {
        Int(i64),
        F32(f32),
        Bool(bool),
        Str(String),
        Arr(Vec<Val>),
        Other,
    }

    struct R(BufReader<std::fs::File>);
    impl R {
        fn bytes<const N: usize>(&mut self) -> [u8; N] {
            let mut b = [0; N];
            self.0.read_exact(&mut b).unwrap();
            b
        }
        fn u32(&mut self) -> u32 {
            u32::from_le_bytes(self.bytes())
        }
        fn u64(&mut self) -> u64 {
            u64::from_le_bytes(self.bytes())
        }
        fn str(&mut self) -> String {
            let mut b = vec![0; self.u64() as usize];
            self.0.read_exact(&mut b).unwrap();
            String::from_utf8_lossy(&b).into_owned()
        }
        fn val(&mut self, ty: u32) -> Val {
            match ty {
                0 => Val::Int(self.bytes::<1>()[0] as i64),
                1 => Val::Int(self.bytes::<1>()[0] as i8 as i64),
                2 => Val::Int(u16::from_le_bytes(self.bytes()) as i64),
                3 => Val::Int(i16::from_le_bytes(self.bytes()) as i64),
                4 => Val::Int(self.u32() as i64),
                5 => Val::Int(self.u32() as i32 as i64),
                6 => Val::F32(f32::from_le_bytes(self.bytes())),
                7 => Val::Bool(self.bytes::<1>()[0] != 0),
                8 => Val::Str(self.str()),
                9 => {
                    let (ty, n) = (self.u32(), self.u64());
                    Val::Arr((0..n).map(|_| self.val(ty)).collect())
                }
                10 | 11 => Val::Int(self.u64() as i64),
                12 => {
                    self.u64();
                    Val::Other
                }
                t => panic!("GGUF value type {t}"),
            }
        }
    }

    pub fn read(path: &std::path::Path) -> HashMap<String, Val> {
        let mut r = R(BufReader::new(std::fs::File::open(path).unwrap()));
        assert_eq!(&r.bytes::<4>(), b"GGUF");
        assert!(matches!(r.u32(), 2 | 3), "GGUF version");
        let (_n_tensors, n_kv) = (r.u64(), r.u64());
        (0..n_kv)
            .map(|_| {
                let key = r.str();
                let ty = r.u32();
                (key, r.val(ty))
            })
            .collect()
    }

    pub fn spec(path: &std::path::Path) -> super::TokenizerSpec {
        let kv = read(path);
        let get = |k: &str| kv.get(&format!("tokenizer.ggml.{k}"));
        let arr = |k: &str| match get(k) {
            Some(Val::Arr(a)) => a.as_slice(),
            _ => &[],
        };
        let s = |v: &Val| match v {
            Val::Str(s) => s.clone(),
            v => panic!("{v:?}"),
        };
        let int = |v: &Val| match v {
            Val::Int(i) => *i,
            v => panic!("{v:?}"),
        };
        let bool_ = |k: &str| match get(k) {
            Some(Val::Bool(b)) => Some(*b),
            _ => None,
        };
        super::TokenizerSpec {
            model: get("model").map(s).unwrap_or_default(),
            pre: get("pre").map(s).unwrap_or_default(),
            tokens: arr("tokens").iter().map(s).collect(),
            token_types: arr("token_type").iter().map(|v| int(v) as i32).collect(),
            merges: arr("merges").iter().map(s).collect(),
            scores: arr("scores").iter().map(|v| if let Val::F32(f) = v { *f } else { panic!("{v:?}") }).collect(),
            bos: get("bos_token_id").map(|v| int(v) as u32),
            eos: get("eos_token_id").map(|v| int(v) as u32),
            add_bos: bool_("add_bos_token"),
            add_space_prefix: bool_("add_space_prefix"),
        }
    }
}

const SMOLLM: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";

/// The tokenizer of a model in ~/.cache/tinygrad/models, built once; None (test skipped) when the file is absent
/// and `CI` is not set.
fn real(name: &'static str) -> Option<&'static Tokenizer> {
    static CELLS: [OnceLock<Option<Tokenizer>>; 2] = [OnceLock::new(), OnceLock::new()];
    let cell = &CELLS[usize::from(name == GEMMA)];
    cell.get_or_init(|| {
        let path = PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/tinygrad/models").join(name);
        if !path.exists() {
            assert!(std::env::var_os("CI").is_none(), "{} is missing (CI is set)", path.display());
            eprintln!("skipping: {} is missing", path.display());
            return None;
        }
        let spec = gguf_meta::spec(&path);
        let t = Instant::now();
        let tok = Tokenizer::new(spec).unwrap();
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
