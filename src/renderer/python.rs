//! The interpreter's renderer: linear UOps to a listing, one UOp a line (`%3 ADD float [%1, %2] None`), sources
//! named by their line. The interpreter device ([`crate::runtime::python`]) runs the kernel's UOps themselves; the
//! listing is what `DEBUG=4` prints and its "compiled" object. Follows tinygrad `PythonRenderer`, which
//! serializes the UOps for `PythonProgram`.

use super::LinearKernel;
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// The listing of `k`: a header line with its name, then one line per UOp.
pub fn render(k: &LinearKernel) -> String {
    let at: FxHashMap<_, usize> = k.uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
    let mut out = format!("# {}\n", k.name);
    for (i, u) in k.uops.iter().enumerate() {
        let src: Vec<String> = u.src.iter().map(|s| format!("%{}", at[s])).collect();
        let _ = writeln!(out, "%{i} {:?} {} [{}] {:?}", u.op, u.dtype, src.join(", "), u.arg);
    }
    out
}
