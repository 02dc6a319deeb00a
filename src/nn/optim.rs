//! Optimizers (tinygrad `nn/optim.py`): SGD and Muon are LARS variants, Adam and AdamW are LAMB variants. The
//! learning rate lives in a tensor; `step` assigns every update and realizes them all in one schedule. Steps
//! need training mode (TRAINING=1, e.g. `Context::new(&[(&TRAINING, 1)])`), as in tinygrad 0.14.

use crate::dtype::dtypes;
use crate::error::Result;
use crate::helpers::TRAINING;
use crate::Tensor;

/// The update rule.
#[derive(Clone, Debug)]
enum Rule {
    /// LARS: trust ratio `tcoef` (0: plain SGD), Newton-Schulz orthogonalization when `ns` is set (Muon).
    Lars { momentum: f64, wd: f64, nesterov: bool, classic: bool, pre_wd: bool, tcoef: f64, ns: Option<(usize, Vec<f64>)> },
    /// LAMB: Adam moments; `adam` skips the trust ratio (Adam, AdamW).
    Lamb { b1: f64, b2: f64, eps: f64, wd: f64, adam: bool },
}

/// An optimizer over a list of parameters (tinygrad `Optimizer`).
pub struct Optimizer {
    /// The tensors it updates (their `requires_grad` is set).
    pub params: Vec<Tensor>,
    /// Tensors passed in that are not parameters (`is_param` false, e.g. running statistics): realized by
    /// each step, never updated.
    pub buffers: Vec<Tensor>,
    /// The learning rate, a 1-element float32 tensor (assign to it to schedule the rate).
    pub lr: Tensor,
    rule: Rule,
    /// Per-parameter state: momentum (LARS) or first and second moments (LAMB).
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    /// LAMB's running `b1^t` and `b2^t`.
    bt: Vec<Tensor>,
}

/// Float32 zeros of `t`'s shape in a buffer of their own (assigned in place by each step); device memory comes at
/// the first step, so building an optimizer cannot fail.
fn zeros_like_f32(t: &Tensor) -> Tensor {
    Tensor::from_slice(&vec![0f32; t.numel()], t.shape()).shard_like(t)
}

fn buffer(v: f32) -> Tensor {
    Tensor::from_slice(&[v], [1])
}

impl Optimizer {
    fn new(all: &[Tensor], lr: f64, rule: Rule) -> Optimizer {
        assert!(lr >= 0.0, "Optimizer: invalid learning rate {lr}");
        let (params, buffers): (Vec<Tensor>, Vec<Tensor>) = all.iter().cloned().partition(|t| t.is_param());
        let params = &params[..];
        assert!(!params.is_empty(), "Optimizer: no parameters");
        params.iter().for_each(|p| {
            p.requires_grad_(true);
        });
        let (m, v, bt) = match &rule {
            Rule::Lars { momentum, .. } => {
                (if *momentum != 0.0 { params.iter().map(zeros_like_f32).collect() } else { vec![] }, vec![], vec![])
            }
            Rule::Lamb { .. } => {
                (params.iter().map(zeros_like_f32).collect(), params.iter().map(zeros_like_f32).collect(), vec![buffer(1.0), buffer(1.0)])
            }
        };
        Optimizer { params: params.to_vec(), buffers, lr: buffer(lr as f32), rule, m, v, bt }
    }

    /// Clears every parameter's gradient (tinygrad `zero_grad`).
    pub fn zero_grad(&self) {
        self.params.iter().for_each(|p| p.set_grad(None));
    }

    /// Assigns every update and returns the tensors to realize: the parameters and the optimizer state
    /// (tinygrad `schedule_step`).
    ///
    /// # Panics
    /// If not in training mode, or a parameter has no gradient.
    pub fn schedule_step(&self) -> Vec<Tensor> {
        assert!(
            TRAINING.value() != 0,
            "TRAINING={}: the optimizer needs training mode; use Context::new(&[(&TRAINING, 1)])",
            TRAINING.value()
        );
        let lr = &self.lr;
        if let Rule::Lamb { b1, b2, .. } = &self.rule {
            self.bt[0].assign(&self.bt[0] * *b1);
            self.bt[1].assign(&self.bt[1] * *b2);
        }
        for (i, t) in self.params.iter().enumerate() {
            let g = t.grad().unwrap_or_else(|| panic!("step: parameter {i} {:?} has no gradient; call backward first", t.shape()));
            let td = t.detach();
            let up = match &self.rule {
                Rule::Lars { momentum, wd, nesterov, classic, pre_wd, tcoef, ns } => {
                    let r = if *tcoef != 0.0 {
                        let (r1, r2) = (td.square().sum(..).sqrt(), g.square().sum(..).sqrt());
                        r1.gt(0.0).where_(r2.gt(0.0).where_(&r1 * *tcoef / (&r2 + &r1 * *wd), 1.0), 1.0)
                    } else {
                        Tensor::full_dtype((), 1.0, dtypes::FLOAT32)
                    };
                    let mut g = if *pre_wd && *wd > 0.0 { &g + &td * *wd } else { g };
                    if *classic {
                        g = &g * &r * lr;
                    }
                    if *momentum != 0.0 {
                        self.m[i].assign(&self.m[i] * *momentum + &g);
                        g = if *nesterov { &g + &self.m[i] * *momentum } else { self.m[i].clone() };
                    }
                    if let Some((steps, coefs)) = ns {
                        let shape = g.shape();
                        g = newton_schulz(&g.reshape([shape[0] as i64, -1]), *steps, coefs).reshape(shape);
                    }
                    if !*classic {
                        g = &g * &r * lr;
                    }
                    if !*pre_wd && *wd > 0.0 {
                        g = &g + &td * *wd * lr;
                    }
                    g
                }
                Rule::Lamb { b1, b2, eps, wd, adam } => {
                    self.m[i].assign(&self.m[i] * *b1 + &g * (1.0 - b1));
                    self.v[i].assign(&self.v[i] * *b2 + (&g * &g) * (1.0 - b2));
                    let m_hat = &self.m[i] / (1.0 - &self.bt[0]);
                    let v_hat = &self.v[i] / (1.0 - &self.bt[1]);
                    let up = m_hat / (v_hat.sqrt() + *eps) + &td * *wd;
                    let r = if *adam {
                        Tensor::full_dtype((), 1.0, dtypes::FLOAT32)
                    } else {
                        let (r1, r2) = (td.square().sum(..).sqrt(), up.square().sum(..).sqrt());
                        r1.gt(0.0).where_(r2.gt(0.0).where_(&r1 / &r2, 1.0), 1.0)
                    };
                    lr * &r * &up
                }
            };
            t.assign(&td - up.cast(t.dtype()));
        }
        self.params.iter().chain(&self.m).chain(&self.v).chain(&self.bt).chain(&self.buffers).cloned().collect()
    }

    /// One optimization step, realized as one schedule (tinygrad `step`).
    ///
    /// # Errors
    /// If a kernel fails to compile or run.
    ///
    /// # Panics
    /// As [`Optimizer::schedule_step`].
    pub fn step(&self) -> Result<()> {
        let ts = self.schedule_step();
        Tensor::realize_all(&ts.iter().collect::<Vec<_>>())
    }
}

/// `g` orthogonalized by `steps` Newton-Schulz iterations of the odd polynomial with coefficients `coefs`
/// (tinygrad `newton_schulz`): each step is `sum_i coefs[i] * (G G^T)^i G`, on `G` scaled to unit norm.
fn newton_schulz(g: &Tensor, steps: usize, coefs: &[f64]) -> Tensor {
    let s = g.shape();
    if s[s.len() - 2] > s[s.len() - 1] {
        return newton_schulz(&g.transpose(-2, -1), steps, coefs).transpose(-2, -1);
    }
    let mut g = g.div(g.square().sum_keepdim([-2, -1]).sqrt() + 1e-7);
    for _ in 0..steps {
        let gg = g.matmul(&g.transpose(-2, -1));
        let mut term = g.clone();
        let mut acc = &term * coefs[0];
        for &c in &coefs[1..] {
            term = gg.matmul(&term);
            acc = acc + &term * c;
        }
        g = acc;
    }
    g
}

/// SGD with momentum, Nesterov and weight decay (tinygrad `SGD`: LARS without the trust ratio). tinygrad's
/// defaults: `lr=0.001, momentum=0, weight_decay=0, nesterov=false, classic=false`.
pub fn sgd(params: &[Tensor], lr: f64, momentum: f64, weight_decay: f64, nesterov: bool, classic: bool) -> Optimizer {
    Optimizer::new(params, lr, Rule::Lars { momentum, wd: weight_decay, nesterov, classic, pre_wd: true, tcoef: 0.0, ns: None })
}

/// LARS (tinygrad `LARS`; defaults `lr=0.001, momentum=0.9, weight_decay=1e-4, nesterov=false, classic=true,
/// tcoef=0.001`).
pub fn lars(params: &[Tensor], lr: f64, momentum: f64, weight_decay: f64, nesterov: bool, classic: bool, tcoef: f64) -> Optimizer {
    Optimizer::new(params, lr, Rule::Lars { momentum, wd: weight_decay, nesterov, classic, pre_wd: true, tcoef, ns: None })
}

/// Muon: momentum, then Newton-Schulz orthogonalization, then decoupled weight decay (tinygrad `Muon`; defaults
/// `lr=0.001, momentum=0.95, weight_decay=0.1, ns_steps=5, coefficients (3.4445, -4.775, 2.0315), nesterov`).
pub fn muon(
    params: &[Tensor],
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    ns_steps: usize,
    ns_coefficients: &[f64],
    nesterov: bool,
) -> Optimizer {
    let ns = Some((ns_steps, ns_coefficients.to_vec()));
    Optimizer::new(params, lr, Rule::Lars { momentum, wd: weight_decay, nesterov, classic: false, pre_wd: false, tcoef: 0.0, ns })
}

/// Adam (tinygrad `Adam`; defaults `lr=0.001, b1=0.9, b2=0.999, eps=1e-8`).
pub fn adam(params: &[Tensor], lr: f64, b1: f64, b2: f64, eps: f64) -> Optimizer {
    Optimizer::new(params, lr, Rule::Lamb { b1, b2, eps, wd: 0.0, adam: true })
}

/// AdamW (tinygrad `AdamW`; defaults `lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01`).
pub fn adamw(params: &[Tensor], lr: f64, b1: f64, b2: f64, eps: f64, weight_decay: f64) -> Optimizer {
    Optimizer::new(params, lr, Rule::Lamb { b1, b2, eps, wd: weight_decay, adam: true })
}

/// LAMB (tinygrad `LAMB`; defaults `lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0`).
pub fn lamb(params: &[Tensor], lr: f64, b1: f64, b2: f64, eps: f64, weight_decay: f64) -> Optimizer {
    Optimizer::new(params, lr, Rule::Lamb { b1, b2, eps, wd: weight_decay, adam: false })
}

/// SGD's hyperparameters, with tinygrad's defaults (`SGD(params, lr=0.001, momentum=0.0, weight_decay=0.0,
/// nesterov=False, classic=False)`): `optim::sgd_with(&params, SgdOpts { lr: 0.1, ..Default::default() })`.
#[derive(Clone, Debug)]
pub struct SgdOpts {
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    pub classic: bool,
}
impl Default for SgdOpts {
    fn default() -> Self {
        SgdOpts { lr: 0.001, momentum: 0.0, weight_decay: 0.0, nesterov: false, classic: false }
    }
}
/// [`sgd`] from [`SgdOpts`].
pub fn sgd_with(params: &[Tensor], o: SgdOpts) -> Optimizer {
    sgd(params, o.lr, o.momentum, o.weight_decay, o.nesterov, o.classic)
}

/// Adam/AdamW/LAMB hyperparameters with tinygrad's Adam defaults (`lr=0.001, b1=0.9, b2=0.999, eps=1e-8`,
/// no weight decay); AdamW's default weight decay is 0.01, LAMB's eps 1e-6.
#[derive(Clone, Debug)]
pub struct AdamOpts {
    pub lr: f64,
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}
impl Default for AdamOpts {
    fn default() -> Self {
        AdamOpts { lr: 0.001, b1: 0.9, b2: 0.999, eps: 1e-8, weight_decay: 0.0 }
    }
}
/// [`adam`] from [`AdamOpts`] (its weight decay is ignored, as Adam has none).
pub fn adam_with(params: &[Tensor], o: AdamOpts) -> Optimizer {
    adam(params, o.lr, o.b1, o.b2, o.eps)
}
/// [`adamw`] from [`AdamOpts`]; tinygrad's AdamW defaults are `AdamOpts { weight_decay: 0.01, ..Default::default() }`.
pub fn adamw_with(params: &[Tensor], o: AdamOpts) -> Optimizer {
    adamw(params, o.lr, o.b1, o.b2, o.eps, o.weight_decay)
}
/// [`lamb`] from [`AdamOpts`]; tinygrad's LAMB defaults are `AdamOpts { eps: 1e-6, ..Default::default() }`.
pub fn lamb_with(params: &[Tensor], o: AdamOpts) -> Optimizer {
    lamb(params, o.lr, o.b1, o.b2, o.eps, o.weight_decay)
}

/// LARS hyperparameters with tinygrad's defaults (`lr=0.001, momentum=0.9, weight_decay=1e-4,
/// nesterov=False, classic=True, tcoef=0.001`).
#[derive(Clone, Debug)]
pub struct LarsOpts {
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    pub classic: bool,
    pub tcoef: f64,
}
impl Default for LarsOpts {
    fn default() -> Self {
        LarsOpts { lr: 0.001, momentum: 0.9, weight_decay: 1e-4, nesterov: false, classic: true, tcoef: 0.001 }
    }
}
/// [`lars`] from [`LarsOpts`].
pub fn lars_with(params: &[Tensor], o: LarsOpts) -> Optimizer {
    lars(params, o.lr, o.momentum, o.weight_decay, o.nesterov, o.classic, o.tcoef)
}

/// Muon hyperparameters with tinygrad's defaults (`lr=0.001, momentum=0.95, weight_decay=0.1, ns_steps=5,
/// ns_coefficients=(3.4445, -4.775, 2.0315), nesterov=True`).
#[derive(Clone, Debug)]
pub struct MuonOpts {
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub ns_steps: usize,
    pub ns_coefficients: Vec<f64>,
    pub nesterov: bool,
}
impl Default for MuonOpts {
    fn default() -> Self {
        MuonOpts {
            lr: 0.001,
            momentum: 0.95,
            weight_decay: 0.1,
            ns_steps: 5,
            ns_coefficients: vec![3.4445, -4.775, 2.0315],
            nesterov: true,
        }
    }
}
/// [`muon`] from [`MuonOpts`].
pub fn muon_with(params: &[Tensor], o: MuonOpts) -> Optimizer {
    muon(params, o.lr, o.momentum, o.weight_decay, o.ns_steps, &o.ns_coefficients, o.nesterov)
}
