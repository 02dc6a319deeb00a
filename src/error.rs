//! The crate's one error type. Only the outside world (files, compilers, devices) returns [`Error`]; malformed
//! IR is a bug and panics. Follows candle's `error.rs` in shape; tinygrad raises `RuntimeError`/`CompileError`.

use std::path::PathBuf;

/// What can fail outside the program: a missing or failing C compiler, a shared object that does not load, file
/// I/O, a device. Each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// None of `$CC`, `clang`, `cc`, `gcc` runs (tinygrad fails in `subprocess.check_output(['clang', ...])`). The
    /// message names `CC` when it is set.
    #[error("no C compiler runs ({tried}); install clang or gcc (`apt-get install clang`), or set CC to a working C compiler")]
    NoCompiler {
        /// What was tried: `CC="..." does not run`, or the default list.
        tried: String,
    },
    /// The C compiler rejected kernel `name` (tinygrad `CompileError`); the source is kept on disk to reproduce it.
    #[error("compiling kernel `{name}` with `{compiler}` failed; the source is kept at {}, compiler output:\n{stderr}", source_path.display())]
    Compile {
        /// The kernel (function) name.
        name: String,
        /// The compiler command that failed.
        compiler: String,
        /// Where the kernel source was written.
        source_path: PathBuf,
        /// The compiler's standard error.
        stderr: String,
    },
    /// A compiled object could not be loaded, or lacks the kernel symbol.
    #[error("loading kernel `{name}`: {msg}; run with CACHELEVEL=0 to recompile it, and report the kernel if that fails too")]
    Load {
        /// The kernel (or kernels) being loaded.
        name: String,
        /// The loader's message.
        msg: String,
    },
    /// Reading, writing or creating `path` failed.
    #[error("I/O error on {}: {source}; check that the path exists and its permissions", path.display())]
    Io {
        /// The file or directory (or the program that was being run).
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file's contents are not what they should be (truncated, wrong magic, bad header, bad checksum).
    #[error("{}: {msg}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        msg: String,
    },
    /// Fetching `url` failed.
    #[error("downloading {url}: {msg}")]
    Download {
        /// What was fetched.
        url: String,
        /// What went wrong and what to do.
        msg: String,
    },
    /// An opt that does not apply to a kernel (from a BEAM cache or a caller's list).
    #[error("kernel opt: {0}; drop the opt (or delete the BEAM cache entry that holds it)")]
    Opt(String),
    /// A TinyJit was called with inputs unlike the captured ones.
    #[error("TinyJit: {0}")]
    Jit(String),
    /// A state dict does not fit a model: missing, unexpected or wrong-shaped keys.
    #[error("load_state_dict: {0}; was the file saved from this model?")]
    StateDict(String),
    /// An environment variable holds a value its reader does not accept (checked once, at program start, by
    /// [`crate::runtime::check_env`] and the `getenv_*` readers).
    #[error("environment variable {var}={value:?}: {allowed}")]
    Env {
        /// The variable, e.g. `DEBUG`.
        var: String,
        /// Its value.
        value: String,
        /// What is allowed, and what to do.
        allowed: String,
    },
    /// A prompt or generation that does not fit the model's context.
    #[error("context: {0}")]
    Context(String),
    /// A tokenizer's vocabulary (a GGUF file's `tokenizer.ggml.*` metadata) is unusable: an unknown model, arrays of
    /// different lengths, a malformed merge, a special token id out of range.
    #[error("tokenizer: {0}; the GGUF file's tokenizer metadata is not supported or is damaged")]
    Tokenizer(String),
    /// A server could not listen (VIZ's viewer): the address and what to do.
    #[error("serving on {addr}: {msg}")]
    Serve {
        /// The address, e.g. `127.0.0.1:8000`.
        addr: String,
        /// What went wrong and what to do.
        msg: String,
    },
    /// A device refused an operation (out of memory, unsupported request, ...).
    #[error("device {device}: {msg}")]
    Device {
        /// The device name, e.g. "CPU".
        device: String,
        /// What went wrong and what to do.
        msg: String,
    },
}

/// The crate's result type, with [`Error`] by default.
pub type Result<T, E = Error> = std::result::Result<T, E>;
