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

/// A source file's module path: `src/hub/ota.rs` is `["hub", "ota"]`, `src/hub/mod.rs` is
/// `["hub"]`, `src/lib.rs` and `src/main.rs` are `[]`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main")) {
        parts.pop();
    }
    parts
}

/// Every path a file's code names from `crate::`, `super::` or `self::` (each member of a
/// `{…}` group as a path of its own), comments aside, resolved against the file's module.
fn paths_named(module: &[String], code: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for line in code.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        let bytes: Vec<char> = line.chars().collect();
        let mut at = 0;
        while at < bytes.len() {
            let rest: String = bytes[at..].iter().collect();
            let starts = ["crate::", "super::", "self::"].into_iter().find(|p| rest.starts_with(p) && (at == 0 || !ident(bytes[at - 1])));
            let Some(start) = starts else {
                at += 1;
                continue;
            };
            // The base the path starts from, then its segments up to a group or its end.
            let mut base: Vec<String> = if start == "crate::" { Vec::new() } else { module.to_vec() };
            let mut segments: Vec<String> = Vec::new();
            let mut tail = &rest[..];
            loop {
                let word: String = tail.chars().take_while(|c| ident(*c)).collect();
                if word.is_empty() {
                    break;
                }
                match word.as_str() {
                    "crate" => {}
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => segments.push(word.clone()),
                }
                tail = &tail[word.len()..];
                match tail.strip_prefix("::") {
                    Some(t) => tail = t,
                    None => break,
                }
            }
            let mut prefix = base.clone();
            prefix.extend(segments);
            if let Some(group) = tail.strip_prefix('{') {
                for member in group[..group.find('}').unwrap_or(group.len())].split(',') {
                    let mut path = prefix.clone();
                    path.extend(member.trim().split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty() && s != "self"));
                    found.push(path);
                }
            } else {
                found.push(prefix);
            }
            at += rest.len() - tail.len() + 1;
        }
    }
    found
}

/// Inside each folder of `src/`, the files refer to each other without a cycle (issue 47): for
/// each file, the sibling files its code names (a module's own submodules and its parent aside).
#[test]
fn no_file_in_a_folder_is_part_of_an_import_cycle() {
    use std::collections::{BTreeMap, BTreeSet};
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<Vec<String>, String> = files.iter().map(|f| (module_of(f.strip_prefix(&src).unwrap()), std::fs::read_to_string(f).unwrap())).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, code) in &modules {
        let Some((_, folder)) = module.split_last() else { continue };
        for path in paths_named(module, code) {
            // The sibling (a file of the same folder) the path goes through, if any.
            if path.len() > folder.len() && path[..folder.len()] == *folder && path[folder.len()] != module[folder.len()] {
                let sibling = path[..=folder.len()].to_vec();
                if modules.contains_key(&sibling) {
                    edges.entry(module.clone()).or_default().insert(sibling);
                }
            }
        }
    }
    // A cycle: a file that reaches itself.
    let mut in_cycles = BTreeSet::new();
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&Vec<String>> = edges[start].iter().collect();
        while let Some(next) = stack.pop() {
            if next == start {
                in_cycles.insert(start.join("/"));
                break;
            }
            if seen.insert(next.clone()) {
                stack.extend(edges.get(next).into_iter().flatten());
            }
        }
    }
    assert!(in_cycles.is_empty(), "files in an import cycle inside their folder (move the shared item down into a file both use): {in_cycles:?}");
}

#[test]
fn paths_are_resolved_from_the_files_module() {
    let module = ["hub".to_string(), "ota".to_string()];
    let code = "use super::devices::Peer;\nuse crate::hub::{admission, registry::Registry};\n// super::owner in a comment\nlet s = self::inner::x;";
    let found: Vec<String> = paths_named(&module, code).iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["hub::devices::Peer", "hub::admission", "hub::registry::Registry", "hub::ota::inner::x"]);
}
