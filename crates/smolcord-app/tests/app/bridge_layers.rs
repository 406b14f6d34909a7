//! The bridge's folders are layers along the message's path, bottom to top:
//! `report`, `access`, `store`, `jobs`, then `ctx` (the shared context
//! over them), `deliver`, `work`, `intake`. A file may import from its own
//! folder and the layers below it, never from a layer above, and never
//! from the bridge root (`mod.rs` only assembles). Inside a folder the
//! files import one way too (no cycle). Read from the sources: every
//! `crate::bridge::…` path and `super::…` path in non-test code is an edge.
//! (Between crates, the compiler keeps the arrows: the library cannot
//! name the application.)
// The test reads source files directly.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, bottom first; `ctx` is a file, the others folders.
const LAYERS: &[&str] = &[
    "report", "access", "store", "jobs", "ctx", "deliver", "work", "intake",
];

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == layer)
}

/// One source file of the bridge: its layer, its name, and the
/// `(layer, file)` pairs its non-test code names.
struct Source {
    layer: String,
    name: String,
    uses: BTreeSet<(String, String)>,
}

fn sources(dir: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_owned(), None::<String>)];
    while let Some((dir, layer)) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("the bridge's folder") {
            let path = entry.expect("entry").path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                todo.push((path, Some(stem)));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || stem == "mod" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            // Unit tests may reach anywhere.
            let code = text.split("#[cfg(").next().unwrap_or("").to_owned();
            let layer = layer.clone().unwrap_or_else(|| stem.clone());
            out.push(Source {
                uses: edges(&code, &layer),
                layer,
                name: stem,
            });
        }
    }
    out
}

/// The `(layer, file)` pairs `code` (of a file in `own_layer`) names.
fn edges(code: &str, own_layer: &str) -> BTreeSet<(String, String)> {
    let mut uses = BTreeSet::new();
    for (at, _) in code.match_indices("crate::bridge::") {
        let rest = &code[at + "crate::bridge::".len()..];
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
fn segments(rest: &str) -> Vec<String> {
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

/// Every violation of the layer rule in `files`.
fn violations(files: &[Source]) -> Vec<String> {
    let mut wrong = Vec::new();
    for file in files {
        let own = rank(&file.layer).unwrap_or_else(|| panic!("{}: no layer", file.layer));
        for (layer, _) in &file.uses {
            match rank(layer) {
                Some(theirs) if theirs <= own => {}
                Some(_) => wrong.push(format!(
                    "{}/{} imports from {layer}, a layer above it",
                    file.layer, file.name
                )),
                None => wrong.push(format!(
                    "{}/{} imports crate::bridge::{layer} from the bridge root",
                    file.layer, file.name
                )),
            }
        }
    }
    wrong
}

#[test]
fn the_bridge_layers_point_down() {
    let dir = smolcord_testkit::repo_root().join("crates/smolcord-app/src/bridge");
    let files = sources(&dir);
    let layers: BTreeSet<&str> = files.iter().map(|f| f.layer.as_str()).collect();
    assert_eq!(
        layers,
        LAYERS.iter().copied().collect(),
        "the layers on disk"
    );
    let wrong = violations(&files);
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Inside a folder, one way too.
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
    assert_eq!(cycle(&graph), None, "an import cycle inside a folder");
}

#[test]
fn an_upward_import_is_caught() {
    let code = "use crate::bridge::work::worker::Job;\nuse super::outbox;\n";
    let store = Source {
        layer: "store".into(),
        name: "persist".into(),
        uses: edges(code, "store"),
    };
    assert_eq!(
        violations(&[store]),
        ["store/persist imports from work, a layer above it"]
    );
    let root = Source {
        layer: "jobs".into(),
        name: "queue".into(),
        uses: edges("use crate::bridge::Tunables;", "jobs"),
    };
    assert_eq!(violations(&[root]).len(), 1);
    assert_eq!(segments("{a, b}::c"), ["a"]);
    assert_eq!(
        segments("store::outbox::{Outbox, X}"),
        ["store", "outbox", "Outbox"]
    );
}
