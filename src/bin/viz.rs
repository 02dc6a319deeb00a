//! `viz`: serves a saved VIZ trace (tinygrad `python -m tinygrad.viz.serve`). In: the trace file `VIZ=1` or
//! `VIZ=-1` wrote. Out: the viewer on http://127.0.0.1:PORT until interrupted.
//!
//! ```text
//! cargo run --release --bin viz -- TRACE [--port N]
//! ```

use clap::Parser;
use std::path::PathBuf;

/// Serves a VIZ trace on 127.0.0.1.
#[derive(Parser)]
#[command(about = "Serves a VIZ trace (written by VIZ=1 or VIZ=-1) on 127.0.0.1")]
struct Args {
    /// The trace file.
    trace: PathBuf,
    /// The port (default: PORT, else 8000; 0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
}

fn main() {
    let args = Args::parse();
    let run = || -> tinygrad::Result<()> {
        let t = tinygrad::viz::load(&args.trace)?;
        tinygrad::viz::serve::serve(t, args.port.unwrap_or_else(tinygrad::viz::serve::port_from_env))
    };
    if let Err(e) = run() {
        eprintln!("viz: {e}");
        std::process::exit(1);
    }
}
