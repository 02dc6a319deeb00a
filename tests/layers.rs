//! One-way layers: every module under `src/` imports only modules of its own stage or earlier ones, in the order
//! [`STAGES`] (also written in docs/ARCHITECTURE.md, which this checks). A reference counts wherever code names a
//! path: `use crate::x::...`, `crate::{x, y::z}`, an inline `crate::x::f()`, `tinygrad::x`, `$crate::x`, and
//! `super::` climbing out of a top-level module; a name the crate root re-exports (`crate::Tensor`) counts as its
//! module. Comments (doc links among them) and string literals do not count.

use std::collections::BTreeMap;
use std::path::Path;

/// The stages, earliest first: a module may import its own stage and those before it.
const STAGES: &[&str] = &[
    "error", "dtype", "helpers", "profile", "uop", "viz", "renderer", "schedule", "codegen", "runtime", "engine", "tensor", "nn", "onnx",
    "llm",
];

/// `text` without comments and the contents of string and char literals (kept as empty quotes, newlines kept).
fn code_only(text: &str) -> String {
    let (b, mut out, mut i) = (text.as_bytes(), String::with_capacity(text.len()), 0);
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|&c| c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            let end = rest[body..].find(&close).map_or(rest.len(), |e| body + e + close.len());
            out.push_str("\"\"");
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            out.extend(text[i..j.min(b.len())].chars().filter(|&c| c == '\n'));
            i = j + 1;
        } else if b[i] == b'\'' && (rest[1..].starts_with('\\') || rest[1..].chars().nth(1) == Some('\'')) {
            // a char literal ('a', '\n', '\''); a lifetime ('a) has no closing quote
            let len = match rest[1..].chars().next() {
                Some('\\') => rest[3..].find('\'').map_or(rest.len(), |e| e + 4),
                c => 2 + c.map_or(0, char::len_utf8),
            };
            out.push_str("' '");
            i += len;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The first path segment of each name in the group opening at `s` (just after `{`), with its byte offset.
fn group_heads(s: &str, start: usize) -> Vec<(String, usize)> {
    let (mut heads, mut depth, mut expect) = (vec![], 0, true);
    for (i, c) in s[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => expect = true,
            c if expect && depth == 0 && (c.is_alphanumeric() || c == '_') => {
                let name: String = s[start + i..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                heads.push((name, start + i));
                expect = false;
            }
            _ => {}
        }
    }
    heads
}

/// Each `(top-level module or root name, byte offset)` that `code` (of a file at module depth `depth`, 1 for
/// `src/x.rs` and `src/x/mod.rs`) refers to through the crate root.
fn root_refs(code: &str, depth: usize) -> Vec<(String, usize)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut refs = vec![];
    for prefix in ["crate::", "tinygrad::", "super::"] {
        for (at, _) in code.match_indices(prefix) {
            // `x::crate::` is no root path, `::tinygrad::` (the derive macro's spelling) is
            let before = code[..at].trim_end_matches("::");
            if code[..at].chars().next_back().is_some_and(ident) || (before.len() < at && before.chars().next_back().is_some_and(ident)) {
                continue;
            }
            let mut rest = at + prefix.len();
            if prefix == "super::" {
                let mut ups = 1;
                while code[rest..].starts_with("super::") {
                    ups += 1;
                    rest += "super::".len();
                }
                if ups < depth {
                    continue;
                }
            }
            if code[rest..].starts_with('{') {
                refs.extend(group_heads(code, rest + 1));
            } else {
                let name: String = code[rest..].chars().take_while(|&c| ident(c)).collect();
                refs.push((name, rest));
            }
        }
    }
    refs
}

/// Every import of a later stage in `files` (path relative to `src/`, contents), as `path:line: ...`. `roots` maps
/// a name the crate root re-exports or a macro it exports to the module it comes from.
fn violations(files: &[(String, String)], roots: &BTreeMap<String, String>) -> Vec<String> {
    let stage = |m: &str| STAGES.iter().position(|s| *s == m);
    let mut out = vec![];
    for (path, text) in files {
        let module = path.split(['/', '.']).next().expect("a path").to_string();
        if module == "lib" || module == "bin" {
            continue; // the crate root and the binaries sit above every stage
        }
        let Some(own) = stage(&module) else {
            out.push(format!("{path}: module `{module}` is in no stage; add it to STAGES and docs/ARCHITECTURE.md"));
            continue;
        };
        let depth = path.matches('/').count() + usize::from(!path.ends_with("mod.rs"));
        let code = code_only(text);
        for (name, at) in root_refs(&code, depth) {
            let target = roots.get(&name).cloned().unwrap_or(name);
            if let Some(t) = stage(&target).filter(|&t| t > own) {
                let line = code[..at].matches('\n').count() + 1;
                out.push(format!("src/{path}:{line}: `{module}` (stage {own}) imports `{target}` (stage {t}), a later stage"));
            }
        }
    }
    out
}

/// The crate root's re-exports (`pub use tensor::Tensor;` maps `Tensor` to `tensor`) and exported macros (to the
/// module of the file that defines them).
fn root_names(lib: &str, files: &[(String, String)]) -> BTreeMap<String, String> {
    let mut roots = BTreeMap::new();
    for stmt in code_only(lib).split(';').filter_map(|s| s.trim().strip_prefix("pub use ")) {
        let (module, names) = stmt.split_once("::").expect("pub use module::...");
        for n in names.trim().trim_matches(['{', '}']).split(',').filter(|n| !n.trim().is_empty()) {
            // `a::B`, `B as C`: the name the root exports is the last word
            let name = n.rsplit([':', ' ']).next().expect("a name").trim();
            roots.insert(name.to_string(), module.to_string());
        }
    }
    for (path, text) in files {
        for (at, _) in text.match_indices("macro_rules! ") {
            let name: String = text[at + 13..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            roots.insert(name, path.split(['/', '.']).next().expect("a path").to_string());
        }
    }
    roots
}

fn sources(dir: &Path, rel: &str, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("src/ reads") {
        let path = entry.expect("a directory entry").path();
        let name = format!("{rel}{}", path.file_name().expect("a name").to_string_lossy());
        if path.is_dir() {
            sources(&path, &format!("{name}/"), out);
        } else if name.ends_with(".rs") {
            out.push((name, std::fs::read_to_string(&path).expect("a source file reads")));
        }
    }
}

#[test]
fn every_module_imports_only_its_own_or_earlier_stages() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    sources(&src, "", &mut files);
    let roots = root_names(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"), &files);
    assert!(files.len() > 40 && roots.contains_key("Tensor"), "the sources were found: {} files", files.len());
    let bad = violations(&files, &roots);
    assert!(bad.is_empty(), "imports up the stages {STAGES:?}:\n{}", bad.join("\n"));
}

#[test]
fn the_architecture_doc_states_the_same_order() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md")).expect("the doc");
    let order = STAGES.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(" < ");
    assert!(doc.contains(&order), "docs/ARCHITECTURE.md should state the stage order as\n{order}");
}

#[test]
fn the_check_finds_upward_imports_by_file_and_line() {
    let roots = BTreeMap::from([("Tensor".to_string(), "tensor".to_string())]);
    let file = |path: &str, text: &str| (path.to_string(), text.to_string());
    let files = [
        file("uop/spec.rs", "use crate::dtype::DType;\n// crate::engine in a comment\nfn f() { crate::renderer::tensor_core(\"x\"); }\n"),
        file("helpers.rs", "use crate::{error::Error,\n    runtime::cpu};\nconst S: &str = \"crate::tensor\";\n"),
        file("codegen/opt/tc.rs", "use super::super::Kernel;\nuse super::super::super::engine::x;\n"),
        file("engine/jit.rs", "use crate::Tensor;\nuse crate::schedule::x;\n"),
        file(
            "schedule/mod.rs",
            "use tinygrad::nn::Linear;\nlet x = '\"'; use crate::uop::UOp;\nlet q = ('\\'', \"x\"); ::tinygrad::llm::f();\n",
        ),
    ];
    let bad = violations(&files, &roots);
    let expect = [
        "src/uop/spec.rs:3: `uop` (stage 4) imports `renderer` (stage 6), a later stage",
        "src/helpers.rs:2: `helpers` (stage 2) imports `runtime` (stage 9), a later stage",
        "src/codegen/opt/tc.rs:2: `codegen` (stage 8) imports `engine` (stage 10), a later stage",
        "src/engine/jit.rs:1: `engine` (stage 10) imports `tensor` (stage 11), a later stage",
        "src/schedule/mod.rs:1: `schedule` (stage 7) imports `nn` (stage 12), a later stage",
        "src/schedule/mod.rs:3: `schedule` (stage 7) imports `llm` (stage 14), a later stage",
    ];
    assert_eq!(bad, expect);
    let unplaced = violations(&[file("gui/mod.rs", "")], &roots);
    assert_eq!(unplaced, ["gui/mod.rs: module `gui` is in no stage; add it to STAGES and docs/ARCHITECTURE.md"]);
}
