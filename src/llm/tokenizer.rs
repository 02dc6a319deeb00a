//! Tokenizers (tinygrad `llm/cli.py` `SimpleTokenizer`, extended to llama.cpp's `llama-vocab.cpp`). In: a GGUF
//! file's `tokenizer.ggml.*` metadata as plain data ([`TokenizerSpec`]) and text. Out: token ids, and bytes or text
//! back from them.
//!
//! Two models, as llama.cpp names them in `tokenizer.ggml.model`:
//! - `gpt2`: byte-level BPE. The text is pre-tokenized with the regexes llama.cpp uses for the `tokenizer.ggml.pre`
//!   preset (`llm_tokenizer_bpe`), each piece's bytes are mapped to GPT-2's printable characters, and adjacent
//!   symbols are merged lowest merge rank first (`llm_tokenizer_bpe_session`).
//! - `llama`: SentencePiece (Gemma 3, Llama 2). Spaces become `▁`, the text is split into characters, and the
//!   adjacent pair whose concatenation is a token with the highest score is merged first; characters without a
//!   token fall back to `<0xAB>` byte tokens (`llm_tokenizer_spm_session`).
//!
//! In both, special tokens (types CONTROL, USER_DEFINED, UNKNOWN) in the text are cut out first and become single
//! tokens, longest first, as llama.cpp's `tokenizer_st_partition` does with `parse_special = true`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::LazyLock;

use fancy_regex::Regex;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};

/// The values of `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`); any other value reads as NORMAL.
pub mod token_type {
    /// Ordinary text.
    pub const NORMAL: i32 = 1;
    /// The unknown token; special.
    pub const UNKNOWN: i32 = 2;
    /// A control token (`<|im_start|>`, `<start_of_turn>`); special.
    pub const CONTROL: i32 = 3;
    /// A token the model's authors added (Gemma's runs of spaces and newlines, HTML tags); special.
    pub const USER_DEFINED: i32 = 4;
    /// A reserved token; decodes to nothing.
    pub const UNUSED: i32 = 5;
    /// A SentencePiece byte-fallback token, `<0xAB>`.
    pub const BYTE: i32 = 6;
}

/// A tokenizer's vocabulary and settings: the `tokenizer.ggml.*` keys of a GGUF file, read by the caller.
#[derive(Clone, Debug, Default)]
pub struct TokenizerSpec {
    /// `tokenizer.ggml.model`: `"gpt2"` (byte-level BPE) or `"llama"` (SentencePiece).
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer preset of a `gpt2` model (`"smollm"`, `"llama-bpe"`, `"qwen2"`, ...);
    /// ignored for `llama`.
    pub pre: String,
    /// `tokenizer.ggml.tokens`: each token's text (BPE: in GPT-2's byte-to-character mapping; SentencePiece: with `▁`
    /// for spaces).
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type` (see [`token_type`]); empty means all NORMAL.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: `"left right"` pairs, rank = index (BPE only).
    pub merges: Vec<String>,
    /// `tokenizer.ggml.scores` (SentencePiece: higher merges first); empty means all 0.
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`; `None` takes llama.cpp's default (true for `llama`, false for most `gpt2`
    /// presets, true for the llama3 ones).
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix` (SentencePiece: a space before the text and after each special token);
    /// `None` takes llama.cpp's default (true for `llama`).
    pub add_space_prefix: Option<bool>,
}

/// A token's text and type, shared by both models.
struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    scores: Vec<f32>,
    /// text -> id (the first id when a text repeats)
    ids: FxHashMap<String, u32>,
}

/// Byte-level BPE state (llama.cpp `llm_tokenizer_bpe` and the `bpe_ranks` of `llama_vocab`).
struct Bpe {
    regexes: Vec<Regex>,
    /// the preset's `ignore_merges`: a piece that is a whole token is taken as is
    ignore_merges: bool,
    /// (left piece, right piece) -> (rank, merged piece); a piece is a token id, or past the vocabulary a merge
    /// part that is not a token
    ranks: FxHashMap<(u32, u32), (u32, u32)>,
    /// the piece of each byte's GPT-2 character, `u32::MAX` where the vocabulary lacks it
    byte_piece: [u32; 256],
}

enum Model {
    Bpe(Box<Bpe>),
    Spm { add_space_prefix: bool },
}

/// A tokenizer built from a [`TokenizerSpec`]: [`encode`](Self::encode) text to ids, [`decode`](Self::decode) ids to
/// text, [`StreamDecoder`] for generation.
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    /// special token text -> id, the distinct byte lengths of those texts (longest first) and their first bytes
    special_ids: FxHashMap<String, u32>,
    special_lens: Vec<usize>,
    special_first: [bool; 256],
    /// SentencePiece byte fallback: the token of each byte (`<0xAB>`, else the byte itself)
    byte_tokens: [Option<u32>; 256],
    unk: Option<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    /// end-of-generation tokens: EOS and tokens named like llama.cpp's `special_eog_ids`
    eog: FxHashSet<u32>,
}

/// The regexes of llama.cpp's BPE pre-tokenizer presets (`llm_tokenizer_bpe`'s constructor); each splits the
/// pieces the previous one left, and text a regex does not match stays a piece of its own.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// (`tokenizer.ggml.pre` names, regexes, ignore_merges, add_bos by default), from llama.cpp `llama_vocab::impl::load`.
#[rustfmt::skip]
const PRESETS: &[(&[&str], &[&str], bool, bool)] = &[
    (&["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"], &[LLAMA3], true, true),
    (&["dbrx", "smaug-bpe", "glm4", "chatglm-bpe"], &[LLAMA3], false, false),
    (&["qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"], &[QWEN2], false, false),
    (&["qwen35"], &[QWEN35], false, false),
    (&["smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"], &[r"\p{N}", GPT2], false, false),
    (&["gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "mellum"], &[GPT2], false, false),
    (&["tekken"], &[TEKKEN], true, true),
    (&["gpt-4o", "llama4"], &[GPT4O], false, false),
    (&["default", ""], &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"], false, false),
];

/// Token texts llama.cpp treats as end of generation besides EOS (a subset of its `special_eog_ids` list).
const EOG_TEXTS: &[&str] =
    &["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", "<eos>"];

/// GPT-2's byte-to-character map (openai `bytes_to_unicode`, llama.cpp `unicode_byte_to_utf8_map`): printable
/// bytes map to themselves, the other 68 to U+0100 on, in byte order.
static BYTE_CHARS: LazyLock<[char; 256]> = LazyLock::new(|| {
    let mut out = ['\0'; 256];
    let mut next = 256u32;
    for (b, c) in out.iter_mut().enumerate() {
        let printable = matches!(b, 0x21..=0x7e | 0xa1..=0xac | 0xae..=0xff);
        *c = char::from_u32(if printable { b as u32 } else { next }).unwrap();
        next += u32::from(!printable);
    }
    out
});

/// The inverse of [`BYTE_CHARS`], indexed by code point (all are below U+0144).
static CHAR_BYTES: LazyLock<[Option<u8>; 0x144]> = LazyLock::new(|| {
    let mut out = [None; 0x144];
    BYTE_CHARS.iter().enumerate().for_each(|(b, &c)| out[c as usize] = Some(b as u8));
    out
});

/// A `<0xAB>` byte token's byte.
fn parse_byte_token(text: &str) -> Option<u8> {
    text.strip_prefix("<0x").and_then(|t| t.strip_suffix('>')).filter(|h| h.len() == 2).and_then(|h| u8::from_str_radix(h, 16).ok())
}

/// An `f32` score as a key whose integer order is the float order (total order; NaN sorts outermost).
fn score_key(f: f32) -> u32 {
    let b = f.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// A candidate BPE merge: (rank, left symbol, right symbol, left piece, right piece). It is stale once either side
/// has changed since it was queued.
type BpePair = (u32, usize, usize, u32, u32);

/// A symbol of a word being merged: its byte range, its piece (BPE) and its neighbours in the linked list.
#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    end: usize,
    piece: u32,
    prev: usize,
    next: usize,
}
const NONE: usize = usize::MAX;

/// Symbols for the byte ranges `bounds` (consecutive), linked in order.
fn link(bounds: impl Iterator<Item = (usize, usize, u32)>) -> Vec<Sym> {
    let mut syms: Vec<Sym> =
        bounds.enumerate().map(|(i, (start, end, piece))| Sym { start, end, piece, prev: i.wrapping_sub(1), next: i + 1 }).collect();
    if let Some(last) = syms.last_mut() {
        last.next = NONE;
    }
    syms
}

/// The live symbols of a merged list, in order.
fn live(syms: &[Sym]) -> impl Iterator<Item = &Sym> {
    let mut i = if syms.is_empty() { NONE } else { 0 };
    std::iter::from_fn(move || {
        let s = syms.get(i)?;
        i = s.next;
        Some(s)
    })
}

/// Splits `pieces` with one regex, keeping what it does not match as pieces too (llama.cpp `unicode_regex_split`).
fn split_pieces<'t>(re: &Regex, pieces: Vec<&'t str>) -> Vec<&'t str> {
    let mut out = Vec::with_capacity(pieces.len() * 2);
    for p in pieces {
        let mut last = 0;
        for m in re.find_iter(p) {
            // a regex that gives up (fancy-regex's backtrack limit) leaves the rest of the piece whole
            let Ok(m) = m else { break };
            if m.start() > last {
                out.push(&p[last..m.start()]);
            }
            if m.end() > m.start() {
                out.push(m.as_str());
            }
            last = m.end();
        }
        if last < p.len() {
            out.push(&p[last..]);
        }
    }
    out
}

impl Tokenizer {
    /// Builds the tokenizer: hash maps of token texts, merge ranks and special tokens, built once (Gemma 3's
    /// 262144 tokens take well under a second in release). Follows llama.cpp `llama_vocab::impl::load`.
    ///
    /// Errors ([`Error::Tokenizer`]): a model other than `gpt2`/`llama`, `token_types` or `scores` shorter than
    /// `tokens` (when not empty), a merge without a space, a `bos`/`eos` out of range, `add_bos` without `bos`.
    /// An unknown `gpt2` preset is not an error: it takes llama.cpp's `default` regexes, with a warning on stderr.
    pub fn new(spec: TokenizerSpec) -> Result<Tokenizer> {
        let TokenizerSpec { model, pre, tokens, mut token_types, merges, mut scores, bos, eos, add_bos, add_space_prefix } = spec;
        let n = tokens.len();
        let bad = |msg: String| Err(Error::Tokenizer(msg));
        for (name, len) in [("token_type", token_types.len()), ("scores", scores.len())] {
            if len != 0 && len < n {
                return bad(format!("tokenizer.ggml.{name} has {len} entries for {n} tokens"));
            }
        }
        token_types.resize(n.max(token_types.len()), token_type::NORMAL);
        scores.resize(n.max(scores.len()), 0.0);
        for (name, id) in [("bos", bos), ("eos", eos)] {
            if id.is_some_and(|id| id as usize >= n) {
                return bad(format!("{name} token id {} is out of range for {n} tokens", id.unwrap()));
            }
        }
        let mut ids = FxHashMap::with_capacity_and_hasher(n, Default::default());
        for (i, t) in tokens.iter().enumerate() {
            ids.entry(t.clone()).or_insert(i as u32);
        }
        let vocab = Vocab { tokens, types: token_types, scores, ids };

        let (model, default_add_bos) = match model.as_str() {
            "gpt2" => {
                let (regexes, ignore_merges, add_bos) = match PRESETS.iter().find(|p| p.0.contains(&pre.as_str())) {
                    Some(&(_, res, im, ab)) => (res, im, ab),
                    None => {
                        eprintln!("tokenizer: unknown pre-tokenizer preset {pre:?}; using llama.cpp's default regexes");
                        (PRESETS.last().unwrap().1, false, false)
                    }
                };
                let regexes = regexes.iter().map(|r| Regex::new(r).expect("preset regex")).collect();
                (Model::Bpe(Box::new(Bpe::new(&vocab, &merges, regexes, ignore_merges)?)), add_bos)
            }
            "llama" => (Model::Spm { add_space_prefix: add_space_prefix.unwrap_or(true) }, true),
            m => return bad(format!("tokenizer.ggml.model {m:?} is not supported (only \"gpt2\" and \"llama\")")),
        };
        let add_bos = add_bos.unwrap_or(default_add_bos);
        if add_bos && bos.is_none() {
            return bad("add_bos_token is true but there is no bos_token_id".into());
        }

        let is_special = |t: i32| matches!(t, token_type::UNKNOWN | token_type::CONTROL | token_type::USER_DEFINED);
        let mut special_ids = FxHashMap::default();
        let mut special_first = [false; 256];
        for (i, t) in vocab.tokens.iter().enumerate() {
            if is_special(vocab.types[i]) && !t.is_empty() {
                special_ids.entry(t.clone()).or_insert(i as u32);
                special_first[t.as_bytes()[0] as usize] = true;
            }
        }
        let mut special_lens: Vec<usize> = special_ids.keys().map(String::len).collect::<FxHashSet<_>>().into_iter().collect();
        special_lens.sort_unstable_by(|a, b| b.cmp(a));

        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            let single = (b < 0x80).then(|| (b as u8 as char).to_string());
            *slot = vocab.ids.get(&format!("<0x{b:02X}>")).or_else(|| single.and_then(|s| vocab.ids.get(&s))).copied();
        }
        let unk = vocab.types.iter().position(|&t| t == token_type::UNKNOWN).map(|i| i as u32);
        let mut eog: FxHashSet<u32> = EOG_TEXTS.iter().filter_map(|t| vocab.ids.get(*t).copied()).collect();
        eog.extend(eos);
        Ok(Tokenizer { vocab, model, special_ids, special_lens, special_first, byte_tokens, unk, bos, eos, add_bos, eog })
    }

    /// The number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab.tokens.len()
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether the model wants [`bos`](Self::bos) before a prompt (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `id` ends generation: EOS, or a token llama.cpp counts as end of generation by its text
    /// (`<|im_end|>`, `<end_of_turn>`, `<|eot_id|>`, ...). tinygrad `SimpleTokenizer.is_end`.
    pub fn is_end(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// A token's id by its exact text (`"<|im_start|>"`, `"<start_of_turn>"`).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.ids.get(text).copied()
    }

    /// Token ids of `text`, without BOS (see [`encode_with_bos`](Self::encode_with_bos)). Special tokens written in
    /// the text become single tokens. llama.cpp `llama_vocab::impl::tokenize(text, add_special = false,
    /// parse_special = true)`; tinygrad `SimpleTokenizer.encode`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let mut prev_special = true;
        for frag in self.partition(text) {
            match frag {
                Frag::Token(id) => out.push(id),
                Frag::Text(s) => match &self.model {
                    Model::Bpe(bpe) => self.encode_bpe(bpe, s, &mut out),
                    Model::Spm { add_space_prefix } => self.encode_spm(s, *add_space_prefix && prev_special, &mut out),
                },
            }
            prev_special = matches!(frag, Frag::Token(_));
        }
        out
    }

    /// [`encode`](Self::encode) with [`bos`](Self::bos) in front when the model asks for it ([`add_bos`](Self::add_bos)),
    /// as llama.cpp's `tokenize` with `add_special = true` (EOS is never appended: no supported model asks for it).
    pub fn encode_with_bos(&self, text: &str) -> Vec<u32> {
        let mut out: Vec<u32> = self.bos.filter(|_| self.add_bos).into_iter().collect();
        out.extend(self.encode(text));
        out
    }

    /// A prompt's ids: [`encode_with_bos`](Self::encode_with_bos), but without a second BOS when `text` already
    /// begins with the BOS text (a rendered chat template may write it, as Gemma's does).
    pub fn encode_prompt(&self, text: &str) -> Vec<u32> {
        let bos = self.bos.map(|b| self.decode_token(b)).filter(|b| !b.is_empty());
        if bos.is_some_and(|b| text.as_bytes().starts_with(&b)) {
            self.encode(text)
        } else {
            self.encode_with_bos(text)
        }
    }

    /// The raw bytes of one token (llama.cpp `token_to_piece` with `special = true`): BPE text with GPT-2's byte map
    /// undone; SentencePiece text with `▁` as a space, a `<0xAB>` byte token as its byte; special tokens as their
    /// text; UNUSED tokens and ids out of range as nothing. A character outside GPT-2's map is kept as its UTF-8 (llama.cpp
    /// writes `[UNK_BYTE_...]`).
    pub fn decode_token(&self, id: u32) -> Vec<u8> {
        let Some(text) = self.vocab.tokens.get(id as usize) else { return vec![] };
        match (self.vocab.types[id as usize], parse_byte_token(text)) {
            (token_type::UNKNOWN | token_type::CONTROL | token_type::USER_DEFINED, _) => text.as_bytes().to_vec(),
            (token_type::UNUSED, _) => vec![],
            (token_type::BYTE, Some(b)) => vec![b],
            _ => match self.model {
                Model::Spm { .. } => text.replace('\u{2581}', " ").into_bytes(),
                Model::Bpe(_) => {
                    let mut out = Vec::with_capacity(text.len());
                    for c in text.chars() {
                        match CHAR_BYTES.get(c as usize).copied().flatten() {
                            Some(b) => out.push(b),
                            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                        }
                    }
                    out
                }
            },
        }
    }

    /// The text of `ids`, invalid UTF-8 replaced by U+FFFD (tinygrad `SimpleTokenizer.decode`). No space is
    /// stripped: with `add_space_prefix` the leading space [`encode`](Self::encode) added comes back.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.decode_token(id)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The pieces byte-level BPE merges within: `text` split by the preset's regexes in turn (llama.cpp
    /// `unicode_regex_split`); special tokens are not cut out here. SentencePiece has no pre-tokenizer: the whole text.
    pub fn pre_tokenize<'t>(&self, text: &'t str) -> Vec<&'t str> {
        match &self.model {
            Model::Bpe(bpe) => bpe.regexes.iter().fold(vec![text], |pieces, re| split_pieces(re, pieces)),
            Model::Spm { .. } => vec![text],
        }
    }

    /// Cuts `text` at special tokens, longest token text first, each occurrence left to right (llama.cpp
    /// `tokenizer_st_partition`). Only specials that occur in the text are tried, found by hashing each position's
    /// substrings of the specials' lengths.
    fn partition<'t>(&self, text: &'t str) -> Vec<Frag<'t>> {
        let mut found: Vec<u32> = Vec::new();
        if !self.special_ids.is_empty() {
            let mut seen = FxHashSet::default();
            for (i, b) in text.bytes().enumerate() {
                if !self.special_first[b as usize] {
                    continue;
                }
                for &l in &self.special_lens {
                    if let Some(&id) = text.get(i..i + l).and_then(|s| self.special_ids.get(s)) {
                        if seen.insert(id) {
                            found.push(id);
                        }
                    }
                }
            }
        }
        found.sort_by_key(|&id| (Reverse(self.vocab.tokens[id as usize].len()), id));
        let mut frags = if text.is_empty() { vec![] } else { vec![Frag::Text(text)] };
        for id in found {
            let special = self.vocab.tokens[id as usize].as_str();
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Frag::Text(mut s) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(k) = s.find(special) {
                    if k > 0 {
                        next.push(Frag::Text(&s[..k]));
                    }
                    next.push(Frag::Token(id));
                    s = &s[k + special.len()..];
                }
                if !s.is_empty() {
                    next.push(Frag::Text(s));
                }
            }
            frags = next;
        }
        frags
    }

    /// Byte-level BPE of one fragment (llama.cpp `llm_tokenizer_bpe_session::tokenize`): pre-tokenize, then merge
    /// each piece's bytes by rank, lowest first, ties to the leftmost pair.
    fn encode_bpe(&self, bpe: &Bpe, text: &str, out: &mut Vec<u32>) {
        let n_vocab = self.vocab.tokens.len() as u32;
        for piece in self.pre_tokenize(text) {
            let bytes = piece.as_bytes();
            if bpe.ignore_merges {
                let encoded: String = bytes.iter().map(|&b| BYTE_CHARS[b as usize]).collect();
                if let Some(&id) = self.vocab.ids.get(&encoded) {
                    out.push(id);
                    continue;
                }
            }
            let mut syms = link(bytes.iter().enumerate().map(|(i, &b)| (i, i + 1, bpe.byte_piece[b as usize])));
            let mut heap: BinaryHeap<Reverse<BpePair>> = BinaryHeap::new();
            let push = |heap: &mut BinaryHeap<_>, syms: &[Sym], l: usize, r: usize| {
                if l != NONE && r != NONE {
                    if let Some(&(rank, _)) = bpe.ranks.get(&(syms[l].piece, syms[r].piece)) {
                        heap.push(Reverse((rank, l, r, syms[l].piece, syms[r].piece)));
                    }
                }
            };
            for i in 1..syms.len() {
                push(&mut heap, &syms, i - 1, i);
            }
            while let Some(Reverse((_, l, r, lp, rp))) = heap.pop() {
                let (sl, sr) = (syms[l], syms[r]);
                if sl.end == sl.start || sr.end == sr.start || sl.piece != lp || sr.piece != rp || sl.next != r {
                    continue;
                }
                let merged = bpe.ranks[&(lp, rp)].1;
                let rn = sr.next;
                syms[l] = Sym { end: sr.end, piece: merged, next: rn, ..sl };
                syms[r].end = syms[r].start; // dead
                if rn != NONE {
                    syms[rn].prev = l;
                }
                push(&mut heap, &syms, syms[l].prev, l);
                push(&mut heap, &syms, l, rn);
            }
            for s in live(&syms) {
                if s.piece < n_vocab {
                    out.push(s.piece);
                } else {
                    // not a token (a vocabulary without some byte, or a merge result it lacks): its bytes one by one
                    out.extend(bytes[s.start..s.end].iter().map(|&b| bpe.byte_piece[b as usize]).filter(|&p| p < n_vocab));
                }
            }
        }
    }

    /// SentencePiece BPE of one fragment (llama.cpp `llm_tokenizer_spm_session::tokenize`): spaces to `▁`, then
    /// merge adjacent characters whose concatenation is a token, highest score first, ties to the leftmost pair;
    /// a symbol left without a token is spelled with byte tokens.
    fn encode_spm(&self, text: &str, space_prefix: bool, out: &mut Vec<u32>) {
        let s = format!("{}{text}", if space_prefix { " " } else { "" }).replace(' ', "\u{2581}");
        let mut syms = link(s.char_indices().map(|(i, c)| (i, i + c.len_utf8(), 0)));
        // (score, leftmost first, left, right, byte length of the pair)
        let mut heap: BinaryHeap<(u32, Reverse<usize>, usize, usize)> = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<_>, syms: &[Sym], l: usize, r: usize| {
            if l != NONE && r != NONE {
                if let Some(&id) = self.vocab.ids.get(&s[syms[l].start..syms[r].end]) {
                    heap.push((score_key(self.vocab.scores[id as usize]), Reverse(l), r, syms[r].end - syms[l].start));
                }
            }
        };
        for i in 1..syms.len() {
            push(&mut heap, &syms, i - 1, i);
        }
        while let Some((_, Reverse(l), r, len)) = heap.pop() {
            let (sl, sr) = (syms[l], syms[r]);
            if sl.end == sl.start || sr.end == sr.start || sl.next != r || sr.end - sl.start != len {
                continue;
            }
            syms[l].end = sr.end;
            syms[l].next = sr.next;
            syms[r].end = syms[r].start; // dead
            if sr.next != NONE {
                syms[sr.next].prev = l;
            }
            push(&mut heap, &syms, syms[l].prev, l);
            push(&mut heap, &syms, l, sr.next);
        }
        for sym in live(&syms) {
            match self.vocab.ids.get(&s[sym.start..sym.end]) {
                Some(&id) => out.push(id),
                None => out.extend(s.as_bytes()[sym.start..sym.end].iter().filter_map(|&b| self.byte_tokens[b as usize].or(self.unk))),
            }
        }
    }
}

/// A piece of text to tokenize, or a special token cut out of it.
#[derive(Clone, Copy)]
enum Frag<'t> {
    Text(&'t str),
    Token(u32),
}

impl Bpe {
    /// Merge ranks keyed by the pieces' ids; merge parts that are not tokens get ids past the vocabulary.
    fn new(vocab: &Vocab, merges: &[String], regexes: Vec<Regex>, ignore_merges: bool) -> Result<Bpe> {
        let mut extra_ids: FxHashMap<String, u32> = FxHashMap::default();
        let n = vocab.tokens.len() as u32;
        let piece = |s: &str, extra: &mut FxHashMap<String, u32>| -> u32 {
            if let Some(&id) = vocab.ids.get(s) {
                return id;
            }
            let next = n + extra.len() as u32;
            *extra.entry(s.to_string()).or_insert(next)
        };
        let mut ranks = FxHashMap::with_capacity_and_hasher(merges.len(), Default::default());
        for (rank, m) in merges.iter().enumerate() {
            // llama.cpp splits at the first space after the first byte
            let Some(sp) = m.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1) else {
                return Err(Error::Tokenizer(format!("merge {rank} ({m:?}) has no space between its two parts")));
            };
            let (l, r) = (&m[..sp], &m[sp + 1..]);
            let (lp, rp) = (piece(l, &mut extra_ids), piece(r, &mut extra_ids));
            let merged = piece(&format!("{l}{r}"), &mut extra_ids);
            ranks.entry((lp, rp)).or_insert((rank as u32, merged));
        }
        let byte_piece = std::array::from_fn(|b| vocab.ids.get(BYTE_CHARS[b].to_string().as_str()).copied().unwrap_or(u32::MAX));
        Ok(Bpe { regexes, ignore_merges, ranks, byte_piece })
    }
}

/// Decodes tokens one at a time and returns only complete UTF-8 text: the bytes of a character split across tokens
/// are held back until the rest arrives (tinygrad `SimpleTokenizer.stream_decoder`, Python's incremental UTF-8
/// decoder with `errors="replace"`). Invalid bytes become U+FFFD.
#[derive(Clone, Debug, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// An empty decoder.
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    /// Adds token `id`'s bytes and returns the text completed so far.
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
        self.push_bytes(&tokenizer.decode_token(id))
    }

    /// Adds raw bytes and returns the text completed so far.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).expect("valid prefix"));
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// The held-back bytes of an unfinished character, as U+FFFD (empty when nothing is held back); the decoder is
    /// empty afterwards.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}
