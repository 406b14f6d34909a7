//! The bridge's message path runs one way: intake (`dispatch`, `results`)
//! → `worker` → `transcribe` / `agent` → `delivery`, over a shared context
//! (`ctx`) that imports none of them. Read from the sources: every
//! `super::NAME` and `crate::bridge::NAME` naming a sibling module is an
//! edge; the graph must have no cycle, `ctx` must reach none of the path's
//! modules, and no module may import from the bridge root (`mod.rs` only
//! assembles).
// The test reads source files directly.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules of the message path, which the shared context must not use.
const PATH: &[&str] = &[
    "dispatch",
    "results",
    "intake",
    "worker",
    "transcribe",
    "agent",
    "delivery",
];

/// Module name -> the sibling names its non-test code refers to.
fn references(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("src/bridge") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.extension().is_some_and(|e| e == "rs") && name != "mod" {
            let text = std::fs::read_to_string(&path).expect("read");
            // Unit tests may reach anywhere.
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_owned();
            files.insert(name, code);
        }
    }
    files
        .iter()
        .map(|(name, code)| {
            let mut names = BTreeSet::new();
            for prefix in ["super::", "crate::bridge::"] {
                for (at, _) in code.match_indices(prefix) {
                    let rest = &code[at + prefix.len()..];
                    names.extend(first_segments(rest));
                }
            }
            names.remove(name);
            (name.clone(), names)
        })
        .collect()
}

/// `a::b` -> [a]; `{a, b::c, D}` -> [a, b, D]; `*` -> [].
fn first_segments(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let names: Vec<String> = match rest.strip_prefix('{') {
        Some(group) => {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            group.split(',').map(ident).collect()
        }
        None => vec![ident(rest)],
    };
    // `super::*` in a file's inner module means the file itself.
    names.into_iter().filter(|s| !s.is_empty()).collect()
}

/// A cycle in `graph`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut found = stack[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, stack, done) {
                return Some(found);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// Everything `from` reaches.
fn reach(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_owned()];
    while let Some(node) = todo.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if seen.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    seen
}

#[test]
fn the_message_path_runs_one_way() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bridge");
    let refs = references(&dir);
    for module in PATH.iter().chain(&["ctx"]) {
        assert!(refs.contains_key(*module), "no module {module}");
    }
    // Names that are not sibling modules come from the bridge root.
    let from_root: Vec<String> = refs
        .iter()
        .flat_map(|(module, names)| {
            names
                .iter()
                .filter(|n| !refs.contains_key(*n))
                .map(move |n| format!("{module} uses super::{n}"))
        })
        .collect();
    assert!(
        from_root.is_empty(),
        "imports from the bridge root: {from_root:?}"
    );
    let graph: BTreeMap<String, BTreeSet<String>> = refs;
    assert_eq!(cycle(&graph), None, "an import cycle");
    let from_ctx = reach(&graph, "ctx");
    let wrong: Vec<&&str> = PATH.iter().filter(|m| from_ctx.contains(**m)).collect();
    assert!(wrong.is_empty(), "ctx reaches {wrong:?}");
    // And the path itself goes one way.
    for (upstream, downstream) in [
        ("worker", "dispatch"),
        ("worker", "results"),
        ("agent", "worker"),
        ("transcribe", "worker"),
        ("delivery", "agent"),
        ("delivery", "transcribe"),
        ("delivery", "worker"),
    ] {
        assert!(
            !reach(&graph, upstream).contains(downstream),
            "{upstream} reaches {downstream}"
        );
    }
}

#[test]
fn references_are_read_from_groups_and_paths() {
    assert_eq!(first_segments("ctx::Ctx;"), ["ctx"]);
    assert_eq!(
        first_segments("{access, results::poll, Tunables};"),
        ["access", "results", "Tunables"]
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]
    .into();
    assert_eq!(cycle(&graph).unwrap(), ["a", "b", "a"]);
}
