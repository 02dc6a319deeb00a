//! The C compiler of the CPU device (tinygrad `ClangJITCompiler`): clang or gcc, found on `PATH` or named by `CC`,
//! run with this crate's flags. In: rendered C kernels, one or a batch. Out: [`Compiled`] objects (x86-64
//! relocatable objects, shared objects elsewhere), each kernel's function renamed to a name unique to its source,
//! read from or stored in the [`kernel_cache`] under the SHA-256 of the compiler, its flags and the source; a
//! failed compile as [`Error::Compile`] with the compiler's output and the source kept beside the cache.

use super::{kernel_cache, threads};
use crate::error::{Error, Result};
use crate::runtime::{hex, io_err, keep_source, Compiled, Compiler};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, LazyLock};

/// Compiler flags. IEEE semantics (no `-ffast-math`); no contraction of multiply-adds (`-ffp-contract=off`): the
/// kernel's MULACCs are its fused multiply-adds (`__builtin_fmaf`, see
/// [`Renderer::mulacc`](crate::renderer::Renderer::mulacc)), so gcc and clang, and two kernels computing one
/// expression, round it alike; signed integers wrap (`-fwrapv`), as constant folding does.
const FLAGS: [&str; 6] = ["-O2", "-march=native", "-fPIC", "-ffp-contract=off", "-fno-math-errno", "-fwrapv"];

/// x86-64's extra flags: kernels' vectors are as wide as the widest registers, and clang, which otherwise prefers
/// 256-bit registers on AVX-512 machines, splits each 512-bit vector in two and spills a matmul tile's accumulators
/// (a 1024 matmul 157 -> 300 GFLOP/s).
const X86_FLAGS: [&str; 1] = ["-mprefer-vector-width=512"];

/// gcc's extra flags: gcc 12's loop if-conversion with AVX/AVX2 masked loads (`-march` znver1 or x86-64-v3)
/// miscompiles a guarded load under a select (a cumprod's zero count: `(g ? 1.0f : (h ? x[i] : 0.0f)) == 0.0f`
/// counted the `g` lanes as zeros); clang rejects the flag.
const GCC_FLAGS: [&str; 1] = ["-fno-tree-loop-if-convert"];

/// What kernels compile with: [`FLAGS`], and [`X86_FLAGS`] on x86-64; `-march=` the level in `CPU_TARGET` when set.
pub(super) static COMPILE_FLAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let flags = FLAGS.iter().chain(if cfg!(target_arch = "x86_64") { &X86_FLAGS[..] } else { &[] });
    flags.map(|&f| if f == "-march=native" { march() } else { f.to_string() }).collect()
});

/// The `-march=` flag: `native`, or the x86-64 level `CPU_TARGET` names.
fn march() -> String {
    let target = crate::helpers::cpu_target();
    format!("-march={}", if target.is_empty() { "native" } else { &target })
}

/// Whether kernels compile to relocatable objects that [`Image`](crate::runtime::elf::Image) links in-process
/// (x86-64 ELF), else to shared objects that `dlopen` loads.
const RELOCATABLE: bool = cfg!(all(target_arch = "x86_64", target_os = "linux"));

/// What the compiler makes of one source: a relocatable object, or a shared object linked with libm.
fn output_flags() -> &'static [&'static str] {
    if RELOCATABLE {
        &["-c"]
    } else {
        &["-shared", "-lm"]
    }
}

/// Compiles C kernels with the system C compiler into x86-64 relocatable objects (shared objects elsewhere), cached
/// at `cache_dir()/kernels/<key>.o` (tinygrad `ClangJITCompiler`), the key being the SHA-256 of the compiler's
/// identity (its `--version`, and what `-march=native` means to it on this CPU), the flags and the source. A
/// kernel's function is renamed to `<name>_<key prefix>` ([`Compiled::entry`]), so kernels of one name can share a
/// file: [`compile_many`](Compiler::compile_many) compiles a batch as one C file per core, one compiler run each
/// (a compiler process costs more than most kernels), and caches the object under every kernel's key (hard links).
///
/// Each cached object ends in a trailer that holds the keys it was compiled for and the SHA-256 of the object
/// bytes. A cached file that is truncated, corrupt or made for another key is recompiled, with a warning on stderr
/// at `DEBUG>=1`, so a damaged cache never reaches the loader. Files are written to a name unique to the compile
/// and renamed into place, so concurrent compiles of a kernel (threads or processes) each succeed and a reader
/// never sees a partial file.
#[derive(Debug, Clone)]
pub struct ClangCompiler {
    cc: String,
    /// What makes this compiler's output differ from another's: its version and its `-march` expansion.
    identity: String,
    /// Flags for this compiler alone ([`GCC_FLAGS`] for gcc).
    extra: &'static [&'static str],
}

/// [`Error::NoCompiler`] for compiler `cc` (the default list when `None`).
pub(super) fn no_compiler(cc: Option<String>) -> Error {
    Error::NoCompiler { tried: cc.map_or_else(|| "tried clang, cc and gcc".into(), |cc| format!("CC={cc:?} does not run")) }
}

impl ClangCompiler {
    /// The compiler in env `CC` if set, else the first of `clang`, `cc`, `gcc` on `PATH` that runs. Errors with
    /// [`Error::NoCompiler`] when the chosen one does not run.
    pub fn new() -> Result<Self> {
        match crate::helpers::cc() {
            Some(cc) => Self::with_cc(&cc),
            None => ["clang", "cc", "gcc"].into_iter().find_map(|cc| Self::with_cc(cc).ok()).ok_or_else(|| no_compiler(None)),
        }
    }

    /// Uses `cc` (a program name or path, no arguments). Errors with [`Error::NoCompiler`] when `cc --version` fails.
    pub fn with_cc(cc: &str) -> Result<Self> {
        let run = |args: &[&str]| Command::new(cc).args(args).stdin(Stdio::null()).output().ok();
        let version = run(&["--version"]).filter(|o| o.status.success()).ok_or_else(|| no_compiler(Some(cc.into())))?;
        // `-###` prints the driver's commands without running them: for gcc the expanded -march=native, for clang
        // its target cpu and features
        let native = run(&["-###", &march(), "-x", "c", "-c", "/dev/null", "-o", "/dev/null"]).map(|o| o.stderr).unwrap_or_default();
        let identity = format!("{}\n{}", String::from_utf8_lossy(&version.stdout), target_flags(&String::from_utf8_lossy(&native)));
        let gcc = String::from_utf8_lossy(&version.stdout).contains("Free Software Foundation");
        Ok(ClangCompiler { cc: cc.to_string(), identity, extra: if gcc { &GCC_FLAGS } else { &[] } })
    }

    /// The compiler command in use.
    pub fn cc(&self) -> &str {
        &self.cc
    }

    /// The cache key of `src`: SHA-256 of the compiler, its identity, the flags and the source.
    pub(super) fn key(&self, src: &str) -> kernel_cache::Key {
        kernel_cache::key(&[&self.cc, &self.identity, &COMPILE_FLAGS.join(" "), &self.extra.join(" "), &output_flags().join(" "), src])
    }

    /// Kernel `name` of `src` compiled to `object`: its function is `<name>_<first 16 hex digits of the key>`.
    fn compiled(&self, name: &str, src: &str, object: Arc<[u8]>) -> Compiled {
        Compiled { object, entry: format!("{name}_{}", &hex(&self.key(src))[..16]) }
    }

    /// `src` with kernel `name`'s function renamed to its entry symbol.
    fn renamed(&self, name: &str, src: &str) -> String {
        src.replacen(&format!("void {name}("), &format!("void {}(", self.compiled(name, src, Arc::from([])).entry), 1)
    }

    /// Compiles C source `src` (fed on stdin) into the object file `out`; the compiler's stderr on failure.
    fn run(&self, src: &str, out: &Path) -> Result<std::result::Result<(), Vec<u8>>> {
        let cc_path = Path::new(&self.cc);
        let mut child = Command::new(cc_path)
            .args(COMPILE_FLAGS.iter())
            .args(self.extra)
            .args(["-x", "c", "-", "-o"])
            .arg(out)
            .args(output_flags())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_err(cc_path))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // write from another thread so a compiler that reports errors before reading all input cannot deadlock us;
        // a write error (the compiler exited early) shows up in its exit status
        let done = std::thread::scope(|s| {
            s.spawn(move || stdin.write_all(src.as_bytes()));
            child.wait_with_output()
        })
        .map_err(io_err(cc_path))?;
        if !done.status.success() {
            let _ = std::fs::remove_file(out);
            return Ok(Err(done.stderr));
        }
        Ok(Ok(()))
    }

    /// Compiles the uncached `kernels` as one C file. `None` when that fails (some kernel has an error: each is then
    /// compiled alone, to name it).
    fn compile_batch(&self, kernels: &[(&str, &str)]) -> Result<Option<Arc<[u8]>>> {
        let tu: String = kernels.iter().map(|(name, src)| self.renamed(name, src)).collect();
        let tmp = kernel_cache::scratch("batch")?;
        match self.run(&tu, &tmp)? {
            Ok(()) => kernel_cache::store(&kernels.iter().map(|k| self.key(k.1)).collect::<Vec<_>>(), &tmp).map(|o| Some(o.into())),
            Err(_) => Ok(None),
        }
    }
}

/// The target flags in a compiler driver's `-###` output: gcc's `-m...` (the expanded `-march=native`), clang's
/// `-target-cpu` and `-target-feature` values. The rest varies per run (gcc names random temporary files).
fn target_flags(driver: &str) -> String {
    let tokens: Vec<&str> = driver.split_whitespace().map(|t| t.trim_matches('"')).collect();
    let mut kept = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.starts_with("-m") {
            kept.push(*t);
        } else if matches!(*t, "-target-cpu" | "-target-feature") {
            kept.extend(tokens.get(i + 1));
        }
    }
    kept.join(" ")
}

impl Compiler for ClangCompiler {
    fn compile(&self, name: &str, src: &str) -> Result<Compiled> {
        if let Some(object) = kernel_cache::read(&self.key(src)) {
            return Ok(self.compiled(name, src, object.into()));
        }
        let tmp = kernel_cache::scratch("kernel")?;
        if let Err(stderr) = self.run(&self.renamed(name, src), &tmp)? {
            let source_path = keep_source(format!("{}.c", hex(&self.key(src))), src.as_bytes())?;
            let stderr = String::from_utf8_lossy(&stderr).into_owned();
            return Err(Error::Compile { name: name.to_string(), compiler: self.cc.clone(), source_path, stderr });
        }
        let object = kernel_cache::store(&[self.key(src)], &tmp)?;
        Ok(self.compiled(name, src, object.into()))
    }

    /// One C file of kernels per core (`NUM_CPU_THREADS`), balanced by source length, each compiled by one compiler
    /// run; a file that fails is compiled kernel by kernel, so each error names its kernel.
    fn compile_many(&self, kernels: &[(&str, &str)]) -> Vec<Result<Compiled>> {
        let mut out: Vec<Option<Result<Compiled>>> =
            kernels.iter().map(|(name, src)| kernel_cache::read(&self.key(src)).map(|o| Ok(self.compiled(name, src, o.into())))).collect();
        let mut todo: Vec<usize> = (0..kernels.len()).filter(|&i| out[i].is_none()).collect();
        // a kernel twice in the list compiles once
        todo.sort_by_key(|&i| (std::cmp::Reverse(kernels[i].1.len()), kernels[i].1));
        todo.dedup_by_key(|i| kernels[*i].1);
        // longest first, each to the least loaded share
        let mut shares: Vec<(usize, Vec<usize>)> = vec![(0, vec![]); threads().min(todo.len())];
        for i in todo {
            let s = shares.iter_mut().min_by_key(|s| s.0).expect("at least one share");
            s.0 += kernels[i].1.len();
            s.1.push(i);
        }
        let ctx = crate::helpers::Context::snapshot();
        let done: Vec<(usize, Result<Compiled>)> = shares
            .par_iter()
            .with_max_len(1)
            .flat_map_iter(|(_, idx)| {
                let _g = ctx.enter();
                let batch: Vec<(&str, &str)> = idx.iter().map(|&i| kernels[i]).collect();
                let objects: Vec<Result<Compiled>> = match self.compile_batch(&batch) {
                    Ok(Some(object)) => batch.iter().map(|(name, src)| Ok(self.compiled(name, src, object.clone()))).collect(),
                    _ => batch.iter().map(|(name, src)| self.compile(name, src)).collect(),
                };
                idx.clone().into_iter().zip(objects)
            })
            .collect();
        for (i, r) in done {
            out[i] = Some(r);
        }
        let again: Vec<usize> = (0..kernels.len()).filter(|&i| out[i].is_none()).collect();
        for i in again {
            out[i] = Some(self.compile(kernels[i].0, kernels[i].1));
        }
        out.into_iter().map(|o| o.expect("every kernel compiled")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{entry_path, fresh, AXPB};
    use super::super::{CpuAllocator, CpuProgram};
    use super::kernel_cache::TRAILER_FIXED;
    use super::*;
    use crate::helpers::{cache_dir, Context, CACHELEVEL};
    use crate::runtime::testing::f32s;
    use crate::runtime::Allocator;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn second_compile_hits_disk_cache() {
        let cc = ClangCompiler::new().unwrap();
        let src = fresh(AXPB);
        let _g = Context::new(&[(&CACHELEVEL, 2)]);
        let (o1, path) = (cc.compile("axpb", &src).unwrap(), entry_path(&cc, &src));
        let ino = std::fs::metadata(&path).unwrap().ino();
        assert_eq!(cc.compile("axpb", &src).unwrap(), o1);
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino, "not recompiled");
        assert_eq!(Context::with(&[(&CACHELEVEL, 0)], || cc.compile("axpb", &src).unwrap()), o1);
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), ino, "CACHELEVEL=0 recompiles");
        assert_eq!(path.parent().unwrap(), cache_dir().join("kernels"));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn compiler_identity_is_the_same_every_run_and_names_the_target() {
        let (a, b) = (ClangCompiler::new().unwrap(), ClangCompiler::new().unwrap());
        assert_eq!(a.identity, b.identity, "gcc's -### names random temporary files: they must not reach the cache key");
        assert!(a.identity.contains("-m") || a.identity.contains("+"), "target flags kept: {}", a.identity);
        assert_eq!(target_flags(r#" "cc1" "-march=znver3" "-o" "/tmp/ccAb.s" "-target-cpu" "x86-64" "#), "-march=znver3 x86-64");
    }

    #[test]
    fn concurrent_compiles_of_one_kernel() {
        let src = fresh(AXPB);
        let objects: Vec<Compiled> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4).map(|_| s.spawn(|| ClangCompiler::new().unwrap().compile("axpb", &src).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(objects.iter().all(|o| *o == objects[0]));
        CpuProgram::load(&objects[0]).unwrap();
        let path = entry_path(&ClangCompiler::new().unwrap(), &src);
        let whole = std::fs::read(&path).unwrap();
        assert_eq!(&whole[..objects[0].object.len()], &objects[0].object[..], "the cache holds the object, then its trailer");
        assert_eq!(whole.len(), objects[0].object.len() + 32 + TRAILER_FIXED, "one key");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_batch_compiles_each_kernel_once_and_names_the_broken_one() {
        let cc = ClangCompiler::new().unwrap();
        let good: Vec<String> = (0..3).map(|i| fresh(&AXPB.replace("2.0f", &format!("{i}.0f")))).collect();
        let broken = fresh("void broken(void** bufs) { int x = ; }");
        let cached = cc.compile("axpb", &good[0]).unwrap();
        let kernels: Vec<(&str, &str)> = vec![("axpb", &good[0]), ("axpb", &good[1]), ("broken", &broken), ("axpb", &good[2])];
        let objects = cc.compile_many(&kernels);
        assert_eq!(objects[0].as_ref().unwrap(), &cached);
        assert!(matches!(&objects[2], Err(Error::Compile { name, .. }) if name == "broken"));
        let a = CpuAllocator::new();
        let (out, inp, starts) = (a.alloc(8).unwrap(), a.alloc(8).unwrap(), a.alloc(8).unwrap());
        a.copyin(&inp, &[1f32, 3.0].iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()).unwrap();
        for (i, o) in [0, 1, 3].into_iter().zip([0.0f32, 1.0, 2.0]) {
            let prog = CpuProgram::load(objects[i].as_ref().unwrap()).unwrap();
            prog.run(&[out.as_ptr(), inp.as_ptr(), starts.as_ptr()], &[5], 2, false);
            let mut bytes = vec![0u8; 8];
            a.copyout(&mut bytes, &out).unwrap();
            assert_eq!(f32s(&bytes), [o + 5.0, 3.0 * o + 5.0], "kernel {i} computes its own source");
        }
        for src in good.iter().chain([&broken]) {
            let _ = std::fs::remove_file(entry_path(&cc, src));
            let _ = std::fs::remove_file(entry_path(&cc, src).with_extension("c"));
        }
    }

    #[test]
    fn syntax_error_keeps_source() {
        let src = fresh("void broken(void** bufs) { int x = ; }");
        let Err(Error::Compile { name, stderr, source_path, .. }) = ClangCompiler::new().unwrap().compile("broken", &src) else {
            panic!("expected a compile error")
        };
        assert_eq!(name, "broken");
        assert!(stderr.contains("error"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&source_path).unwrap(), src);
        assert_eq!(source_path.extension().unwrap(), "c");
        std::fs::remove_file(source_path).unwrap();
    }

    #[test]
    fn missing_compiler() {
        let Err(err) = ClangCompiler::with_cc("/nonexistent/cc") else { panic!("no such compiler") };
        assert!(matches!(err, Error::NoCompiler { .. }));
        assert!(err.to_string().contains("\"/nonexistent/cc\" does not run") && err.to_string().contains("apt-get install clang"), "{err}");
        // whichever compiler this machine has (gcc-only machines have no clang) is accepted by its path
        let found = ClangCompiler::new().unwrap();
        let path =
            String::from_utf8(Command::new("sh").args(["-c", &format!("command -v {}", found.cc())]).output().unwrap().stdout).unwrap();
        assert_eq!(ClangCompiler::with_cc(path.trim()).unwrap().cc(), path.trim());
    }

    #[test]
    fn cache_key_is_stable() {
        let cc = ClangCompiler::new().unwrap();
        assert_eq!(cc.key("x"), cc.key("x"));
        assert_ne!(cc.key("x"), ClangCompiler { identity: "another CPU".into(), ..cc.clone() }.key("x"));
    }
}
