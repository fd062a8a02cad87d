//! No import circle inside a crate: every module of each of the workspace's
//! crates is a node, every path to another module (`use crate::…`,
//! `super::…`, a child module by name) an edge, to it and to the modules it
//! is in, and the graph must be acyclic. A child naming its parent or
//! ancestor is not an edge: that is how Rust nests modules. `#[cfg(test)]` modules are left out. Written with
//! syn rather than cargo-modules, which needs a rust-analyzer build.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use syn::visit::Visit;

/// A module by its path from the crate root (`["lab", "kind"]`).
type ModPath = Vec<String>;

/// The modules of the crate at `src` (its `lib.rs` or `main.rs`) and the
/// modules each one names.
pub fn graph(src: &Path, root_file: &str) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut files = BTreeMap::new();
    collect(src, &src.join(root_file), Vec::new(), &mut files);
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, file)| {
            let mut paths = Paths { found: Vec::new() };
            paths.visit_file(file);
            // Naming `b::c` from `a` goes through `b` too.
            let named = paths
                .found
                .iter()
                .filter_map(|path| resolve(module, path, &modules))
                .flat_map(|to| {
                    let common = to.iter().zip(module).take_while(|(a, b)| a == b).count();
                    (common + 1..=to.len()).map(move |n| to[..n].to_vec())
                })
                .filter(|to| to != module)
                .collect();
            (module.clone(), named)
        })
        .collect()
}

/// Parses `file` as module `module` and follows its `mod x;` items.
fn collect(src: &Path, file: &Path, module: ModPath, files: &mut BTreeMap<ModPath, syn::File>) {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let mut parsed =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()));
    parsed.items.retain(|item| !is_test_only(item));
    let dir = module.iter().fold(src.to_path_buf(), |dir, m| dir.join(m));
    for item in &parsed.items {
        if let syn::Item::Mod(m) = item
            && m.content.is_none()
        {
            let name = m.ident.to_string();
            let child = [module.clone(), vec![name.clone()]].concat();
            let own = dir.join(format!("{name}.rs"));
            let file = if own.is_file() { own } else { dir.join(&name).join("mod.rs") };
            collect(src, &file, child, files);
        }
    }
    files.insert(module, parsed);
}

/// The attributes that compile an item for tests alone: `cfg(test)`, and the
/// test support other crates' tests turn on (labkit's `test-support`).
pub(super) const TEST_ONLY: [&str; 2] =
    ["#[cfg(test)]", r#"#[cfg(any(test, feature = "test-support"))]"#];

pub(super) fn is_test_only(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Mod(m) => &m.attrs,
        syn::Item::Fn(f) => &f.attrs,
        syn::Item::Use(u) => &u.attrs,
        syn::Item::Impl(i) => &i.attrs,
        _ => return false,
    };
    let bare = |text: &str| text.replace(' ', "");
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(list) if list.path.is_ident("cfg") => {
            let written = format!("#[cfg({})]", list.tokens);
            TEST_ONLY.iter().any(|t| bare(t) == bare(&written))
        }
        _ => false,
    })
}

/// Every path of a file, as its segments (`use` trees flattened).
struct Paths {
    found: Vec<Vec<String>>,
}

impl<'a> Visit<'a> for Paths {
    fn visit_path(&mut self, path: &'a syn::Path) {
        self.found.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'a syn::ItemUse) {
        flatten(&item.tree, Vec::new(), &mut self.found);
    }
}

fn flatten(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let with = |ident: &syn::Ident| [prefix.clone(), vec![ident.to_string()]].concat();
    match tree {
        syn::UseTree::Path(p) => flatten(&p.tree, with(&p.ident), out),
        syn::UseTree::Name(n) => out.push(with(&n.ident)),
        syn::UseTree::Rename(r) => out.push(with(&r.ident)),
        syn::UseTree::Glob(_) => out.push(prefix),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix.clone(), out)),
    }
}

/// The deepest module that `path`, written in `module`, lands in.
fn resolve(module: &ModPath, path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let (mut at, rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (module.clone(), &path[1..]),
        Some("super") => {
            let supers = path.iter().take_while(|s| *s == "super").count();
            (module[..module.len().saturating_sub(supers)].to_vec(), &path[supers..])
        }
        // A child module by its name.
        Some(first) if modules.contains(&[module.clone(), vec![first.into()]].concat()) => {
            (module.clone(), path)
        }
        _ => return None,
    };
    for segment in rest {
        let deeper = [at.clone(), vec![segment.clone()]].concat();
        if !modules.contains(&deeper) {
            break;
        }
        at = deeper;
    }
    Some(at)
}

/// Every circle of `graph` as the modules along it: one is found, the edge
/// that closes it dropped, and the search goes on.
pub fn circles(mut graph: BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    let mut found = Vec::new();
    while let Some(circle) = circle(&graph) {
        let [.., from, to] = &circle[..] else { unreachable!("a circle has two ends") };
        graph.get_mut(from).map(|next| next.remove(to));
        found.push(circle);
    }
    found
}

/// A circle of `graph`, as the modules along it, if there is one.
fn circle(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    // Depth-first search; a module met again on the current stack closes a circle.
    fn visit(
        at: &ModPath,
        graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        stack: &mut Vec<ModPath>,
        done: &mut BTreeSet<ModPath>,
    ) -> Option<Vec<ModPath>> {
        if let Some(i) = stack.iter().position(|m| m == at) {
            return Some([&stack[i..], std::slice::from_ref(at)].concat());
        }
        if !done.insert(at.clone()) {
            return None;
        }
        stack.push(at.clone());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(found) = visit(next, graph, stack, done) {
                return Some(found);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}
