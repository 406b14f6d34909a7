//! The folder-layer check both the bridge and the simulator keep: a
//! source tree's folders (and single-file layers) are layers, bottom
//! first; a file may import from its own folder and the layers below it,
//! never from a layer above, never from the tree's root (its `mod.rs` or
//! `lib.rs` only assembles), and inside a folder the files import one way
//! too (no cycle).
//!
//! Read from the sources, not the compiler: every `{prefix}…` path (e.g.
//! `crate::bridge::store::outbox`) and every `super::…` path in a file's
//! non-test code is an edge. Comment lines are skipped: a doc link is no
//! dependency (rustdoc resolves it; the code does not need it). Between
//! crates the compiler keeps the arrows itself.
//!
//! ```
//! use smolcord_testkit::layers::{edges, violations, Source};
//! let store = Source {
//!     layer: "store".into(),
//!     name: "persist".into(),
//!     uses: edges("use crate::bridge::work::worker::Job;", "store", "crate::bridge::"),
//! };
//! assert_eq!(
//!     violations(&[store], &["store", "work"], "crate::bridge::"),
//!     ["store/persist imports from work, a layer above it"]
//! );
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One source file: its layer (its folder, or its own name for a file at
/// the root), its name, and the `(layer, file)` pairs its non-test code
/// names.
#[derive(Debug)]
pub struct Source {
    pub layer: String,
    pub name: String,
    pub uses: BTreeSet<(String, String)>,
}

/// The files under `dir` but the root's assemblers (`mod.rs`, `lib.rs`).
/// `prefix` is how the tree's root is named from inside (`crate::` for a
/// crate, `crate::bridge::` for a module).
pub fn sources(dir: &Path, prefix: &str) -> Vec<Source> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_owned(), None::<String>)];
    while let Some((dir, layer)) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder") {
            let path = entry.expect("entry").path();
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if path.is_dir() {
                todo.push((path, Some(stem)));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || stem == "mod" || stem == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            // Unit tests may reach anywhere.
            let code = text.split("#[cfg(").next().unwrap_or("");
            let layer = layer.clone().unwrap_or_else(|| stem.clone());
            out.push(Source {
                uses: edges(code, &layer, prefix),
                layer,
                name: stem,
            });
        }
    }
    out
}

/// The `(layer, file)` pairs `code` (of a file in `own_layer`) names.
pub fn edges(code: &str, own_layer: &str, prefix: &str) -> BTreeSet<(String, String)> {
    let code: String = code
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut uses = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        let rest = &code[at + prefix.len()..];
        let mut parts = segments(rest).into_iter();
        let first = parts.next().unwrap_or_default();
        let second = parts.next().unwrap_or_default();
        uses.insert((first, second));
    }
    for (at, _) in code.match_indices("super::") {
        let rest = &code[at + "super::".len()..];
        let first = segments(rest).into_iter().next().unwrap_or_default();
        uses.insert((own_layer.to_owned(), first));
    }
    uses
}

/// `a::b::C` -> [a, b, C]; `a::{b, c}` -> [a, b] (the first of a group).
pub fn segments(rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = rest;
    loop {
        let rest_trim = rest.trim_start_matches('{').trim_start();
        let ident: String = rest_trim
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() {
            return out;
        }
        rest = &rest_trim[ident.len()..];
        out.push(ident);
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => return out,
        }
    }
}

/// A cycle in `graph`, if there is one.
pub fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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

/// Every violation of the layer rule in `files`, whose `layers` are
/// listed bottom first.
pub fn violations(files: &[Source], layers: &[&str], prefix: &str) -> Vec<String> {
    let rank = |layer: &str| layers.iter().position(|l| *l == layer);
    let mut wrong = Vec::new();
    for file in files {
        let Some(own) = rank(&file.layer) else {
            wrong.push(format!("{}/{}: not in a layer", file.layer, file.name));
            continue;
        };
        for (layer, _) in &file.uses {
            match rank(layer) {
                Some(theirs) if theirs <= own => {}
                Some(_) => wrong.push(format!(
                    "{}/{} imports from {layer}, a layer above it",
                    file.layer, file.name
                )),
                None => wrong.push(format!(
                    "{}/{} imports {prefix}{layer} from the root",
                    file.layer, file.name
                )),
            }
        }
    }
    wrong
}

/// A cycle among the files of one folder, if there is one.
pub fn folder_cycle(files: &[Source]) -> Option<Vec<String>> {
    let graph: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|f| {
            let same: BTreeSet<String> = f
                .uses
                .iter()
                .filter(|(layer, name)| *layer == f.layer && *name != f.name)
                .map(|(layer, name)| format!("{layer}/{name}"))
                .collect();
            (format!("{}/{}", f.layer, f.name), same)
        })
        .collect();
    cycle(&graph)
}

/// The whole check of the tree at `dir`: its layers on disk are `layers`
/// (bottom first), no import points up or at the root, no folder has a
/// cycle. Panics naming what is wrong.
pub fn assert_layers(dir: &Path, prefix: &str, layers: &[&str]) {
    let files = sources(dir, prefix);
    let on_disk: BTreeSet<&str> = files.iter().map(|f| f.layer.as_str()).collect();
    assert_eq!(
        on_disk,
        layers.iter().copied().collect(),
        "the layers on disk under {}",
        dir.display()
    );
    let wrong = violations(&files, layers, prefix);
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(
        folder_cycle(&files),
        None,
        "an import cycle inside a folder"
    );
}
