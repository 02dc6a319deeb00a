//! The interpreter device, `DEV=PYTHON` (tinygrad `runtime/ops_python.py`): it runs a kernel's linear UOps one by
//! one, with the constant folder's semantics ([`exec_alu`]: C's wrapping integers, floats rounded to their dtype
//! after every op), on host memory. No compiler: the "compiled" object is the listing the renderer printed, and the
//! program is the kernel's UOps. Slow, and strict: every access is bounds-checked against its buffer, so a codegen
//! bug that a C kernel would turn into a silent wrong value is an error here. Tests use it as the reference for
//! the other devices.

use super::{Allocator, Compiled, Compiler, CpuAllocator, Device, Program};
use crate::dtype::{ConstValue, DType};
use crate::error::{Error, Result};
use crate::renderer::LinearKernel;
use crate::renderer::Renderer;
use crate::uop::{exec_alu, Arg, GroupOp, Ops, UOp};
use rustc_hash::FxHashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

/// The interpreter device: host memory (the CPU's allocator), [`PythonCompiler`], [`PythonProgram`]s.
#[derive(Debug, Default)]
pub struct PythonDevice {
    allocator: CpuAllocator,
    compiler: PythonCompiler,
}

/// The process's interpreter device.
pub fn device() -> &'static PythonDevice {
    static PYTHON: LazyLock<PythonDevice> = LazyLock::new(PythonDevice::default);
    &PYTHON
}

impl Device for PythonDevice {
    fn name(&self) -> &'static str {
        "PYTHON"
    }
    fn launcher(&self) -> super::Launcher {
        super::Launcher::Interpreted
    }
    fn renderer(&self) -> Renderer {
        Renderer::python()
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn compiler(&self) -> Result<&dyn Compiler> {
        Ok(&self.compiler)
    }
    fn load(&self, k: &LinearKernel, _compiled: &Compiled) -> Result<Box<dyn Program>> {
        Ok(Box::new(PythonProgram::new(k)))
    }
}

/// The interpreter's compiler: the listing is the object (there is nothing to compile or cache).
#[derive(Debug, Default)]
pub struct PythonCompiler;

impl Compiler for PythonCompiler {
    fn compile(&self, name: &str, src: &str) -> Result<Compiled> {
        Ok(Compiled { object: src.as_bytes().into(), entry: name.to_string() })
    }
}

/// One UOp, decoded for the interpreter: sources by position.
#[derive(Debug)]
struct Inst {
    op: Ops,
    dtype: DType,
    src: Vec<usize>,
    arg: Arg,
}

/// A kernel's UOps, ready to interpret (tinygrad `PythonProgram`).
#[derive(Debug)]
pub struct PythonProgram {
    name: String,
    insts: Vec<Inst>,
    /// For each RANGE, the END that closes it.
    end_of: FxHashMap<usize, usize>,
    /// DEFINE_VARs by name: their position is their index in a launch's `vals`.
    vars: Vec<Arc<str>>,
    /// Whether each UOp is a LOAD from a register.
    reg_load: Vec<bool>,
}

/// Where an INDEX points: a kernel argument (by slot) or a register (by its DEFINE_REG's position), and the
/// element there, or nowhere when its gate is off.
#[derive(Clone, Copy, Debug)]
enum Ptr {
    Global(usize, i128),
    Reg(usize, i128),
    /// Workgroup memory, by its DEFINE_LOCAL's position.
    Local(usize, i128),
    Off,
}

/// One thread's state: every UOp's value, its registers, the element dtype and count of each argument, its open
/// loops, where it is, and its place in the grid (workgroup index, then index in the workgroup, per dimension).
struct Thread {
    v: Vec<Val>,
    regs: FxHashMap<usize, Vec<ConstValue>>,
    globals: FxHashMap<usize, (DType, usize)>,
    loops: Vec<Loop>,
    pc: usize,
    at: [usize; 6],
}

/// The value of one UOp.
#[derive(Clone, Debug)]
enum Val {
    /// Not computed yet, or no value (STORE, END).
    None,
    /// One lane; it broadcasts against vectors, as C's scalar operands do.
    Scalar(ConstValue),
    Vector(Vec<ConstValue>),
    Ptr(Ptr),
}

impl Val {
    fn lane(&self, i: usize) -> ConstValue {
        match self {
            Val::Scalar(v) => *v,
            Val::Vector(v) => v[i],
            _ => ConstValue::Invalid,
        }
    }
    fn lanes(&self) -> usize {
        if let Val::Vector(v) = self {
            v.len()
        } else {
            1
        }
    }
    fn of(mut lanes: Vec<ConstValue>) -> Val {
        if lanes.len() == 1 {
            Val::Scalar(lanes.pop().expect("one lane"))
        } else {
            Val::Vector(lanes)
        }
    }
}

/// An open loop: its RANGE's position, the current value and the end.
struct Loop {
    range: usize,
    i: i128,
    end: i128,
}

impl PythonProgram {
    /// The program for `k`.
    ///
    /// # Panics
    /// If a RANGE has no END (the linearizer always closes its loops).
    pub fn new(k: &LinearKernel) -> PythonProgram {
        let at: FxHashMap<&UOp, usize> = k.uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
        let insts: Vec<Inst> = k
            .uops
            .iter()
            .map(|u| Inst { op: u.op, dtype: u.dtype, src: u.src.iter().map(|s| at[s]).collect(), arg: u.arg.clone() })
            .collect();
        let mut end_of = FxHashMap::default();
        for (i, inst) in insts.iter().enumerate().filter(|(_, x)| x.op == Ops::END) {
            for &s in inst.src.iter().filter(|&&s| insts[s].op == Ops::RANGE) {
                end_of.insert(s, i);
            }
        }
        assert!(insts.iter().enumerate().all(|(i, x)| x.op != Ops::RANGE || end_of.contains_key(&i)), "{}: a RANGE without an END", k.name);
        let vars = k.vars.clone();
        let reg_load = insts
            .iter()
            .map(|x| x.op == Ops::LOAD && insts[x.src[0]].src.first().is_some_and(|&d| insts[d].op == Ops::DEFINE_REG))
            .collect();
        PythonProgram { name: k.name.clone(), insts, end_of, vars, reg_load }
    }

    fn err(&self, i: usize, msg: String) -> Error {
        Error::Device {
            device: "PYTHON".into(),
            msg: format!("kernel {} at uop %{i} ({}): {msg}; this is a codegen bug", self.name, self.insts[i].op),
        }
    }

    /// Runs thread `t` on until the next BARRIER (`Ok(false)`) or the kernel's end (`Ok(true)`); `locals` is its
    /// workgroup's memory.
    fn run(&self, bufs: &[*mut u8], vals: &[i32], t: &mut Thread, locals: &mut FxHashMap<usize, Vec<ConstValue>>) -> Result<bool> {
        let n = self.insts.len();
        let Thread { v, regs, globals, loops, at, .. } = t;
        let mut pc = t.pc;
        while pc < n {
            let x = &self.insts[pc];
            // a register is read where it is used (as the C renderer does), not where its LOAD stands
            for &j in &x.src {
                if self.reg_load[j] {
                    if let Val::Ptr(Ptr::Reg(r, o)) = v[self.insts[j].src[0]] {
                        v[j] = self.read_reg(j, regs, r, o, self.insts[j].dtype.count as usize)?;
                    }
                }
            }
            let s = |j: usize| &v[x.src[j]];
            let out = match x.op {
                Ops::DEFINE_GLOBAL => {
                    let Arg::Int(slot) = x.arg else { return Err(self.err(pc, "a DEFINE_GLOBAL without a slot".into())) };
                    let slot = slot as usize;
                    if slot >= bufs.len() {
                        return Err(self.err(pc, format!("argument {slot} of {}", bufs.len())));
                    }
                    globals.insert(slot, (x.dtype.base(), x.dtype.size.max(0) as usize));
                    Val::Ptr(Ptr::Global(slot, 0))
                }
                Ops::DEFINE_LOCAL => {
                    locals.entry(pc).or_insert_with(|| vec![ConstValue::Int(0); x.dtype.size.max(1) as usize]);
                    Val::Ptr(Ptr::Local(pc, 0))
                }
                Ops::BARRIER => {
                    t.pc = pc + 1;
                    return Ok(false);
                }
                // a warp-wide op: the thread waits here until its warp has arrived (see `wmma`)
                Ops::WMMA => {
                    t.pc = pc;
                    return Ok(false);
                }
                Ops::DEFINE_REG => {
                    let lanes = x.dtype.base().count as usize * x.dtype.size.max(1) as usize;
                    regs.insert(pc, vec![ConstValue::Int(0); lanes]);
                    Val::Ptr(Ptr::Reg(pc, 0))
                }
                Ops::DEFINE_VAR => {
                    let Arg::Var { name, .. } = &x.arg else { unreachable!("DEFINE_VAR without a name") };
                    let k = self.vars.iter().position(|v| v == name).expect("vars lists every DEFINE_VAR");
                    let val = *vals.get(k).ok_or_else(|| self.err(pc, format!("no value for variable {name}")))?;
                    Val::Scalar(ConstValue::Int(val.into()))
                }
                Ops::SPECIAL => {
                    let Arg::Str(name) = &x.arg else { unreachable!("SPECIAL without a name") };
                    let dim = usize::from(name.as_bytes()[name.len() - 1] - b'0');
                    Val::Scalar(ConstValue::Int(at[dim + if name.starts_with('l') { 3 } else { 0 }] as i128))
                }
                Ops::CONST => Val::Scalar(match x.arg {
                    Arg::Const(c) => c,
                    _ => unreachable!("CONST without a value"),
                }),
                Ops::RANGE => {
                    let end = s(0).lane(0).as_i128();
                    loops.push(Loop { range: pc, i: 0, end });
                    if end <= 0 {
                        // an empty loop: its END pops it without running the body
                        pc = self.end_of[&pc];
                        continue;
                    }
                    Val::Scalar(ConstValue::Int(0))
                }
                Ops::END => {
                    // (the loops this END closes that are open: inside an empty loop the inner ones never opened)
                    let mut closes = loops.iter().rev().take_while(|l| x.src.contains(&l.range)).count();
                    let mut jump = None;
                    while closes > 0 {
                        let l = loops.last_mut().expect("END closes an open loop");
                        l.i += 1;
                        if l.i < l.end {
                            v[l.range] = Val::Scalar(ConstValue::Int(l.i));
                            jump = Some(l.range + 1);
                            break;
                        }
                        loops.pop();
                        closes -= 1;
                    }
                    pc = jump.unwrap_or(pc + 1);
                    continue;
                }
                Ops::INDEX => {
                    let gate = x.src.get(2).is_none_or(|_| s(2).lane(0).as_bool());
                    let Val::Ptr(base) = s(0) else { return Err(self.err(pc, "INDEX of a non-pointer".into())) };
                    let off = s(1).lane(0);
                    match (gate, *base) {
                        (false, _) => Val::Ptr(Ptr::Off),
                        (true, _) if matches!(off, ConstValue::Invalid) => return Err(self.err(pc, "an invalid index is accessed".into())),
                        (true, Ptr::Global(b, o)) => Val::Ptr(Ptr::Global(b, o + off.as_i128())),
                        (true, Ptr::Reg(r, o)) => Val::Ptr(Ptr::Reg(r, o + off.as_i128())),
                        (true, Ptr::Local(l, o)) => Val::Ptr(Ptr::Local(l, o + off.as_i128())),
                        (true, Ptr::Off) => Val::Ptr(Ptr::Off),
                    }
                }
                Ops::LOAD => {
                    let Val::Ptr(p) = s(0) else { return Err(self.err(pc, "LOAD of a non-pointer".into())) };
                    let count = x.dtype.count as usize;
                    match *p {
                        Ptr::Off => Val::of(vec![ConstValue::Int(0).cast(x.dtype.scalar()); count]),
                        Ptr::Reg(r, o) => self.read_reg(pc, regs, r, o, count)?,
                        Ptr::Local(l, o) => {
                            let mem = &locals[&l];
                            self.check(pc, l, o, count, mem.len())?;
                            Val::of(mem[o as usize..o as usize + count].to_vec())
                        }
                        Ptr::Global(b, o) => {
                            let (dt, size) = globals[&b];
                            self.check(pc, b, o, count, size)?;
                            // SAFETY: the launch's caller guarantees buffer `b` is live, holds `size` elements of `dt`
                            // (its DEFINE_GLOBAL's claim) and is not otherwise accessed; `check` kept o..o+count in it.
                            Val::of((0..count).map(|l| unsafe { read(bufs[b], o as usize + l, dt) }).collect())
                        }
                    }
                }
                Ops::STORE => {
                    let Val::Ptr(p) = s(0) else { return Err(self.err(pc, "STORE to a non-pointer".into())) };
                    let val = s(1);
                    let count = self.insts[x.src[1]].dtype.count as usize;
                    match *p {
                        Ptr::Off => {}
                        Ptr::Reg(r, o) => {
                            let w = self.insts[r].dtype.base().count as usize;
                            let start = o as usize * w;
                            let reg = regs.get_mut(&r).expect("DEFINE_REG runs before its uses");
                            if start + count > reg.len() {
                                return Err(self.err(pc, format!("register lanes {start}..{}", start + count)));
                            }
                            (0..count).for_each(|l| reg[start + l] = val.lane(l));
                        }
                        Ptr::Local(l, o) => {
                            let mem = locals.get_mut(&l).expect("DEFINE_LOCAL runs before its uses");
                            self.check(pc, l, o, count, mem.len())?;
                            (0..count).for_each(|i| mem[o as usize + i] = val.lane(i).cast(self.insts[x.src[1]].dtype.scalar()));
                        }
                        Ptr::Global(b, o) => {
                            let (dt, size) = globals[&b];
                            self.check(pc, b, o, count, size)?;
                            for l in 0..count {
                                // SAFETY: as for LOAD; the kernel's output buffers are its own during the launch.
                                unsafe { write(bufs[b], o as usize + l, dt, val.lane(l)) }
                            }
                        }
                    }
                    Val::None
                }
                Ops::GEP => match x.arg {
                    Arg::Int(k) => Val::Scalar(s(0).lane(k as usize)),
                    Arg::Ints(ref ks) => Val::Vector(ks.iter().map(|&k| s(0).lane(k as usize)).collect()),
                    _ => return Err(self.err(pc, format!("GEP of {:?}", x.arg))),
                },
                Ops::VECTORIZE => Val::Vector(x.src.iter().map(|&j| v[j].lane(0)).collect()),
                Ops::CAST => {
                    let a = s(0);
                    Val::of((0..a.lanes()).map(|l| a.lane(l).cast(x.dtype.scalar())).collect())
                }
                Ops::BITCAST => bitcast(s(0), self.insts[x.src[0]].dtype, x.dtype),
                op if GroupOp::ALU.contains(op) => {
                    let lanes = x.src.iter().map(|&j| v[j].lanes()).max().unwrap_or(1);
                    let k = x.src.len().min(3);
                    let at = |l: usize| {
                        let mut a = [ConstValue::Invalid; 3];
                        x.src.iter().take(3).enumerate().for_each(|(i, &j)| a[i] = v[j].lane(l));
                        exec_alu(op, x.dtype.scalar(), &a[..k])
                    };
                    if lanes == 1 {
                        Val::Scalar(at(0))
                    } else {
                        Val::Vector((0..lanes).map(at).collect())
                    }
                }
                Ops::SINK | Ops::NOOP => Val::None,
                op => return Err(self.err(pc, format!("the interpreter has no rule for {op}"))),
            };
            v[pc] = out;
            pc += 1;
        }
        t.pc = pc;
        Ok(true)
    }

    /// The WMMA all threads of `warp` wait at: the tensor core's `D = A·B + C` from the lanes' fragments (exact
    /// products, summed in f64, rounded to the output dtype), each lane given its fragment of D.
    fn wmma(&self, warp: &mut [Thread]) -> Result<()> {
        let pc = warp[0].pc;
        let x = &self.insts[pc];
        let tc = match &x.arg {
            Arg::Str(name) => crate::renderer::tensor_core(name),
            _ => None,
        };
        let tc = tc.ok_or_else(|| self.err(pc, format!("no tensor core {:?}", x.arg)))?;
        if warp.len() != tc.threads {
            return Err(self.err(pc, format!("a warp of {} threads; the tensor core needs {}", warp.len(), tc.threads)));
        }
        let ((m, n, k), [fa, fb, fc]) = (tc.dims, &tc.fragments);
        let (mut a, mut b, mut d) = (vec![0.0; m * k], vec![0.0; k * n], vec![0.0; m * n]);
        for (l, t) in warp.iter().enumerate() {
            let gather = |f: &crate::renderer::Fragment, src: usize, to: &mut [f64], cols: usize| {
                (0..f.elements()).for_each(|e| {
                    let (i, j) = f.at(l, e);
                    to[i * cols + j] = t.v[x.src[src]].lane(e).as_f64();
                })
            };
            gather(fa, 0, &mut a, k);
            gather(fb, 1, &mut b, n);
            gather(fc, 2, &mut d, n);
        }
        for (i, j, kk) in (0..m).flat_map(|i| (0..n).flat_map(move |j| (0..k).map(move |kk| (i, j, kk)))) {
            d[i * n + j] += a[i * k + kk] * b[kk * n + j];
        }
        for (l, t) in warp.iter_mut().enumerate() {
            let lanes = (0..fc.elements()).map(|e| {
                let (i, j) = fc.at(l, e);
                ConstValue::Float(d[i * n + j]).cast(tc.dtype_out)
            });
            t.v[pc] = Val::Vector(lanes.collect());
            t.pc = pc + 1;
        }
        Ok(())
    }

    /// `count` lanes of register `r` (a DEFINE_REG's position) from element `o`.
    fn read_reg(&self, pc: usize, regs: &FxHashMap<usize, Vec<ConstValue>>, r: usize, o: i128, count: usize) -> Result<Val> {
        let w = self.insts[r].dtype.base().count as usize;
        let start = o as usize * w;
        let lanes = regs.get(&r).and_then(|reg| reg.get(start..start + count));
        Ok(Val::of(lanes.ok_or_else(|| self.err(pc, format!("register lanes {start}..{}", start + count)))?.to_vec()))
    }

    /// Errors unless elements `o..o+count` are inside argument `b`'s `size` elements.
    fn check(&self, pc: usize, b: usize, o: i128, count: usize, size: usize) -> Result<()> {
        if o < 0 || o + count as i128 > size as i128 {
            return Err(self.err(pc, format!("elements {o}..{} of argument {b}, which holds {size}", o + count as i128)));
        }
        Ok(())
    }
}

/// Element `i` of a buffer of `dt` at `p`.
///
/// # Safety
/// `p` must point to at least `i + 1` elements of `dt`.
unsafe fn read(p: *mut u8, i: usize, dt: DType) -> ConstValue {
    let size = dt.itemsize();
    let mut bytes = [0u8; 8];
    // SAFETY: the caller's contract; `size` is at most 8 (scalar dtypes).
    unsafe { std::ptr::copy_nonoverlapping(p.add(i * size), bytes.as_mut_ptr(), size) };
    ConstValue::from_bits(u64::from_le_bytes(bytes), dt)
}

/// Stores `v` as element `i` of a buffer of `dt` at `p`.
///
/// # Safety
/// As [`read`], and nothing else may access the element meanwhile.
unsafe fn write(p: *mut u8, i: usize, dt: DType, v: ConstValue) {
    let size = dt.itemsize();
    let bytes = v.to_bits(dt).to_le_bytes();
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(i * size), size) };
}

/// `a` (of `from`) reinterpreted as `to`: its lanes' bytes, in order, read as `to`'s lanes.
fn bitcast(a: &Val, from: DType, to: DType) -> Val {
    let (fs, ts) = (from.scalar().itemsize(), to.scalar().itemsize());
    let mut bytes = Vec::with_capacity(fs * from.count as usize);
    (0..from.count as usize).for_each(|l| bytes.extend_from_slice(&a.lane(l).to_bits(from.scalar()).to_le_bytes()[..fs]));
    Val::of(
        bytes
            .chunks_exact(ts)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..ts].copy_from_slice(c);
                ConstValue::from_bits(u64::from_le_bytes(b), to.scalar())
            })
            .collect(),
    )
}

impl Program for PythonProgram {
    /// Interprets the kernel for every thread of the grid, a workgroup at a time: its threads run in turn, each
    /// up to the next BARRIER, so all of them reach a barrier before any passes it, and share the workgroup's
    /// memory (DEFINE_LOCAL).
    fn launch(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], local: [usize; 3]) -> Result<Duration> {
        let st = Instant::now();
        let unravel = |mut i: usize, n: [usize; 3]| -> [usize; 3] {
            std::array::from_fn(|d| {
                let x = i % n[d];
                i /= n[d];
                x
            })
        };
        let tc =
            self.insts
                .iter()
                .find_map(|x| if let (Ops::WMMA, Arg::Str(s)) = (x.op, &x.arg) { crate::renderer::tensor_core(s) } else { None });
        let warp = tc.map_or(1, |tc| tc.threads);
        for g in 0..global.iter().product::<usize>() {
            let g = unravel(g, global);
            let mut threads: Vec<Thread> = (0..local.iter().product::<usize>())
                .map(|l| {
                    let l = unravel(l, local);
                    let at = [g[0], g[1], g[2], l[0], l[1], l[2]];
                    Thread {
                        v: vec![Val::None; self.insts.len()],
                        regs: Default::default(),
                        globals: Default::default(),
                        loops: vec![],
                        pc: 0,
                        at,
                    }
                })
                .collect();
            let mut locals = FxHashMap::default();
            let n = self.insts.len();
            let waits = |t: &Thread| t.pc < n && self.insts[t.pc].op == Ops::WMMA;
            while threads.iter().any(|t| t.pc < n) {
                let mut moved = false;
                for t in threads.iter_mut().filter(|t| t.pc < n && !waits(t)) {
                    self.run(bufs, vals, t, &mut locals)?;
                    moved = true;
                }
                // a warp (threads in order of their local index, dimension 0 fastest, as CUDA's) all at one WMMA
                for warp in threads.chunks_mut(warp) {
                    if warp.iter().all(|t| waits(t) && t.pc == warp[0].pc) {
                        self.wmma(warp)?;
                        moved = true;
                    }
                }
                if !moved {
                    let pc = threads.iter().find(|t| waits(t)).map_or(0, |t| t.pc);
                    return Err(self.err(pc, "the threads of a warp do not all reach this WMMA".into()));
                }
            }
        }
        Ok(st.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{dtypes, AddrSpace};
    use crate::uop::AxisType;

    /// `for i in 0..n: out[i] = i * 2` over a float32 buffer of `size` elements, linearized by hand.
    fn doubles(n: i64, size: i64) -> LinearKernel {
        let out = UOp::new(Ops::DEFINE_GLOBAL, dtypes::FLOAT32.ptr(size, AddrSpace::Global), [], Arg::Int(0));
        let r = UOp::new(Ops::RANGE, dtypes::WEAKINT, [UOp::const_(dtypes::WEAKINT, n)], Arg::Range(0, AxisType::Loop));
        let idx = UOp::new(Ops::INDEX, out.dtype, [out.clone(), r.clone()], Arg::None);
        let val = UOp::new(Ops::CAST, dtypes::FLOAT32, [r.clone() * UOp::const_(dtypes::WEAKINT, 2)], Arg::None);
        let st = UOp::new(Ops::STORE, dtypes::VOID, [idx.clone(), val.clone()], Arg::None);
        let end = UOp::new(Ops::END, dtypes::VOID, [st.clone(), r.clone()], Arg::None);
        let uops = vec![out, r.src[0].clone(), r.clone(), idx, UOp::const_(dtypes::WEAKINT, 2), val.src[0].clone(), val, st, end];
        LinearKernel {
            name: "doubles".into(),
            display_name: "doubles".into(),
            uops,
            outer: 0,
            global_size: [1; 3],
            local_size: [1; 3],
            ops: 0,
            mem: 0,
            opts: vec![],
            vars: vec![],
        }
    }

    fn launch(k: &LinearKernel, buf: &mut [f32]) -> Result<Duration> {
        PythonProgram::new(k).launch(&[buf.as_mut_ptr().cast()], &[], [1, 1, 1], [1, 1, 1])
    }

    #[test]
    fn runs_a_loop() {
        let mut buf = [0f32; 4];
        launch(&doubles(4, 4), &mut buf).unwrap();
        assert_eq!(buf, [0.0, 2.0, 4.0, 6.0]);
    }

    #[test]
    fn an_access_out_of_bounds_is_an_error() {
        let mut buf = [0f32; 5];
        let err = launch(&doubles(5, 4), &mut buf).unwrap_err().to_string();
        assert!(err.contains("elements 4..5 of argument 0, which holds 4"), "{err}");
        // the in-bounds stores before it happened, the bad one did not
        assert_eq!(buf, [0.0, 2.0, 4.0, 6.0, 0.0]);
    }

    #[test]
    fn bitcasts_reinterpret_lanes() {
        let one = Val::Scalar(ConstValue::Float(1.0));
        assert_eq!(bitcast(&one, dtypes::FLOAT32, dtypes::UINT32).lane(0), ConstValue::Int(0x3f80_0000));
        let pair = Val::Vector(vec![ConstValue::Int(0x3c00), ConstValue::Int(0xc000)]);
        let halves = bitcast(&pair, dtypes::UINT16.vec(2), dtypes::FLOAT16.vec(2));
        assert_eq!((halves.lane(0), halves.lane(1)), (ConstValue::Float(1.0), ConstValue::Float(-2.0)));
    }
}
