//! The dependency rule of the core, checked on its sources (plain Rust, no
//! parser crate): every `crate::...` and `super::...` path in a module of
//! `core/src` may only name a module of the same layer or of a lower one,
//! and no two modules (folders' files, e.g. `layers::episodic`) import each
//! other, directly or around a cycle.
//!
//! The layers, lowest first, are written once, in [`LAYERS`]. Comments (doc
//! links included) and `#[cfg(test)] mod tests` blocks are not dependencies
//! and are skipped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The layers of `core/src`, lowest first: a module may name its own layer
/// and the layers before it, never one after it. Each entry lists the
/// top-level modules of the layer (`lib` is the crate root, `lib.rs`).
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &["error", "config", "util"]),
    ("storage", &["storage"]),
    ("search", &["search"]),
    ("engine", &["engine"]),
    ("layers", &["layers"]),
    ("continuity", &["continuity"]),
    ("admin", &["admin"]),
    ("memory", &["lib"]),
];

/// One source file: its module path (`["search", "vector"]`; `["lib"]` for the root).
struct Source {
    file: PathBuf,
    module: Vec<String>,
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// `src` without comments, string literals' contents and `#[cfg(test)] mod tests` blocks.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            // A string literal: keep the quotes, drop the contents.
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            out.push('"');
            i += 1;
        } else if b[i..].starts_with(b"#[cfg(test)]") && next_item_is_tests(&src[i..]) {
            i += skip_block(&src[i..]);
        } else {
            let ch = src[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn next_item_is_tests(s: &str) -> bool {
    s["#[cfg(test)]".len()..]
        .trim_start()
        .starts_with("mod tests")
}

/// Length of the attribute and item up to the end of its `{ ... }` block.
fn skip_block(s: &str) -> usize {
    let open = s.find('{').unwrap();
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The paths (as segment lists) that follow every `crate::` / `super::` in `code`,
/// resolved against `module`; `{a::b, c}` groups give one path per item.
fn referenced_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (prefix, is_super) in [("crate::", false), ("super::", true)] {
        let mut from = 0;
        while let Some(pos) = code[from..].find(prefix) {
            let at = from + pos;
            from = at + prefix.len();
            // `crate::` inside a longer identifier (`my_crate::`) or after `::`.
            if at > 0 {
                let before = code[..at].chars().next_back().unwrap();
                if before.is_alphanumeric() || before == '_' || before == ':' {
                    continue;
                }
            }
            let mut base: Vec<String> = if is_super {
                // `super::` of a file module is its parent (`search::vector` -> `search`).
                let mut m = module.to_vec();
                if m.first().is_some_and(|f| f == "lib") {
                    m.clear();
                }
                m.pop();
                // Consecutive `super::super::`.
                let mut rest = &code[from..];
                while let Some(r) = rest.strip_prefix("super::") {
                    m.pop();
                    rest = r;
                    from += "super::".len();
                }
                m
            } else {
                Vec::new()
            };
            let rest = &code[from..];
            if rest.starts_with('{') {
                let mut depth = 0;
                let mut item_start = 1;
                for (i, c) in rest.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' | ',' if depth == 1 => {
                            let item = rest[item_start..i].trim();
                            let first = ident(item);
                            if !first.is_empty() && first != "self" {
                                let mut p = base.clone();
                                p.extend(
                                    item.split("::")
                                        .map(|s| ident(s.trim()).to_owned())
                                        .filter(|s| !s.is_empty()),
                                );
                                out.push(p);
                            }
                            item_start = i + 1;
                            if c == '}' {
                                break;
                            }
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
            } else {
                let mut r = rest;
                loop {
                    let id = ident(r);
                    if id.is_empty() {
                        break;
                    }
                    base.push(id.to_owned());
                    r = &r[id.len()..];
                    match r.strip_prefix("::") {
                        Some(next) if !next.starts_with('{') => r = next,
                        _ => break,
                    }
                }
                out.push(base);
            }
        }
    }
    out
}

fn sources() -> Vec<Source> {
    let root = src_dir();
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let code = strip(&std::fs::read_to_string(&file).unwrap());
            let module = module_of(&root, &file);
            Source { file, module, code }
        })
        .collect()
}

/// Names the crate root re-exports, mapped to the top-level module they come
/// from (`Error` -> `error`); every other root name is the root's own (`lib`).
fn root_names(lib: &Source, tops: &BTreeSet<String>) -> HashMap<String, String> {
    let mut map = HashMap::new();
    let code = &lib.code;
    let mut from = 0;
    while let Some(pos) = code[from..].find("pub use crate::") {
        let start = from + pos + "pub use crate::".len();
        let end = start + code[start..].find(';').unwrap();
        from = end;
        let stmt = &code[start..end];
        let top = ident(stmt).to_owned();
        if !tops.contains(&top) {
            continue;
        }
        let names = match stmt.find('{') {
            Some(b) => stmt[b + 1..stmt.rfind('}').unwrap()].to_owned(),
            None => stmt.rsplit("::").next().unwrap().to_owned(),
        };
        for n in names.split(',') {
            let n = n.trim();
            let n = n.rsplit(" as ").next().unwrap().trim();
            let n = n.rsplit("::").next().unwrap().trim();
            if !n.is_empty() {
                map.insert(n.to_owned(), top.clone());
            }
        }
    }
    map
}

fn rank_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&top))
}

/// The module units of the cycle check: a top-level module's file, or a file
/// (or folder) one level down (`layers::episodic`).
fn unit(path: &[String]) -> String {
    path.iter().take(2).cloned().collect::<Vec<_>>().join("::")
}

/// The dependency graph and the rule violations of the sources.
fn analyse(sources: &[Source]) -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let tops: BTreeSet<String> = sources.iter().map(|s| s.module[0].clone()).collect();
    let units: BTreeSet<String> = sources.iter().map(|s| unit(&s.module)).collect();
    let lib = sources.iter().find(|s| s.module == ["lib"]).unwrap();
    let roots = root_names(lib, &tops);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut violations = Vec::new();
    for s in sources {
        let top = &s.module[0];
        let rank = rank_of(top).unwrap_or_else(|| {
            panic!(
                "{}: module `{top}` is in no layer of LAYERS",
                s.file.display()
            )
        });
        let from_unit = unit(&s.module);
        for path in referenced_paths(&s.code, &s.module) {
            let Some(first) = path.first() else { continue };
            // A root item: a re-export (to its module) or the root's own.
            let target: Vec<String> = if tops.contains(first) {
                path.clone()
            } else {
                vec![
                    roots
                        .get(first)
                        .cloned()
                        .unwrap_or_else(|| "lib".to_owned()),
                ]
            };
            let target_top = &target[0];
            let target_rank = rank_of(target_top).unwrap();
            if target_rank > rank {
                violations.push(format!(
                    "{} ({} layer) names `{}` ({} layer)",
                    s.file.strip_prefix(src_dir()).unwrap().display(),
                    LAYERS[rank].0,
                    path.join("::"),
                    LAYERS[target_rank].0,
                ));
            }
            let mut to_unit = unit(&target);
            while !units.contains(&to_unit) && to_unit.contains("::") {
                // `engine::Scope`: an item of `engine`, not a submodule.
                to_unit = to_unit.rsplit_once("::").unwrap().0.to_owned();
            }
            if to_unit != from_unit {
                graph.entry(from_unit.clone()).or_default().insert(to_unit);
            }
        }
        graph.entry(from_unit).or_default();
    }
    (graph, violations)
}

/// Strongly connected sets of more than one unit (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[w].min(t.low[v]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.index[w].min(t.low[v]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut set = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                set.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                t.out.push(set);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn lower_layers_never_name_higher_ones() {
    let (_, violations) = analyse(&sources());
    assert!(
        violations.is_empty(),
        "the dependency rule (layers, lowest first: {}) is broken:\n  {}",
        LAYERS
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(" <- "),
        violations.join("\n  ")
    );
}

#[test]
fn no_import_cycles_between_modules() {
    let (graph, _) = analyse(&sources());
    let cycles = cycles(&graph);
    assert!(
        cycles.is_empty(),
        "modules that import each other (directly or around a cycle): {cycles:?}"
    );
}

#[test]
fn the_checker_sees_what_it_must() {
    // The parser itself: grouped, nested, `super::` and root-item paths are
    // found; comments, strings and test modules are not.
    let code = strip(
        "use crate::{Error, layers::episodic::{self, X}};\n\
         // crate::admin::Admin in a comment\n\
         /// [`crate::Memory`]\n\
         let s = \"crate::admin\";\n\
         use super::Scope;\n\
         fn f() -> crate::Memory { todo!() }\n\
         #[cfg(test)]\nmod tests { use crate::admin::Admin; }\n",
    );
    let module = vec!["engine".to_owned(), "scope".to_owned()];
    let paths: Vec<String> = referenced_paths(&code, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        ["Error", "layers::episodic", "Memory", "engine::Scope"],
        "{code}"
    );
    // Every module of the tree is in a layer, and the graph is not empty.
    let (graph, _) = analyse(&sources());
    assert!(graph.len() > 20, "{graph:?}");
    assert!(graph["layers::episodic"].contains("engine"), "{graph:?}");
    assert_eq!(
        cycles(&BTreeMap::from([
            ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
            ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
        ]))
        .len(),
        1
    );
}
