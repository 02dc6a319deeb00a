//! Tensor ops: random numbers (tinygrad `mixin/rand.py` and the RNG state in `tensor.py`). Bits come from
//! counter-based Threefry-2x32 computed on the device by uint32 tensor ops, so a draw is lazy and the same
//! `(seed, counter)` gives the same bits as tinygrad.

use super::{Index, IntoShape, Tensor};
use crate::dtype::{dtypes, DType};
use crate::engine;
use crate::uop::{Ops, UOp};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// Options of the random constructors (tinygrad's `dtype=`, `device=`, `contiguous=` keywords).
#[derive(Clone, Debug)]
pub struct RandOpts {
    /// Element dtype; `None` is the op's default (float32 for floats, int32 for `randint`/`randperm`).
    pub dtype: Option<DType>,
    /// Device; `None` is the default device.
    pub device: Option<String>,
    /// Whether `rand` realizes into its own buffer (tinygrad `contiguous=True`).
    pub contiguous: bool,
}
impl Default for RandOpts {
    fn default() -> Self {
        RandOpts { dtype: None, device: None, contiguous: true }
    }
}
impl From<DType> for RandOpts {
    fn from(dtype: DType) -> Self {
        RandOpts::default().dtype(dtype)
    }
}
impl RandOpts {
    /// With element dtype `dtype`.
    pub fn dtype(self, dtype: DType) -> Self {
        RandOpts { dtype: Some(dtype), ..self }
    }
    /// On device `device`.
    pub fn device(self, device: &str) -> Self {
        RandOpts { device: Some(device.to_uppercase()), ..self }
    }
    /// Whether `rand` realizes into its own buffer.
    pub fn contiguous(self, contiguous: bool) -> Self {
        RandOpts { contiguous, ..self }
    }
    fn device_or_default(&self) -> String {
        self.device.clone().unwrap_or_else(super::default_device)
    }
}

/// The RNG state (tinygrad `Tensor._seed`, `_device_seeds`, `_device_rng_counters`): the seed and, per device in
/// order of first use, the key buffer and the number of 32-bit words drawn so far (a host-side 64-bit counter).
struct Rng {
    seed: Option<u64>,
    devices: Vec<(String, Tensor, u64)>,
}
static RNG: Mutex<Rng> = Mutex::new(Rng { seed: None, devices: Vec::new() });

/// The last 32-bit word of SHA-256 of `msg`: the low bits of tinygrad's `int.from_bytes(sha256(...).digest(), "big")`.
fn sha256_low32(msg: &[u8]) -> u32 {
    let digest = Sha256::digest(msg);
    u32::from_be_bytes(digest[28..].try_into().expect("a SHA-256 digest is 32 bytes"))
}

/// A uint32 tensor on `device` holding `data`.
fn u32_buffer(data: &[u32], device: &str) -> Tensor {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    Tensor::from_uop(engine::buffer_from_bytes(&bytes, dtypes::UINT32, data.len(), device))
}

/// tinygrad `_threefry_random_bits`: each pair of counts packed into a uint64 `counts1 << 32 | counts0` and hashed
/// by one THREEFRY op (Threefry-2x32, 20 rounds) under the uint64 key `key[1] << 32 | key[0]`; the low words of
/// every result, then the high words. THREEFRY stays one node through scheduling and optimization: codegen
/// decomposes it into uint32 ops where the renderer lacks it.
fn threefry_random_bits(key: &Tensor, counts0: &Tensor, counts1: &Tensor) -> Tensor {
    let wide = |t: &Tensor| t.cast(dtypes::UINT64);
    let x = wide(counts1).lshift(32).bitwise_or(wide(counts0));
    let word = |i| wide(&key.getitem(&[Index::Int(i)]));
    let bits = x.int_binop(Ops::THREEFRY, word(1).lshift(32).bitwise_or(word(0)), "threefry");
    let lo = bits.bitwise_and(0xffff_ffffi64).cast(dtypes::UINT32);
    let hi = bits.rshift(32).bitwise_and(0xffff_ffffi64).cast(dtypes::UINT32);
    lo.cat(&[&hi], 0)
}

/// `num` random uint32 words for the draw at `counter` under `key` (tinygrad `random_bits`): each chunk of up to
/// `u32::MAX` words derives a key from its counter, then hashes `arange` under it.
fn random_bits(key: &Tensor, counter: u64, num: usize, device: &str) -> Tensor {
    let mut counters = Vec::new();
    let chunks: Vec<Tensor> = (0..num)
        .step_by(u32::MAX as usize)
        .map(|i| {
            let n = (num - i).min(u32::MAX as usize);
            let c = counter.wrapping_add(i as u64);
            let c = u32_buffer(&[c as u32, (c >> 32) as u32], device);
            counters.push((c.uop(), i as u64));
            let new_key = threefry_random_bits(key, &c.shrink(&[(0, 1)]), &c.shrink(&[(1, 2)]));
            let half = n.div_ceil(2);
            let counts0 = Tensor::arange(0.0, half as f64, 1.0).cast(dtypes::UINT32);
            let counts1 = counts0.add(half as i64);
            threefry_random_bits(&new_key, &counts0, &counts1).shrink(&[(0, n)])
        })
        .collect();
    record(Draw { device: device.to_string(), num, counters });
    match chunks.split_first() {
        Some((first, rest)) => first.cat(&rest.iter().collect::<Vec<_>>(), 0),
        None => Tensor::full_dtype([0], 0, dtypes::UINT32),
    }
}

/// One draw's counters: the buffers holding each chunk's counter (the draw's counter plus the chunk's first word),
/// and the draw's device and size, so a TinyJit replay can give the draw the next counter.
#[derive(Clone)]
pub(crate) struct Draw {
    device: String,
    num: usize,
    counters: Vec<(UOp, u64)>,
}

thread_local! {
    /// The draws made while a TinyJit captures on this thread (`None` when none captures).
    static RECORDED: std::cell::RefCell<Option<Vec<Draw>>> = const { std::cell::RefCell::new(None) };
}

fn record(d: Draw) {
    RECORDED.with(|r| r.borrow_mut().as_mut().map(|v| v.push(d)));
}

/// Starts recording the draws this thread makes (a TinyJit capture); returns the enclosing capture's record.
pub(crate) fn start_recording() -> Option<Vec<Draw>> {
    RECORDED.with(|r| r.borrow_mut().replace(Vec::new()))
}

/// Ends the recording [`start_recording`] began and returns its draws; they also go to the enclosing capture's
/// record (`outer`), whose replays must refresh them too.
pub(crate) fn stop_recording(outer: Option<Vec<Draw>>) -> Vec<Draw> {
    RECORDED.with(|r| {
        let mut r = r.borrow_mut();
        let mine = r.take().unwrap_or_default();
        *r = outer.map(|mut o| {
            o.extend(mine.iter().cloned());
            o
        });
        mine
    })
}

/// Gives a captured draw the next counter of its device (as drawing it again would), written into its counter
/// buffers before a replay; recorded again if a capture is open (a replay inside an outer capture).
///
/// # Errors
/// If the device fails to write the buffers.
pub(crate) fn redraw(d: &Draw) -> crate::Result<()> {
    let counter = next_counter(&d.device, d.num).1;
    for (buf, i) in &d.counters {
        let c = counter.wrapping_add(*i);
        engine::copyin(buf, &[(c as u32).to_le_bytes(), ((c >> 32) as u32).to_le_bytes()].concat())?;
    }
    record(d.clone());
    Ok(())
}

/// The key of `device` and the counter before a draw of `num` words, advancing the counter (tinygrad
/// `_next_counter`). A device's key is `[low word of sha256(index of the device), seed]`.
fn next_counter(device: &str, num: usize) -> (Tensor, u64) {
    let mut rng = RNG.lock();
    let seed = *rng.seed.get_or_insert_with(|| match crate::helpers::getenv("SEED", -1) {
        s if s >= 0 => s as u64,
        _ => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    });
    let i = match rng.devices.iter().position(|(d, ..)| d == device) {
        Some(i) => i,
        None => {
            let k0 = sha256_low32(&(rng.devices.len() as u32).to_be_bytes());
            rng.devices.push((device.to_string(), u32_buffer(&[k0, seed as u32], device), 0));
            rng.devices.len() - 1
        }
    };
    let (_, key, counter) = &mut rng.devices[i];
    let old = *counter;
    *counter = old.wrapping_add(num as u64);
    (key.clone(), old)
}

/// Mantissa bits and the unsigned dtype of the same size, of a float dtype.
fn float_layout(dtype: DType) -> (i64, DType) {
    match dtype {
        dtypes::FLOAT16 => (10, dtypes::UINT16),
        dtypes::BFLOAT16 => (7, dtypes::UINT16),
        dtypes::FLOAT32 => (23, dtypes::UINT32),
        dtypes::FLOAT64 => (52, dtypes::UINT64),
        _ => panic!("rand only supports concrete float dtypes, got {dtype}"),
    }
}

/// The uint32 words `bits` (an even count for 8-byte `udt`) read as `n` unsigned ints of `udt`'s size, little-endian
/// (tinygrad `bits.bitcast(udt)`).
fn words_as(bits: &Tensor, udt: DType, n: usize) -> Tensor {
    let m = bits.numel();
    let u = match udt.itemsize() {
        4 => bits.clone(),
        2 => {
            let (lo, hi) = (bits.bitwise_and(0xFFFF).cast(udt), bits.rshift(16).cast(udt));
            lo.reshape([m, 1]).cat(&[&hi.reshape([m, 1])], 1).reshape([2 * m])
        }
        _ => {
            let pairs = bits.reshape([m / 2, 2]).cast(udt);
            pairs.getitem(&[(..).into(), Index::Int(1)]).lshift(32).bitwise_or(pairs.getitem(&[(..).into(), Index::Int(0)]))
        }
    };
    u.shrink(&[(0, n)])
}

impl Tensor {
    /// Sets the seed of all random ops and restarts their counters (tinygrad `Tensor.manual_seed`). Only the low
    /// 32 bits of `seed` are used, as in tinygrad. Without a call the seed is `SEED` from the environment where
    /// set, else the time at first use.
    pub fn manual_seed(seed: u64) {
        *RNG.lock() = Rng { seed: Some(seed), devices: Vec::new() };
    }

    /// Uniform samples in `[0, 1)` of float32 (tinygrad `Tensor.rand`). Each call advances the RNG counter.
    pub fn rand(shape: impl IntoShape) -> Tensor {
        Tensor::rand_with(shape, RandOpts::default())
    }
    /// Uniform samples in `[0, 1)` of `opts.dtype` (default float32) on `opts.device` (tinygrad `Tensor.rand`): the
    /// top mantissa bits of random words under the exponent of 1.0, minus 1.
    ///
    /// # Panics
    /// If the dtype is not float16, bfloat16, float32 or float64.
    pub fn rand_with(shape: impl IntoShape, opts: impl Into<RandOpts>) -> Tensor {
        let opts: RandOpts = opts.into();
        let shape = shape.into_shape();
        let dtype = opts.dtype.unwrap_or(dtypes::DEFAULT_FLOAT);
        let (nmant, udt) = float_layout(dtype);
        let device = opts.device_or_default();
        // (a sharded tensor's devices: drawn on the first, then a copy on each)
        if let Some((first, _)) = device.split_once(',') {
            return Tensor::rand_with(shape, RandOpts { device: Some(first.to_string()), ..opts }).to(&device);
        }
        let numel: usize = shape.iter().product();
        let num = (numel * dtype.itemsize()).div_ceil(4);
        let (key, counter) = next_counter(&device, num);
        let one = crate::dtype::ConstValue::Float(1.0).to_bits(dtype);
        let u = words_as(&random_bits(&key, counter, num, &device), udt, numel);
        let out = u.rshift(dtype.bitsize() as i64 - nmant).bitwise_or(one as i64).bitcast(dtype).sub(1).reshape(shape);
        if opts.contiguous {
            out.contiguous()
        } else {
            out
        }
    }
    /// `rand` of `self`'s shape, dtype and device (tinygrad `rand_like`).
    pub fn rand_like(&self) -> Tensor {
        self.rand_like_with(RandOpts::default())
    }
    /// `rand` of `self`'s shape; dtype and device from `opts`, else `self`'s.
    pub fn rand_like_with(&self, opts: impl Into<RandOpts>) -> Tensor {
        let opts: RandOpts = opts.into();
        let opts = RandOpts { dtype: opts.dtype.or(Some(self.dtype())), device: opts.device.or_else(|| Some(self.device())), ..opts };
        Tensor::rand_with(self.shape(), opts)
    }

    /// Standard normal samples of float32 (tinygrad `Tensor.randn`).
    pub fn randn(shape: impl IntoShape) -> Tensor {
        Tensor::randn_with(shape, RandOpts::default())
    }
    /// Standard normal samples of `opts.dtype` (default float32) by the Box-Muller transform of two float32 uniform
    /// draws (tinygrad `Tensor.randn`).
    pub fn randn_with(shape: impl IntoShape, opts: impl Into<RandOpts>) -> Tensor {
        let opts: RandOpts = opts.into();
        let shape = shape.into_shape();
        let dtype = opts.dtype.unwrap_or(dtypes::DEFAULT_FLOAT);
        let src = Tensor::rand_with([vec![2], shape].concat(), RandOpts { dtype: Some(dtypes::FLOAT32), ..opts });
        let (u0, u1) = (src.getitem(&[Index::Int(0)]), src.getitem(&[Index::Int(1)]));
        u0.mul(2.0 * std::f64::consts::PI).cos().mul(u1.neg().add(1).log().mul(-2).sqrt()).cast(dtype)
    }
    /// `randn` of `self`'s shape and device, cast to `self`'s dtype (tinygrad `randn_like`).
    pub fn randn_like(&self) -> Tensor {
        Tensor::randn_with(self.shape(), RandOpts::default().dtype(self.dtype()).device(&self.device()))
    }

    /// Uniform samples in `[low, high)` of float32 (tinygrad `Tensor.uniform`).
    pub fn uniform(shape: impl IntoShape, low: f64, high: f64) -> Tensor {
        Tensor::uniform_with(shape, low, high, RandOpts::default())
    }
    /// Uniform samples in `[low, high)`: `(high-low) * rand` (float32) cast to `opts.dtype` (default float32),
    /// plus `low` (tinygrad `Tensor.uniform`).
    ///
    /// # Panics
    /// If `low >= high`.
    pub fn uniform_with(shape: impl IntoShape, low: f64, high: f64, opts: impl Into<RandOpts>) -> Tensor {
        let opts: RandOpts = opts.into();
        assert!(low < high, "uniform: requires low < high, got low={low}, high={high}");
        let dtype = opts.dtype.unwrap_or(dtypes::DEFAULT_FLOAT);
        let r = Tensor::rand_with(shape, RandOpts { dtype: None, ..opts }).mul(high - low).cast(dtype);
        if dtype.is_float() {
            r.add(low)
        } else {
            r.add(low as i64)
        }
    }
    /// Uniform integers in `[low, high)` of int32 (tinygrad `Tensor.randint`).
    pub fn randint(shape: impl IntoShape, low: i64, high: i64) -> Tensor {
        Tensor::randint_with(shape, low, high, RandOpts::default())
    }
    /// Uniform integers in `[low, high)` of `opts.dtype` (default int32), as `uniform` cast to it (tinygrad
    /// `Tensor.randint`).
    ///
    /// # Panics
    /// If `low >= high` or the dtype is not an int.
    pub fn randint_with(shape: impl IntoShape, low: i64, high: i64, opts: impl Into<RandOpts>) -> Tensor {
        let opts: RandOpts = opts.into();
        let dtype = opts.dtype.unwrap_or(dtypes::INT32);
        assert!(dtype.is_int(), "randint: dtype {dtype} must be int");
        assert!(low < high, "randint: requires low < high, got low={low}, high={high}");
        Tensor::uniform_with(shape, low as f64, high as f64, opts.dtype(dtype))
    }
    /// Normal samples with `mean` and standard deviation `std` (tinygrad `Tensor.normal`).
    pub fn normal(shape: impl IntoShape, mean: f64, std: f64) -> Tensor {
        Tensor::normal_with(shape, mean, std, RandOpts::default())
    }
    /// `std * randn + mean` with `opts` (tinygrad `Tensor.normal`).
    ///
    /// # Panics
    /// If `std < 0`.
    pub fn normal_with(shape: impl IntoShape, mean: f64, std: f64, opts: impl Into<RandOpts>) -> Tensor {
        assert!(std >= 0.0, "normal: requires std >= 0, got std={std}");
        Tensor::randn_with(shape, opts).mul(std).add(mean)
    }

    /// Uniform in `±1/sqrt(numel)` (tinygrad `Tensor.scaled_uniform`).
    pub fn scaled_uniform(shape: impl IntoShape, opts: impl Into<RandOpts>) -> Tensor {
        let shape = shape.into_shape();
        let n: usize = shape.iter().product();
        Tensor::uniform_with(shape, -1.0, 1.0, opts).mul((n as f64).powf(-0.5))
    }
    /// Uniform in `±sqrt(6 / (shape[0] + prod(shape[1..])))` (tinygrad `Tensor.glorot_uniform`).
    ///
    /// # Panics
    /// If `shape` is empty.
    pub fn glorot_uniform(shape: impl IntoShape, opts: impl Into<RandOpts>) -> Tensor {
        let shape = shape.into_shape();
        assert!(!shape.is_empty(), "glorot_uniform: needs a dim");
        let bound = (6.0 / (shape[0] + shape[1..].iter().product::<usize>()) as f64).sqrt();
        Tensor::uniform_with(shape, -bound, bound, opts)
    }
    /// Uniform in `±sqrt(6 / (1 + a²) / prod(shape[1..]))`, PyTorch's Kaiming init with negative slope `a`
    /// (tinygrad `Tensor.kaiming_uniform`, default `a = 0.01`).
    pub fn kaiming_uniform(shape: impl IntoShape, a: f64, opts: impl Into<RandOpts>) -> Tensor {
        let shape = shape.into_shape();
        let bound = (6.0 / (1.0 + a * a) / fan_in(&shape)).sqrt();
        Tensor::uniform_with(shape, -bound, bound, opts)
    }
    /// Normal with std `sqrt(2 / (1 + a²) / prod(shape[1..]))` (tinygrad `Tensor.kaiming_normal`, default
    /// `a = 0.01`).
    pub fn kaiming_normal(shape: impl IntoShape, a: f64, opts: impl Into<RandOpts>) -> Tensor {
        let shape = shape.into_shape();
        let std = (2.0 / (1.0 + a * a) / fan_in(&shape)).sqrt();
        Tensor::normal_with(shape, 0.0, std, opts)
    }

    /// A random permutation of `0..n` (tinygrad `Tensor.randperm`): the stable ascending order of `rand(n)`;
    /// dtype `opts.dtype` (default int32).
    pub fn randperm(n: usize, opts: impl Into<RandOpts>) -> Tensor {
        let opts: RandOpts = opts.into();
        let dtype = opts.dtype.unwrap_or(dtypes::INT32);
        Tensor::rand_with([n], RandOpts { dtype: None, ..opts }).argsort(-1, false).cast(dtype)
    }

    /// `num_samples` indices drawn with probabilities proportional to `self` (weights of shape `(n,)` or
    /// `(batch, n)`), int32 of shape `(num_samples,)` or `(batch, num_samples)` (tinygrad `multinomial`). With
    /// replacement (or one sample) by inverting the CDF at uniform draws; without, by Efraimidis-Spirakis keys
    /// `log2(u)/w` and their top `num_samples`.
    ///
    /// # Panics
    /// If `self` is not 1-D or 2-D, `num_samples` is 0, or without replacement it exceeds `n`.
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Tensor {
        let nd = self.ndim();
        assert!(
            (1..=2).contains(&nd) && num_samples > 0,
            "multinomial: weights of shape {:?} must be 1-D or 2-D, num_samples={num_samples} must be positive",
            self.shape()
        );
        let w = if nd == 1 { self.reshape([1, self.numel()]) } else { self.clone() };
        let (b, n) = (w.shape()[0], w.shape()[1]);
        assert!(replacement || num_samples <= n, "multinomial: {num_samples} samples without replacement from {n} weights");
        let indices = if replacement || num_samples == 1 {
            let cw = w.cumsum(1).cast(dtypes::FLOAT32);
            let cdf = cw.div(cw.shrink(&[(0, b), (n - 1, n)]));
            let unif = Tensor::rand_with([num_samples, b, 1], RandOpts::default().device(&self.device()));
            unif.ge(&cdf).sum(2).permute([1, 0])
        } else {
            let keys = w.rand_like_with(RandOpts::default().dtype(dtypes::FLOAT32)).log2().div(&w);
            keys.topk(num_samples, 1, true).1
        };
        (if nd == 1 { indices.reshape([num_samples]) } else { indices }).cast(dtypes::INT32)
    }

    /// Zeroes each element with probability `p` and scales the rest by `1/(1-p)`, only in training mode
    /// (`TRAINING` nonzero, tinygrad's `Context(TRAINING=1)`); otherwise `self` (tinygrad `dropout`).
    ///
    /// # Panics
    /// If `p` is not in `[0, 1]`.
    pub fn dropout(&self, p: f64) -> Tensor {
        assert!((0.0..=1.0).contains(&p), "dropout: p={p} is out of range [0, 1]");
        if crate::helpers::TRAINING.value() == 0 || p == 0.0 {
            return self.clone();
        }
        if p == 1.0 {
            return self.zeros_like();
        }
        let keep = self.rand_like_with(RandOpts::default().dtype(dtypes::DEFAULT_FLOAT).contiguous(false)).ge(p).contiguous();
        keep.where_(self, 0).div(1.0 - p)
    }
}

/// `prod(shape[1..])`, the fan-in of a weight.
fn fan_in(shape: &[usize]) -> f64 {
    shape.iter().skip(1).product::<usize>() as f64
}
