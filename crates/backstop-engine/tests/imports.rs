//! The engine's modules form a DAG with the context at the bottom: read from the source, the
//! crate's file-level import graph (every `crate::…`, `super::…` and child-module path outside
//! comments and test modules) has no cycle; `context.rs` imports only files that import
//! nothing of the crate; and no file reaches for an item re-exported at the crate root, so
//! `lib.rs` (declarations and re-exports only) stays out of the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file as a module: its path (`a::b`) and its code without comments and tests.
struct Module {
    path: Vec<String>,
    code: String,
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn modules() -> BTreeMap<String, Module> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut out = BTreeMap::new();
    for p in all {
        let rel = p.strip_prefix(&src).expect("under src").with_extension("");
        let mut path: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = path.last().cloned().unwrap_or_default();
        // Files included as a module's tests (`#[path = "x_tests.rs"] mod tests;`).
        if last.ends_with("_tests") || last == "lib" {
            continue;
        }
        if last == "mod" {
            path.pop();
        }
        let text = std::fs::read_to_string(&p).expect("readable file");
        // Tests sit at the bottom of a file, after `#[cfg(test)]`.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let code = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        out.insert(path.join("::"), Module { path, code });
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The `::`-separated path that follows each occurrence of `prefix` (`crate::`, `super::`,
/// `name::`) standing on its own (not the tail of a longer path or name).
fn paths_after<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = Vec<String>> + 'a {
    code.match_indices(prefix).filter_map(move |(i, _)| {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            return None;
        }
        let rest = &code[i + prefix.len()..];
        let end = rest
            .find(|c: char| !(is_ident(c) || c == ':'))
            .unwrap_or(rest.len());
        let segs: Vec<String> = rest[..end]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        Some(segs)
    })
}

/// The longest module named by a prefix of `segs`; `None` when the first segment is no module
/// (an item at the crate root).
fn resolve(mods: &BTreeMap<String, Module>, segs: &[String]) -> Option<String> {
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| mods.contains_key(m))
}

/// The child modules a file declares (`mod x;`).
fn children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect()
}

struct Graph {
    edges: BTreeMap<String, BTreeSet<String>>,
    root_items: Vec<(String, String)>,
}

fn graph() -> Graph {
    let mods = modules();
    let mut edges = BTreeMap::new();
    let mut root_items = Vec::new();
    for (name, m) in &mods {
        let mut out = BTreeSet::new();
        for segs in paths_after(&m.code, "crate::") {
            match resolve(&mods, &segs) {
                Some(t) => {
                    out.insert(t);
                }
                None => root_items.push((name.clone(), segs.join("::"))),
            }
        }
        // `super` is the module's parent: the folder of a file, the folder above a `mod.rs`.
        let parent: Vec<String> = m.path[..m.path.len().saturating_sub(1)].to_vec();
        for segs in paths_after(&m.code, "super::") {
            let full: Vec<String> = parent.iter().cloned().chain(segs).collect();
            if let Some(t) = resolve(&mods, &full) {
                out.insert(t);
            }
        }
        for c in children(&m.code) {
            if paths_after(&m.code, &format!("{c}::")).next().is_some() {
                let child: Vec<String> = m.path.iter().cloned().chain([c]).collect();
                out.insert(child.join("::"));
            }
        }
        out.remove(name);
        edges.insert(name.clone(), out);
    }
    Graph { edges, root_items }
}

/// A cycle of the graph, if it has one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        v: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(v.to_string(), Mark::Open);
        stack.push(v.to_string());
        for w in edges.get(v).into_iter().flatten() {
            match marks.get(w).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let from = stack.iter().position(|s| s == w).expect("on the stack");
                    let mut c = stack[from..].to_vec();
                    c.push(w.clone());
                    return Some(c);
                }
                Mark::New => {
                    if let Some(c) = visit(w, edges, marks, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        marks.insert(v.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for v in edges.keys() {
        if marks.get(v).copied().unwrap_or(Mark::New) == Mark::New
            && let Some(c) = visit(v, edges, &mut marks, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_import_graph_has_no_cycle() {
    let g = graph();
    assert!(g.edges.len() > 30, "the source was not found");
    assert!(
        g.edges["supervisor"].contains("completer"),
        "the scan misses imports"
    );
    if let Some(c) = cycle(&g.edges) {
        panic!("import cycle: {}", c.join(" -> "));
    }
}

#[test]
fn the_context_imports_only_leaves() {
    let g = graph();
    for m in &g.edges["context"] {
        assert!(
            g.edges[m].is_empty(),
            "context imports {m}, which imports {:?}",
            g.edges[m]
        );
    }
}

#[test]
fn nothing_imports_through_the_crate_root() {
    let g = graph();
    assert!(
        g.root_items.is_empty(),
        "import these from the modules that define them: {:?}",
        g.root_items
    );
}

#[test]
fn the_scan_finds_a_cycle_when_there_is_one() {
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    edges.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycle(&edges).map(|c| c.len()), Some(4));
    edges.get_mut("c").unwrap().clear();
    assert_eq!(cycle(&edges), None);
}
