//! The layering the crate docs promise, checked on the source: each top-level module refers only
//! to modules below it (`crate::…` paths, comments aside), so there is no import cycle.

use std::collections::BTreeSet;
use std::path::Path;

/// Lower layers first. Modules of one rank do not refer to each other; rank 0 are utilities
/// anything may use, and which use nothing above them.
const RANKS: &[(&str, u8)] = &[
    ("alloc", 0),
    ("exit", 0),
    ("paths", 0),
    ("tls", 0),
    ("config", 0),
    ("args", 0),
    ("metrics", 0),
    ("wire", 1),
    ("device_identity", 1),
    ("session", 2),
    ("links", 3),
    ("hub", 4),
    ("bridge", 5),
    ("mqtt", 5),
    ("sim", 6),
    ("check", 6),
    ("flash", 6),
    ("fuzz", 6),
    ("cli", 7),
    ("dashboard", 7),
    ("commands", 8),
];

fn rank(module: &str) -> u8 {
    RANKS.iter().find(|(m, _)| *m == module).unwrap_or_else(|| panic!("src/{module}: give the new module a rank in tests/layers.rs")).1
}

/// Every `crate::name` (and `crate::{a, b::c}`) a file's code refers to.
fn references(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in code.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = &group[..group.find('}').unwrap_or(group.len())];
                found.extend(inner.split(',').map(|p| p.trim().split("::").next().unwrap_or_default().to_string()).filter(|n| !n.is_empty()));
            } else {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                found.insert(name);
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_refers_only_to_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let code = std::fs::read_to_string(file).unwrap();
        for used in references(&code) {
            if used == top || !RANKS.iter().any(|(m, _)| *m == used) {
                continue;
            }
            if rank(&used) >= rank(&top) {
                wrong.push(format!("src/{}: {top} (rank {}) refers to crate::{used} (rank {})", relative.display(), rank(&top), rank(&used)));
            }
        }
    }
    assert!(wrong.is_empty(), "layers call downward only (src/lib.rs):\n{}", wrong.join("\n"));
}

#[test]
fn references_are_found_in_paths_and_groups() {
    let code = "use crate::hub::Hub;\n// crate::bridge in a comment\nlet x = crate::{links::a, session};";
    assert_eq!(references(code), ["hub", "links", "session"].map(String::from).into_iter().collect());
}
