//! GGUF: dequantization against llama.cpp's gguf-py (vectors made by tests/gguf/gen_vectors.py), the reader on a
//! small file of every metadata type, split models, clear errors for corrupt files, a fuzz loop over mutated files,
//! and the real models when present (`$TINYGRAD_MODELS_DIR`, default `~/.cache/tinygrad/models`; required when `CI`
//! is set).

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::path::{Path, PathBuf};
use tinygrad::dtype::dtypes;
use tinygrad::nn::gguf::{dequantize, gguf_load, GgmlType, GgufFile, GgufValue};
use tinygrad::{engine, Error, Tensor};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gguf").join(p)
}

fn cpu_bytes(b: &[u8]) -> Tensor {
    Tensor::from_uop(engine::buffer_from_bytes(b, dtypes::UINT8, b.len(), "CPU"))
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap())
}
fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// `got` matches `want` bit for bit (NaN matches any NaN) when `tol` is 0, else within `tol`.
#[track_caller]
fn check_close(what: &str, i: usize, got: f32, want: f32, tol: f32) {
    let ok = (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits() || (tol > 0.0 && (got - want).abs() <= tol);
    assert!(ok, "{what}[{i}]: got {got:e} ({:#010x}), gguf-py {want:e} ({:#010x}), tolerance {tol:e}", got.to_bits(), want.to_bits());
}

#[test]
fn dequantize_matches_gguf_py() {
    let expect = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4"];
    for name in expect {
        let file = std::fs::read(data(&format!("vectors/{name}.bin"))).unwrap();
        let (id, rows, n, m, nb) =
            (u32_at(&file, 0), u32_at(&file, 1) as usize, u32_at(&file, 2) as usize, u32_at(&file, 3) as usize, u32_at(&file, 4) as usize);
        let ty = GgmlType::from_id(id).unwrap();
        assert_eq!(ty.name(), name);
        let raw = &file[20..20 + m];
        let want = f32s(&file[20 + m..20 + m + 4 * n]);
        let tol = f32s(&file[20 + m + 4 * n..]);
        assert_eq!((tol.len(), ty.nbytes(n)), (nb, Some(m)), "{name}");
        let t = dequantize(&cpu_bytes(raw), ty, &[rows, n / rows]);
        assert_eq!((t.shape(), t.dtype()), (vec![rows, n / rows], ty.output_dtype()), "{name}");
        let got = t.cast(dtypes::FLOAT32).to_vec::<f32>().unwrap();
        let per_block = n / nb;
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            check_close(name, i, g, w, tol[i / per_block]);
        }
        let exact = tol.iter().all(|&t| t == 0.0);
        assert_eq!(exact, !matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K), "{name}");
    }
}

#[test]
fn dequantize_plain_ints_keep_their_dtype() {
    let v: Vec<i16> = vec![-3, 0, 7, i16::MIN, i16::MAX, 1];
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let t = dequantize(&cpu_bytes(&bytes), GgmlType::I16, &[2, 3]);
    assert_eq!(t.dtype(), dtypes::INT16);
    assert_eq!(t.to_vec::<i16>().unwrap(), v);
    let v: Vec<f64> = vec![1.5, -0.0, f64::MAX, 1e-310];
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(dequantize(&cpu_bytes(&bytes), GgmlType::F64, &[4]).to_vec::<f64>().unwrap(), v);
}

#[test]
fn reads_every_metadata_type() {
    let f = GgufFile::open(data("small.gguf")).unwrap();
    use GgufValue::*;
    let m = &f.metadata;
    let want = [
        ("general.architecture", Str("testarch".into())),
        ("t.u8", U8(200)),
        ("t.i8", I8(-100)),
        ("t.u16", U16(60000)),
        ("t.i16", I16(-30000)),
        ("t.u32", U32(4_000_000_000)),
        ("t.i32", I32(-2_000_000_000)),
        ("t.f32", F32(1.5)),
        ("t.bool", Bool(true)),
        ("t.str", Str("héllo gguf".into())),
        ("t.u64", U64((1 << 63) + 5)),
        ("t.i64", I64(-(1 << 62))),
        ("t.f64", F64(-0.125)),
        ("t.arr_i32", Array(vec![I32(1), I32(-2), I32(3)])),
        ("t.arr_u8", Array(vec![U8(1), U8(2), U8(255)])),
        ("t.arr_str", Array(vec![Str("a".into()), Str("".into()), Str("ccc".into())])),
        ("t.arr_f32", Array(vec![F32(0.5), F32(-1.0)])),
        ("t.nested", Array(vec![Array(vec![I32(1), I32(2)]), Array(vec![I32(3)]), Array(vec![I32(4), I32(5), I32(6)])])),
        ("t.nested2", Array(vec![Array(vec![Array(vec![Str("x".into())])]), Array(vec![Array(vec![Str("y".into()), Str("z".into())])])])),
        ("testarch.embedding_length", U32(64)),
    ];
    for (k, v) in &want {
        assert_eq!(m.get(*k), Some(v), "{k}");
    }
    assert_eq!(m.len(), want.len(), "{:?}", m.keys().collect::<Vec<_>>());
    assert_eq!(f.version, 3);
    // accessors
    assert_eq!((m["t.u8"].as_u64(), m["t.i8"].as_u64(), m["t.i8"].as_i64()), (Some(200), None, Some(-100)));
    assert_eq!((m["t.u64"].as_i64(), m["t.u64"].as_u64(), m["t.u32"].as_usize()), (None, Some((1 << 63) + 5), Some(4_000_000_000)));
    assert_eq!((m["t.f32"].as_f32(), m["t.f64"].as_f64(), m["t.i16"].as_f64()), (Some(1.5), Some(-0.125), Some(-30000.0)));
    assert_eq!((m["t.bool"].as_bool(), m["t.str"].as_str(), m["t.str"].as_u64()), (Some(true), Some("héllo gguf"), None));
    assert_eq!(m["t.nested"].as_array().map(|a| a.len()), Some(3));
    assert_eq!((m["t.nested"].type_name(), m["t.str"].as_array()), ("array", None));

    let names: Vec<(&str, Vec<usize>, GgmlType)> = f.tensors.iter().map(|t| (t.name.as_str(), t.shape.clone(), t.ggml_type)).collect();
    use GgmlType as G;
    assert_eq!(
        names,
        [
            ("f32", vec![2, 64], G::F32),
            ("f16", vec![2, 64], G::F16),
            ("q8_0", vec![2, 64], G::Q8_0),
            ("q4_0", vec![2, 64], G::Q4_0),
            ("scalar3d", vec![2, 3, 4], G::F32)
        ]
        .map(|(n, s, t)| (n, s, t))
    );
    assert_eq!(f.raw("q8_0").unwrap().len(), 4 * 34);
    let x: Vec<f32> = (0..128).map(|i| i as f32 / 8.0 - 3.0).collect();
    assert_eq!(f.tensor("f32", "CPU").unwrap().to_vec::<f32>().unwrap(), x);
    let h = f.tensor("f16", "CPU").unwrap();
    assert_eq!(h.dtype(), dtypes::FLOAT16);
    assert_eq!(h.cast(dtypes::FLOAT32).to_vec::<f32>().unwrap(), x);
    for (name, step) in [("q8_0", 127.0), ("q4_0", 8.0)] {
        let q = f.tensor(name, "CPU").unwrap().to_vec::<f32>().unwrap();
        for (b, (qb, xb)) in q.chunks(32).zip(x.chunks(32)).enumerate() {
            let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
            assert!(qb.iter().zip(xb).all(|(a, b)| (a - b).abs() <= amax / step), "{name} block {b}: {qb:?} vs {xb:?}");
        }
    }
    assert_eq!(f.tensor("scalar3d", "CPU").unwrap().to_vec::<f32>().unwrap(), (0..24).map(|i| i as f32).collect::<Vec<_>>());
    let e = f.tensor("nope", "CPU").unwrap_err().to_string();
    assert!(e.contains("small.gguf") && e.contains("`nope`"), "{e}");

    let (kv, sd) = gguf_load(data("small.gguf")).unwrap();
    assert_eq!((kv.len(), sd.len()), (want.len(), 5));
    assert_eq!(sd["scalar3d"].shape(), vec![2, 3, 4]);
}

#[test]
fn split_models_load_every_part() {
    let f = GgufFile::open(data("split/tiny-00001-of-00003.gguf")).unwrap();
    assert_eq!(f.metadata.get("split.count").and_then(GgufValue::as_u64), Some(3));
    assert_eq!(f.tensors.iter().map(|t| (t.name.as_str(), t.part)).collect::<Vec<_>>(), [("t0", 0), ("t1", 1), ("t2", 2)]);
    for i in 0..3 {
        assert_eq!(f.tensor(&format!("t{i}"), "CPU").unwrap().to_vec::<f32>().unwrap(), vec![i as f32; 16]);
    }
    let e = GgufFile::open(data("split/tiny-00002-of-00003.gguf")).unwrap_err().to_string();
    assert!(e.contains("tiny-00002-of-00003.gguf") && e.contains("first file"), "{e}");
    // a missing part is an error naming it
    let dir = std::env::temp_dir().join(format!("tinygrad-gguf-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for p in ["tiny-00001-of-00003.gguf", "tiny-00002-of-00003.gguf"] {
        std::fs::copy(data(&format!("split/{p}")), dir.join(p)).unwrap();
    }
    let e = GgufFile::open(dir.join("tiny-00001-of-00003.gguf")).unwrap_err();
    assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("tiny-00003-of-00003.gguf"), "{e}");
    // the first part renamed: split.count says 3 but the name can't say where the others are
    std::fs::copy(data("split/tiny-00001-of-00003.gguf"), dir.join("renamed.gguf")).unwrap();
    let e = GgufFile::open(dir.join("renamed.gguf")).unwrap_err().to_string();
    assert!(e.contains("renamed.gguf") && e.contains("-00001-of-00003.gguf"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A GGUF v3 file built field by field, to write broken ones.
#[derive(Clone, Default)]
struct W(Vec<u8>);
impl W {
    fn new(n_tensors: u64, n_kv: u64) -> W {
        W(b"GGUF".to_vec()).u32(3).u64(n_tensors).u64(n_kv)
    }
    fn bytes(mut self, b: &[u8]) -> W {
        self.0.extend_from_slice(b);
        self
    }
    fn u32(self, v: u32) -> W {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(self, v: u64) -> W {
        self.bytes(&v.to_le_bytes())
    }
    fn str(self, s: &str) -> W {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A tensor info.
    fn tensor(self, name: &str, ne: &[u64], ty: u32, offset: u64) -> W {
        let w = self.str(name).u32(ne.len() as u32);
        ne.iter().fold(w, |w, &d| w.u64(d)).u32(ty).u64(offset)
    }
    /// Padding to 32 and `n` data bytes.
    fn data(mut self, n: usize) -> W {
        let pad = self.0.len().div_ceil(32) * 32 - self.0.len();
        self.0.extend(std::iter::repeat_n(0u8, pad + n));
        self
    }
}

#[track_caller]
fn err(w: W, want: &[&str]) {
    let e = GgufFile::from_bytes(w.0, "bad.gguf").expect_err("a corrupt file must be an error");
    let msg = e.to_string();
    assert!(matches!(e, Error::Format { .. }), "{msg}");
    for s in ["bad.gguf"].iter().chain(want) {
        assert!(msg.contains(s), "{msg:?} should mention {s:?}");
    }
}

#[test]
fn corrupt_files_are_clear_errors() {
    // a good file first, to show the builder writes what the reader reads
    let good = W::new(1, 1).str("k").u32(4).u32(7).tensor("w", &[32, 2], 8, 0).data(68);
    let f = GgufFile::from_bytes(good.0.clone(), "good.gguf").unwrap();
    assert_eq!((f.metadata["k"].as_u64(), f.tensors[0].shape.clone()), (Some(7), vec![2, 32]));
    assert_eq!(f.tensor("w", "CPU").unwrap().to_vec::<f32>().unwrap(), vec![0.0; 64]);

    err(W(b"GGM".to_vec()), &["magic", "run past the end"]);
    err(W(b"GGMLxxxxxxxxxxxxxxxxxxxx".to_vec()), &["not a GGUF file"]);
    err(W(b"GGUF".to_vec()).u32(1).u32(0).u32(0), &["version 1"]);
    err(W(b"GGUF".to_vec()).u32(3 << 24).u64(0).u64(0), &["big-endian"]);
    err(W(b"GGUF".to_vec()).u32(7).u64(0).u64(0), &["unknown GGUF version 7"]);
    err(W::new(u64::MAX, 0), &["tensor count", "18446744073709551615"]);
    err(W::new(0, 1 << 40), &["metadata count"]);
    err(W::new(0, 1).u64(u64::MAX - 3).u64(0), &["metadata key #0", "count"]);
    err(W::new(0, 1).str("key.a").u32(8).u64(1 << 50), &["`key.a`", "count"]);
    err(W::new(0, 1).str("key.b").u32(9).u32(10).u64(u64::MAX), &["`key.b`", "count"]);
    err(W::new(0, 1).str("key.c").u32(9).u32(99).u64(1), &["`key.c`", "unknown array element type 99"]);
    err(W::new(0, 1).str("key.d").u32(13).u32(0), &["`key.d`", "unknown value type 13"]);
    err(W::new(0, 1).str("key.e").u32(10).u32(5), &["`key.e`", "run past the end"]);
    err(W::new(0, 2).str("key.f").u32(7).bytes(&[1]).str("key.f").u32(7).bytes(&[0]), &["`key.f`", "twice"]);
    err(W::new(0, 1).u64(2).bytes(&[0xff, 0xfe]).u32(7).bytes(&[0]), &["metadata key #0", "UTF-8"]);
    err(W::new(0, 1).str("general.alignment").u32(4).u32(24), &["general.alignment", "power of two"]);
    // arrays of arrays nested deep enough to exhaust the stack if followed
    let deep = (0..10_000).fold(W::new(0, 1).str("key.g").u32(9), |w, _| w.u32(9).u64(1)).u32(0).u64(0);
    err(deep, &["`key.g`", "nested"]);
    // tensor infos
    err(W::new(1, 0).tensor("t.dims", &[1; 100], 0, 0), &["`t.dims`", "100 dims"]);
    err(W::new(1, 0).tensor("t.type", &[4], 99, 0).data(16), &["`t.type`", "unknown ggml type 99"]);
    err(W::new(1, 0).tensor("t.big", &[1 << 40, 1 << 40], 0, 0).data(16), &["`t.big`", "overflow"]);
    err(W::new(1, 0).tensor("t.huge", &[u64::MAX], 0, 0).data(16), &["`t.huge`", "too large"]);
    err(W::new(1, 0).tensor("t.blk", &[31, 2], 2, 0).data(64), &["`t.blk`", "multiple of Q4_0's block of 32"]);
    err(W::new(1, 0).tensor("t.past", &[4, 4], 0, 0).data(63), &["`t.past`", "run past the 63 bytes"]);
    err(W::new(1, 0).tensor("t.off", &[4], 0, u64::MAX - 8).data(64), &["`t.off`", "run past"]);
    err(W::new(1, 0).tensor("t.short", &[4], 0, 0), &["`t.short`", "run past the 0 bytes"]);
    err(W::new(2, 0).tensor("t.dup", &[4], 0, 0).tensor("t.dup", &[4], 0, 0).data(16), &["`t.dup`", "twice"]);
    // a type the reader knows but dequantize does not
    let f = GgufFile::from_bytes(W::new(1, 0).tensor("t.q2k", &[256], 10, 0).data(84).0, "q2k.gguf").unwrap();
    assert_eq!(f.raw("t.q2k").unwrap().len(), 84);
    let e = f.tensor("t.q2k", "CPU").unwrap_err().to_string();
    assert!(e.contains("q2k.gguf") && e.contains("Q2_K"), "{e}");
    // files on disk: missing, empty, a directory
    let e = GgufFile::open(data("no-such-file.gguf")).unwrap_err();
    assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("no-such-file.gguf"), "{e}");
    let empty = std::env::temp_dir().join(format!("tinygrad-gguf-empty-{}.gguf", std::process::id()));
    std::fs::write(&empty, b"").unwrap();
    let e = GgufFile::open(&empty).unwrap_err().to_string();
    assert!(e.contains("empty"), "{e}");
    std::fs::remove_file(&empty).unwrap();
    // a directory opens on Linux and then fails to map (ENODEV): said as what it is
    let e = GgufFile::open(std::env::temp_dir()).unwrap_err();
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("not a file"), "{e}");
}

/// Opens `bytes` and builds every tensor: Ok or Err, never a panic; what opens is consistent. With `realize`, the
/// tensors are computed too (when small: a patched dim can describe a huge tensor of zero-size blocks... or just a big one).
fn open_all(bytes: Vec<u8>, realize: bool) -> bool {
    let Ok(f) = GgufFile::from_bytes(bytes, "fuzz.gguf") else { return false };
    let mut built = Vec::new();
    for t in &f.tensors {
        let raw = f.raw(&t.name).expect("a listed tensor has its bytes");
        assert_eq!(Some(raw.len()), t.ggml_type.nbytes(t.numel()));
        if let Ok(x) = f.tensor(&t.name, "CPU") {
            assert_eq!(x.shape(), t.shape);
            // (a tensor of no values whose other dims pass i32 panics in the CPU launcher when realized, a bug of
            // the runtime's, so those are only built)
            if x.numel() > 0 {
                built.push(x);
            }
        }
    }
    if realize && built.iter().map(Tensor::numel).sum::<usize>() <= 1 << 16 {
        Tensor::realize_all(&built.iter().collect::<Vec<_>>()).unwrap();
    }
    true
}

#[test]
fn fuzzed_files_never_panic() {
    let start = std::time::Instant::now();
    let good = std::fs::read(data("small.gguf")).unwrap();
    assert!(open_all(good.clone(), true));
    let mut rng = StdRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
    let (mut cases, mut opened) = (0, 0);
    // every truncation
    for n in 0..good.len() {
        opened += open_all(good[..n].to_vec(), false) as usize;
        cases += 1;
    }
    let huge: [u64; 8] = [u64::MAX, u64::MAX / 2, 1 << 63, 1 << 32, u32::MAX as u64, 1 << 40, good.len() as u64, good.len() as u64 + 1];
    for i in 0..30_000 {
        let mut b = good.clone();
        match rng.random_range(0..4) {
            // random byte flips
            0 => (0..1 + rng.random_range(0..8)).for_each(|_| {
                let i = rng.random_range(0..b.len());
                b[i] ^= 1 << rng.random_range(0..8);
            }),
            // a huge or boundary u64 patched in at any offset (counts, lengths, dims, offsets)
            1 => {
                let i = rng.random_range(0..b.len() - 8);
                b[i..i + 8].copy_from_slice(&huge[rng.random_range(0..huge.len())].to_le_bytes());
            }
            // a random u32 (types, dim counts, versions)
            2 => {
                let i = rng.random_range(0..b.len() - 4);
                let v = [rng.random::<u32>(), rng.random_range(0..64) as u32, u32::MAX][rng.random_range(0..3)];
                b[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            // flips, then a truncation
            _ => {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random::<u8>();
                b.truncate(rng.random_range(0..b.len() + 1));
            }
        }
        // the first opened cases are computed too (a new shape compiles a kernel: keep it few)
        opened += open_all(b, i < 1000) as usize;
        cases += 1;
    }
    eprintln!("fuzz: {cases} cases, {opened} opened, {:?}", start.elapsed());
    assert!(cases > 30_000 && opened > 1000, "{cases} cases, {opened} opened");
}

#[test]
fn real_models_dequantize_like_gguf_py() {
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(data("vectors/models.json")).unwrap()).unwrap();
    for (file, arch, count) in [("SmolLM2-135M-Instruct.Q4_1.gguf", "llama", 272), ("gemma-3-270m-q4_k_m.gguf", "gemma3", 236)] {
        let path = tinygrad::llm::models_dir().join(file);
        if !path.exists() {
            assert!(std::env::var_os("CI").is_none(), "{} is missing (CI must provide it)", path.display());
            eprintln!("skipping {file}: {} is absent", path.display());
            continue;
        }
        let f = GgufFile::open(&path).unwrap();
        assert_eq!(f.metadata["general.architecture"].as_str(), Some(arch));
        assert_eq!(f.tensors.len(), count);
        assert_eq!(json[file]["tensor_count"], count);
        if arch == "llama" {
            assert_eq!(f.metadata["llama.embedding_length"].as_u64(), Some(576));
        }
        let mut types = Vec::new();
        for c in json[file]["checks"].as_array().unwrap() {
            let (name, ty) = (c["tensor"].as_str().unwrap(), c["type"].as_str().unwrap());
            let info = f.info(name).unwrap();
            assert_eq!(info.ggml_type.name(), ty);
            let shape: Vec<usize> = c["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            assert_eq!(info.shape, shape, "{name}");
            let (row, col) = (c["row"].as_u64().unwrap() as usize, c["col"].as_u64().unwrap() as usize);
            let want: Vec<f32> = c["values"].as_str().unwrap().split(' ').map(|v| v.parse().unwrap()).collect();
            let last = *shape.last().unwrap();
            let t = f.tensor(name, "CPU").unwrap().reshape([info.numel() / last, last]);
            let got = t.shrink(&[(row, row + 1), (col, col + want.len())]).to_vec::<f32>().unwrap();
            // FMA contraction may round the affine types' `d*q - m` once where numpy rounds twice: allow a few
            // float32 spacings of the largest value in the window
            let amax = want.iter().fold(0f32, |a, v| a.max(v.abs()));
            let tol = if matches!(ty, "Q4_1" | "Q5_1" | "Q4_K" | "Q5_K") { 8.0 * f32::EPSILON * amax } else { 0.0 };
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                check_close(&format!("{file} {name} row {row} col {col}"), i, g, w, tol);
            }
            types.push(ty);
        }
        eprintln!("{file}: checked {types:?}");
    }
}
