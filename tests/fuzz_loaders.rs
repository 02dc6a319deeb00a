//! Mutation fuzzing of the file loaders that read untrusted bytes: the gzipped IDX reader
//! ([`idx_from_gz`], MNIST's), safetensors ([`safe_load_bytes`]) and ONNX models
//! ([`tinygrad::onnx::OnnxRunner::from_bytes`]: initializers of standard and narrow types, raw and typed). Valid files are generated, then damaged:
//! truncated, bits flipped, bytes overwritten, inserted and appended, and header fields replaced by lies (IDX type
//! code, dim count and dims; safetensors header length, dtype names, shapes, data offsets), with huge values among
//! the choices. Every case must return `Ok` or `Err` (a panic fails the test, an out-of-bounds read panics or
//! faults), no single allocation may exceed what the input really holds, `Ok` must agree with an independent
//! reading of the format, and undamaged files must load with their exact contents. The `fuzz/` directory runs the
//! same entry points under `cargo fuzz` for longer runs.

use flate2::{read::GzDecoder, write::GzEncoder, Compression};
use proptest::prelude::*;
use proptest::sample::Index;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use tinygrad::dtype::{dtypes, DType};
use tinygrad::nn::datasets::idx_from_gz;
use tinygrad::nn::state::safe_load_bytes;

// **************** the largest allocation of a load ****************

/// The system allocator, recording on each thread the largest single allocation since [`largest_alloc_during`]
/// started.
struct Peak;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to `System`; the bookkeeping touches only a const-initialized thread-local `Cell`, which
// neither allocates nor reenters the allocator.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = PEAK.try_with(|p| p.set(p.get().max(layout.size())));
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` (via `alloc` or `realloc`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = PEAK.try_with(|p| p.set(p.get().max(new_size)));
        // SAFETY: the caller's contract for `realloc` is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Peak = Peak;

/// `f`'s result and the largest single allocation it made on this thread.
fn largest_alloc_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    PEAK.with(|p| p.set(0));
    let r = f();
    (r, PEAK.with(Cell::get))
}

/// What the inflater and the JSON parser may allocate beyond the data (flate2's 32 KiB window and buffers).
const SLACK: usize = 256 << 10;

// **************** mutations ****************

/// One damage to a byte string; positions are fractions of its length at the time.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(Index),
    FlipBit(Index, u8),
    SetByte(Index, u8),
    Insert(Index, Vec<u8>),
    Append(Vec<u8>),
    Remove(Index, Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Append),
        (any::<Index>(), any::<Index>()).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

fn mutate(bytes: &mut Vec<u8>, muts: &[Mutation]) {
    for m in muts {
        let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len) };
        match m {
            Mutation::Truncate(i) => bytes.truncate(at(i, bytes.len())),
            Mutation::FlipBit(i, b) if !bytes.is_empty() => {
                let i = at(i, bytes.len());
                bytes[i] ^= 1 << b;
            }
            Mutation::SetByte(i, v) if !bytes.is_empty() => {
                let i = at(i, bytes.len());
                bytes[i] = *v;
            }
            Mutation::Insert(i, v) => {
                let i = at(i, bytes.len() + 1);
                bytes.splice(i..i, v.iter().copied());
            }
            Mutation::Append(v) => bytes.extend_from_slice(v),
            Mutation::Remove(i, n) => {
                let i = at(i, bytes.len() + 1);
                let n = at(n, bytes.len() - i + 1).min(64);
                bytes.drain(i..i + n);
            }
            _ => {}
        }
    }
}

/// Sizes and counts that break naive arithmetic: zero, one, powers of two at type boundaries, all ones.
fn huge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::from(u32::MAX)),
        Just(1 << 31),
        Just(1 << 32),
        Just(1 << 62),
        Just(1 << 63),
        Just(u64::MAX),
        Just(u64::MAX - 7),
        (1u64..100_000),
        any::<u64>(),
    ]
}

// **************** IDX ****************

const IDX_CODES: [(u8, usize); 6] = [(0x08, 1), (0x09, 1), (0x0B, 2), (0x0C, 4), (0x0D, 4), (0x0E, 8)];

/// A damage to an IDX file's header, before compression.
#[derive(Debug, Clone)]
enum IdxLie {
    TypeCode(u8),
    Ndim(u8),
    /// Replaces dim `i % ndim` (when there is one).
    Dim(usize, u32),
}

fn idx_lie() -> impl Strategy<Value = IdxLie> {
    let dim = prop_oneof![Just(0u32), Just(1), Just(u32::MAX), Just(1 << 31), Just(1 << 16), 0u32..64, any::<u32>()];
    prop_oneof![
        any::<u8>().prop_map(IdxLie::TypeCode),
        any::<u8>().prop_map(IdxLie::Ndim),
        (0usize..8, dim).prop_map(|(i, d)| IdxLie::Dim(i, d))
    ]
}

/// An IDX file: type, dims (up to 4 of up to 6) and data, with lies in its header, gzipped at `level` (0 stores
/// the bytes uncompressed), then damaged.
#[derive(Debug, Clone)]
struct IdxCase {
    code: usize,
    dims: Vec<u32>,
    seed: u8,
    lies: Vec<IdxLie>,
    raw_damage: Vec<Mutation>,
    level: u32,
    gz_damage: Vec<Mutation>,
}

fn idx_case() -> impl Strategy<Value = IdxCase> {
    (
        0..IDX_CODES.len(),
        prop::collection::vec(0u32..7, 0..5),
        any::<u8>(),
        prop::collection::vec(idx_lie(), 0..3),
        prop::collection::vec(mutation(), 0..3),
        prop_oneof![Just(0u32), Just(1), Just(6)],
        prop::collection::vec(mutation(), 0..3),
    )
        .prop_map(|(code, dims, seed, lies, raw_damage, level, gz_damage)| IdxCase {
            code,
            dims,
            seed,
            lies,
            raw_damage,
            level,
            gz_damage,
        })
}

fn gzip(raw: &[u8], level: u32) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::new(level));
    gz.write_all(raw).unwrap();
    gz.finish().unwrap()
}

/// The uncompressed IDX file of `case` before damage.
fn idx_raw(code: u8, dims: &[u32], seed: u8) -> Vec<u8> {
    let size = IDX_CODES.iter().find(|c| c.0 == code).unwrap().1;
    let n = dims.iter().map(|&d| d as usize).product::<usize>() * size;
    let mut raw = vec![0, 0, code, dims.len() as u8];
    raw.extend(dims.iter().flat_map(|d| d.to_be_bytes()));
    raw.extend((0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    raw
}

impl IdxCase {
    /// The gzipped bytes, and whether they are an undamaged file.
    fn bytes(&self) -> (Vec<u8>, bool) {
        let mut raw = idx_raw(IDX_CODES[self.code].0, &self.dims, self.seed);
        for lie in &self.lies {
            match *lie {
                IdxLie::TypeCode(c) => raw[2] = c,
                IdxLie::Ndim(n) => raw[3] = n,
                IdxLie::Dim(i, d) if !self.dims.is_empty() => {
                    let at = 4 + 4 * (i % self.dims.len());
                    raw[at..at + 4].copy_from_slice(&d.to_be_bytes());
                }
                IdxLie::Dim(..) => {}
            }
        }
        mutate(&mut raw, &self.raw_damage);
        let mut gz = gzip(&raw, self.level);
        mutate(&mut gz, &self.gz_damage);
        let clean = self.lies.is_empty() && self.raw_damage.is_empty() && self.gz_damage.is_empty();
        (gz, clean)
    }
}

/// An IDX array's dtype, dims and native-endian data.
type IdxArray = (DType, Vec<usize>, Vec<u8>);

/// An independent reading of a gzipped IDX file: decompress all of it, then check the header against the length.
/// Returns the decompressed length, and the dtype, dims and native-endian data when the file is valid.
fn idx_reference(gz: &[u8]) -> (usize, Option<IdxArray>) {
    let mut raw = Vec::new();
    let complete = GzDecoder::new(gz).read_to_end(&mut raw).is_ok();
    let parse = || {
        let [0, 0, code, ndim, ..] = raw[..] else { return None };
        let (&(_, size), dtype) = IDX_CODES
            .iter()
            .zip([dtypes::UINT8, dtypes::INT8, dtypes::INT16, dtypes::INT32, dtypes::FLOAT32, dtypes::FLOAT64])
            .find(|(c, _)| c.0 == code)?;
        let header = 4 + 4 * usize::from(ndim);
        let dims: Vec<usize> = raw.get(4..header)?.chunks(4).map(|d| u32::from_be_bytes(d.try_into().unwrap()) as usize).collect();
        let want = if dims.contains(&0) { Some(0) } else { dims.iter().try_fold(size as u128, |n, &d| n.checked_mul(d as u128)) };
        if !complete || want != Some((raw.len() - header) as u128) {
            return None;
        }
        let data = raw[header..]
            .chunks(size)
            .flat_map(|c| if cfg!(target_endian = "little") { c.iter().rev().copied().collect() } else { c.to_vec() })
            .collect();
        Some((dtype, dims, data))
    };
    (raw.len(), parse())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn idx_loader_survives_mutations(case in idx_case()) {
        let (gz, clean) = case.bytes();
        let (got, peak) = largest_alloc_during(|| idx_from_gz(&gz, "fuzz.gz"));
        let (raw_len, want) = idx_reference(&gz);
        prop_assert!(peak <= 2 * raw_len + SLACK, "allocated {peak} bytes for {raw_len} decompressed");
        match (&got, &want) {
            (Ok(idx), Some((dtype, dims, data))) => {
                prop_assert_eq!((idx.dtype, &idx.shape, &idx.data), (*dtype, dims, data));
            }
            (Err(e), None) => prop_assert!(e.to_string().contains("fuzz.gz"), "errors name the file: {}", e),
            _ => prop_assert!(false, "loader {:?}, reference {:?}", got.as_ref().map(|i| &i.shape), want.as_ref().map(|w| &w.1)),
        }
        prop_assert!(!clean || got.is_ok(), "an undamaged file loads");
    }
}

// **************** safetensors ****************

/// Dtype names: those the loader reads, those the safetensors crate knows but tinygrad lacks, and nonsense.
const ST_DTYPES: [(&str, usize); 19] = [
    ("BOOL", 1),
    ("U8", 1),
    ("I8", 1),
    ("I16", 2),
    ("U16", 2),
    ("F16", 2),
    ("BF16", 2),
    ("I32", 4),
    ("U32", 4),
    ("F32", 4),
    ("F64", 8),
    ("I64", 8),
    ("U64", 8),
    ("F8_E4M3", 1),
    ("F8_E5M2", 1),
    ("f32", 4),
    ("", 1),
    ("F128", 16),
    ("I32\u{0}", 4),
];
/// Entries of `ST_DTYPES` tinygrad loads.
const ST_SUPPORTED: usize = 13;

/// One tensor of a generated file: dtype name index, shape, and optionally lying data offsets.
#[derive(Debug, Clone)]
struct StTensor {
    name: String,
    dtype: usize,
    shape: Vec<u64>,
    offsets: Option<(u64, u64)>,
}

#[derive(Debug, Clone)]
enum HeaderLen {
    True,
    /// The true length plus this (wrapping).
    Off(i64),
    Lie(u64),
}

/// A safetensors file: tensors (consistent offsets unless they lie), optional `__metadata__`, header padding,
/// a header length that may lie, extra data bytes, then byte-level damage.
#[derive(Debug, Clone)]
struct StCase {
    tensors: Vec<StTensor>,
    metadata: bool,
    pad: usize,
    header_len: HeaderLen,
    extra_data: Vec<u8>,
    damage: Vec<Mutation>,
}

fn st_tensor() -> impl Strategy<Value = StTensor> {
    let small = prop::collection::vec(0u64..5, 0..4);
    let huge = prop::collection::vec(prop_oneof![3 => 0u64..5, 1 => huge_u64()], 0..4);
    let offsets = prop_oneof![4 => Just(None), 1 => (huge_u64(), huge_u64()).prop_map(Some), 1 => (0u64..64, 0u64..64).prop_map(Some)];
    let name = prop_oneof![
        Just("w".to_string()),
        Just("layer.0.bias".to_string()),
        Just(String::new()),
        Just("é\"\\\n".to_string()),
        "[a-z]{1,4}"
    ];
    let dtype = prop_oneof![4 => 0..ST_SUPPORTED, 1 => 0..ST_DTYPES.len()];
    (name, dtype, prop_oneof![4 => small, 1 => huge], offsets).prop_map(|(name, dtype, shape, offsets)| StTensor {
        name,
        dtype,
        shape,
        offsets,
    })
}

fn st_case() -> impl Strategy<Value = StCase> {
    let header_len =
        prop_oneof![6 => Just(HeaderLen::True), 2 => (-9i64..9).prop_map(HeaderLen::Off), 1 => huge_u64().prop_map(HeaderLen::Lie)];
    let damage = prop_oneof![3 => Just(vec![]), 2 => prop::collection::vec(mutation(), 1..4)];
    let extra = prop_oneof![4 => Just(vec![]), 1 => prop::collection::vec(any::<u8>(), 1..9)];
    (prop::collection::vec(st_tensor(), 0..4), any::<bool>(), 0usize..9, header_len, extra, damage).prop_map(
        |(tensors, metadata, pad, header_len, extra_data, damage)| StCase { tensors, metadata, pad, header_len, extra_data, damage },
    )
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A tensor a file holds: name, index in `ST_DTYPES`, shape, bytes.
type StTensorData = (String, usize, Vec<usize>, Vec<u8>);

impl StCase {
    /// The file's bytes, and for an undamaged file the tensors it holds: (name, dtype index, shape, bytes).
    fn bytes(&self) -> (Vec<u8>, Option<Vec<StTensorData>>) {
        let mut entries = Vec::new();
        let (mut data, mut honest) = (Vec::new(), true);
        let mut names = std::collections::HashSet::new();
        for (i, t) in self.tensors.iter().enumerate() {
            let numel = t.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
            let claimed = numel.and_then(|n| n.checked_mul(ST_DTYPES[t.dtype].1 as u64));
            let nbytes = claimed.filter(|&n| n <= 4096);
            let start = data.len() as u64;
            // offsets that agree with the shape even when the data is not there
            let (s, e) = t.offsets.unwrap_or((start, claimed.and_then(|n| start.checked_add(n)).unwrap_or(u64::MAX)));
            let fill = nbytes.unwrap_or(0).min(e.saturating_sub(s)).min(4096) as usize;
            let bytes: Vec<u8> = (0..fill).map(|j| (i * 61 + j * 7) as u8 % if t.dtype == 0 { 2 } else { 251 }).collect();
            data.extend_from_slice(&bytes);
            honest &= t.offsets.is_none()
                && nbytes.is_some()
                && t.shape.iter().all(|&d| d <= i64::MAX as u64)
                && t.dtype < ST_SUPPORTED
                && names.insert(t.name.clone());
            let shape = t.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            entries.push(format!(
                "{}:{{\"dtype\":{},\"shape\":[{shape}],\"data_offsets\":[{s},{e}]}}",
                json_str(&t.name),
                json_str(ST_DTYPES[t.dtype].0)
            ));
        }
        if self.metadata {
            entries.push("\"__metadata__\":{\"format\":\"pt\"}".into());
        }
        let header = format!("{{{}}}{}", entries.join(","), " ".repeat(self.pad));
        let len = match self.header_len {
            HeaderLen::True => header.len() as u64,
            HeaderLen::Off(d) => (header.len() as u64).wrapping_add_signed(d),
            HeaderLen::Lie(n) => n,
        };
        honest &= matches!(self.header_len, HeaderLen::True) && self.extra_data.is_empty() && self.damage.is_empty();
        let mut file = [&len.to_le_bytes()[..], header.as_bytes(), &data, &self.extra_data].concat();
        mutate(&mut file, &self.damage);
        let want = honest.then(|| {
            let mut at = 0;
            self.tensors
                .iter()
                .map(|t| {
                    let shape: Vec<usize> = t.shape.iter().map(|&d| d as usize).collect();
                    let n = shape.iter().product::<usize>() * ST_DTYPES[t.dtype].1;
                    at += n;
                    (t.name.clone(), t.dtype, shape, data[at - n..at].to_vec())
                })
                .collect()
        });
        (file, want)
    }
}

const ST_TINYGRAD: [DType; ST_SUPPORTED] = [
    dtypes::BOOL,
    dtypes::UINT8,
    dtypes::INT8,
    dtypes::INT16,
    dtypes::UINT16,
    dtypes::FLOAT16,
    dtypes::BFLOAT16,
    dtypes::INT32,
    dtypes::UINT32,
    dtypes::FLOAT32,
    dtypes::FLOAT64,
    dtypes::INT64,
    dtypes::UINT64,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn safetensors_loader_survives_mutations(case in st_case()) {
        let (file, want) = case.bytes();
        let (got, peak) = largest_alloc_during(|| safe_load_bytes(&file, "fuzz.safetensors"));
        prop_assert!(peak <= file.len() + SLACK, "allocated {peak} bytes for a {}-byte file", file.len());
        match &got {
            Ok(tensors) => {
                let total: usize = tensors.values().map(|t| t.numel() * t.dtype().itemsize()).sum();
                prop_assert!(total + 8 <= file.len(), "{total} bytes of tensors from a {}-byte file", file.len());
                for t in tensors.values() {
                    let bytes = t.to_bytes().unwrap();
                    prop_assert_eq!(bytes.len(), t.numel() * t.dtype().itemsize());
                    prop_assert!(t.dtype() != dtypes::BOOL || bytes.iter().all(|&b| b <= 1), "bools are 0 or 1: {:?}", bytes);
                }
            }
            Err(e) => prop_assert!(e.to_string().contains("fuzz.safetensors"), "errors name the file: {}", e),
        }
        if let Some(want) = want {
            let tensors = got.expect("an undamaged file loads");
            prop_assert_eq!(tensors.len(), want.len());
            for (name, dtype, shape, bytes) in want {
                let t = &tensors[&name];
                prop_assert_eq!((t.dtype(), t.shape(), t.to_bytes().unwrap()), (ST_TINYGRAD[dtype], shape, bytes));
            }
        }
    }
}

// **************** the cases that found bugs, and the extremes ****************

#[test]
fn idx_gzip_bomb_is_refused_without_inflating_it() {
    // 64 MiB of zeros (64 KiB gzipped) after a header that says 10 bytes
    let mut raw = idx_raw(0x08, &[10], 0);
    raw.resize(64 << 20, 0);
    let gz = gzip(&raw, 1);
    let (got, peak) = largest_alloc_during(|| idx_from_gz(&gz, "bomb.gz"));
    let err = got.expect_err("padded data").to_string();
    assert!(err.contains("bomb.gz") && err.contains("padded"), "{err}");
    assert!(peak < SLACK, "allocated {peak} bytes");
}

#[test]
fn idx_lying_dims_are_refused_before_allocating() {
    for (dims, want) in [(vec![u32::MAX; 3], "overflow"), (vec![u32::MAX, 2], "truncated"), (vec![u32::MAX; 5], "overflow")] {
        let mut raw = idx_raw(0x0E, &[1; 5][..dims.len()], 0);
        raw[4..4 + 4 * dims.len()].copy_from_slice(&dims.iter().flat_map(|d| d.to_be_bytes()).collect::<Vec<_>>());
        let (got, peak) = largest_alloc_during(|| idx_from_gz(&gzip(&raw, 6), "dims.gz"));
        let err = got.expect_err("lying dims").to_string();
        assert!(err.contains(want), "{dims:?}: {err}");
        assert!(peak < SLACK, "allocated {peak} bytes");
    }
    // a zero dim makes the others' overflowing product 0: an empty array
    let mut raw = idx_raw(0x08, &[0, 1, 1], 0);
    raw[8..16].copy_from_slice(&[0xFF; 8]);
    let idx = idx_from_gz(&gzip(&raw, 6), "zero.gz").unwrap();
    assert_eq!((idx.shape, idx.data.len()), (vec![0, u32::MAX as usize, u32::MAX as usize], 0));
}

/// A safetensors file with one tensor described by `entry` (JSON) and `data`.
fn st_file(entry: &str, data: &[u8]) -> Vec<u8> {
    let header = format!("{{\"t\":{entry}}}");
    [&(header.len() as u64).to_le_bytes()[..], header.as_bytes(), data].concat()
}

#[test]
fn safetensors_extremes() {
    let err = |file: &[u8]| safe_load_bytes(file, "x.safetensors").expect_err("must not load").to_string();
    // offsets that agree with a u64::MAX-byte shape: the safetensors crate's length sum overflowed (a panic in debug
    // builds) before the loader checked the offsets itself
    let e = err(&st_file(r#"{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,18446744073709551615]}"#, &[1, 2]));
    assert!(e.contains("reach past the 2 bytes of data"), "{e}");
    // no elements, but a dim no shape can hold: reshape panicked
    let e = err(&st_file(r#"{"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]}"#, &[]));
    assert!(e.contains("dim 9223372036854775808"), "{e}");
    let e = err(&st_file(r#"{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}"#, &[1, 2]));
    assert!(e.contains("unsupported dtype"), "{e}");
    // bool bytes other than 0 and 1 read as true
    let t = safe_load_bytes(&st_file(r#"{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}"#, &[0, 1, 7, 255]), "b").unwrap();
    assert_eq!(t["t"].to_vec::<bool>().unwrap(), [false, true, true, true]);
    assert_eq!(t["t"].to_bytes().unwrap(), [0, 1, 1, 1]);
    let t = safe_load_bytes(&st_file(r#"{"dtype":"I16","shape":[0,4611686018427387904],"data_offsets":[0,0]}"#, &[]), "z").unwrap();
    assert_eq!(t["t"].shape(), [0, 1 << 62]);
}

// **************** ONNX models ****************

/// ONNX data types the fuzzer writes: (type number, bytes per element in raw data, or 0 for 4-bit packing).
const ONNX_TYPES: [(i32, usize); 8] = [(1, 4), (11, 8), (7, 8), (6, 4), (2, 1), (9, 1), (17, 1), (22, 0)];

/// Initializers by name, as little-endian bytes.
type Named = Vec<(String, Vec<u8>)>;

#[derive(Debug, Clone)]
struct OnnxCase {
    /// Per initializer: a type index, dims, and whether its data is raw (else typed fields, for float32 and int64).
    inits: Vec<(usize, Vec<i64>, bool)>,
    /// Dims replaced by lies (huge or negative values).
    lie: Option<(usize, i64)>,
    seed: u8,
    damage: Vec<Mutation>,
}

fn onnx_case() -> impl Strategy<Value = OnnxCase> {
    let init = (0..ONNX_TYPES.len(), prop::collection::vec(0i64..4, 0..4), any::<bool>());
    let lie = prop::option::weighted(0.1, (0usize..4, prop_oneof![Just(-1i64), Just(i64::MAX), Just(1 << 40), Just(1 << 62)]));
    (prop::collection::vec(init, 1..4), lie, any::<u8>(), prop::collection::vec(mutation(), 0..3))
        .prop_map(|(inits, lie, seed, damage)| OnnxCase { inits, lie, seed, damage })
}

impl OnnxCase {
    /// The model's bytes, and for an undamaged one its initializers' names and little-endian bytes (the standard
    /// dtypes; a narrow one's decoded values are checked by tests/onnx.rs).
    fn bytes(&self) -> (Vec<u8>, Option<Named>) {
        use prost::Message;
        use tinygrad::onnx::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto};
        let mut want = Vec::new();
        let honest = self.damage.is_empty() && self.lie.is_none();
        let inits: Vec<TensorProto> = self
            .inits
            .iter()
            .enumerate()
            .map(|(i, (ty, dims, raw))| {
                let (code, size) = ONNX_TYPES[*ty];
                let n: usize = dims.iter().product::<i64>() as usize;
                let len = if size == 0 { n.div_ceil(2) } else { n * size };
                let mut data: Vec<u8> = (0..len).map(|k| (k as u8).wrapping_mul(31).wrapping_add(self.seed)).collect();
                if code == 9 {
                    data.iter_mut().for_each(|b| *b &= 1);
                }
                let mut dims = dims.clone();
                if let Some((at, v)) = self.lie.filter(|(at, _)| *at < dims.len() && i == 0) {
                    dims[at] = v;
                }
                let mut t = TensorProto { name: Some(format!("w{i}")), dims, data_type: Some(code), ..Default::default() };
                match (raw, code) {
                    (false, 1) => t.float_data = data.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
                    (false, 7) => t.int64_data = data.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect(),
                    _ => t.raw_data = Some(data.clone().into()),
                }
                if size != 0 && code != 17 {
                    want.push((format!("w{i}"), data));
                }
                t
            })
            .collect();
        let identity =
            NodeProto { op_type: Some("Identity".into()), input: vec!["w0".into()], output: vec!["y".into()], ..Default::default() };
        let graph = GraphProto { node: vec![identity], initializer: inits, ..Default::default() };
        let opset = OperatorSetIdProto { domain: Some(String::new()), version: Some(17) };
        let mut file =
            ModelProto { ir_version: Some(8), opset_import: vec![opset], graph: Some(graph), ..Default::default() }.encode_to_vec();
        mutate(&mut file, &self.damage);
        (file, honest.then_some(want))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn onnx_loader_survives_mutations(case in onnx_case()) {
        let (file, want) = case.bytes();
        let path = std::path::Path::new("fuzz.onnx");

        let (got, peak) = largest_alloc_during(|| tinygrad::onnx::OnnxRunner::from_bytes(bytes::Bytes::from(file.clone()), path));
        // (a narrow type decodes to at most 8x its packed bytes: float4 to float32)
        prop_assert!(peak <= 8 * file.len() + SLACK, "allocated {peak} bytes for a {}-byte file", file.len());
        match &got {
            Ok(runner) => {
                for (_, t) in runner.initializers() {
                    prop_assert_eq!(t.to_bytes().unwrap().len(), t.numel() * t.dtype().itemsize());
                }
            }
            Err(e) => prop_assert!(e.to_string().contains("fuzz.onnx") && e.to_string().lines().count() == 1, "errors name the file: {}", e),
        }
        if let Some(want) = want {
            let runner = got.expect("an undamaged model loads");
            let weights: std::collections::HashMap<&str, &tinygrad::Tensor> = runner.initializers().collect();
            for (name, bytes) in want {
                prop_assert_eq!(weights[name.as_str()].to_bytes().unwrap(), bytes);
            }
        }
    }
}
