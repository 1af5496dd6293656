//! The crate's rooms stay layered: no circle of imports between its source files spans more than
//! two files, and no strategy imports another. Read from the source itself (test modules left out),
//! so a new import that closes a loop fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, by its path relative to `src/`.
fn sources(src: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path: PathBuf = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("read source");
                out.insert(rel, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The module path of a file: `toqd.rs` → `toqd`, `uar/options.rs` → `uar::options`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Test code is not part of the layering: a file's text up to its first `#[cfg(test)]`.
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
}

/// Every path a file names: `use crate::…`/`super::…` items (groups expanded) and inline
/// `crate::a::b` paths, as absolute module paths.
fn named_paths(text: &str, own: &[String]) -> Vec<Vec<String>> {
    fn expand(prefix: &str, body: &str, out: &mut Vec<String>) {
        // `body` is the inside of one `{…}` group; split at top-level commas.
        let mut depth = 0;
        let mut start = 0;
        let bytes = body.as_bytes();
        for i in 0..=bytes.len() {
            let c = bytes.get(i).copied();
            match c {
                Some(b'{') => depth += 1,
                Some(b'}') => depth -= 1,
                Some(b',') | None if depth == 0 => {
                    let item = body[start..i].trim();
                    start = i + 1;
                    if item.is_empty() {
                        continue;
                    }
                    match item.find("::{") {
                        Some(at) => {
                            let inner = &item[at + 3..item.len() - 1];
                            expand(&format!("{prefix}::{}", &item[..at]), inner, out);
                        }
                        None => {
                            let name = item.split(" as ").next().unwrap_or(item).trim();
                            out.push(if name == "self" { prefix.to_string() } else { format!("{prefix}::{name}") });
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut found = Vec::new();
    for statement in text.split(';') {
        let Some(at) = statement.find("use ") else { continue };
        let path = statement[at + 4..].trim();
        if !(path.starts_with("crate::") || path.starts_with("super::") || path.starts_with("self::")) {
            continue;
        }
        match path.find("::{") {
            Some(brace) => expand(&path[..brace], &path[brace + 3..path.len().saturating_sub(1)], &mut found),
            None => found.push(path.split(" as ").next().unwrap_or(path).trim().to_string()),
        }
    }
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(tail.len());
        found.push(tail[..end].trim_end_matches(':').to_string());
        rest = &tail[end..];
    }
    found
        .into_iter()
        .map(|p| {
            let mut parts: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
            let mut base: Vec<String> = match parts.first() {
                Some(&"crate") => {
                    parts.remove(0);
                    Vec::new()
                }
                _ => own.to_vec(),
            };
            while parts.first() == Some(&"super") {
                base.pop();
                parts.remove(0);
            }
            if parts.first() == Some(&"self") {
                parts.remove(0);
            }
            base.extend(parts.into_iter().map(str::to_string));
            base
        })
        .collect()
}

/// The file-level import graph of `src/`.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = sources(src);
    let by_module: BTreeMap<Vec<String>, String> = files.keys().map(|f| (module_of(f), f.clone())).collect();
    let resolve = |path: &[String]| (0..=path.len()).rev().find_map(|n| by_module.get(&path[..n]).cloned());
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in &files {
        if file.ends_with("tests.rs") {
            continue;
        }
        let own = module_of(file);
        let targets = graph.entry(file.clone()).or_default();
        for path in named_paths(without_tests(text), &own) {
            if let Some(target) = resolve(&path).filter(|t| t != file) {
                targets.insert(target);
            }
        }
    }
    graph
}

/// Strongly connected components (Tarjan).
fn components(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w.as_str()) {
                visit(w, s);
                let low = s.low[v].min(s.low[w.as_str()]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.low[v].min(s.index[w.as_str()]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(v, &mut state);
        }
    }
    state.out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_circle_spans_more_than_two_files() {
    let graph = import_graph(&src());
    assert!(graph.len() > 40, "the source walk found only {} files", graph.len());
    assert!(graph["strategy.rs"].contains("toqd.rs"), "the table imports the strategies it lists");
    let circles: Vec<Vec<String>> = components(&graph).into_iter().filter(|c| c.len() > 2).collect();
    assert!(circles.is_empty(), "import circles of more than two files: {circles:?}");
}

#[test]
fn no_strategy_imports_another() {
    let graph = import_graph(&src());
    let strategies = ["toqd", "uar", "hgot", "peers", "baselines"];
    // A family is its module file (`toqd.rs`) and its folder (`toqd/…`).
    let family = |file: &str| {
        strategies.iter().find(|s| file == format!("{s}.rs") || file.starts_with(&format!("{s}/"))).copied()
    };
    for (file, targets) in &graph {
        let Some(own) = family(file) else { continue };
        for target in targets {
            if let Some(other) = family(target).filter(|f| *f != own) {
                // Peers and baselines are separate families; each strategy family is its own room.
                panic!("{file} imports {target}, a file of the `{other}` strategies");
            }
        }
    }
}

/// One module layout (`foo.rs` beside its folder `foo/`, never `foo/mod.rs`) and one place for unit
/// tests (`mod tests` at the end of the file, or `foo/tests.rs` for the module `foo.rs`), never a
/// file named by `#[path]`.
#[test]
fn one_module_layout_and_one_test_file_convention() {
    for (file, text) in sources(&src()) {
        assert!(!file.ends_with("/mod.rs"), "{file}: a module with a folder is `foo.rs` beside `foo/`");
        assert!(!text.contains("#[path"), "{file}: names a file by #[path]");
        let name = file.rsplit('/').next().unwrap_or(&file);
        assert!(name == "tests.rs" || !name.ends_with("tests.rs"), "{file}: unit tests go in `<module>/tests.rs`");
    }
}

#[test]
fn the_reader_follows_groups_and_relative_paths() {
    let own = vec!["toqd".to_string(), "reading".to_string()];
    let paths =
        named_paths("use crate::a::{b, c::{d, e as f}, self};\nuse super::g::H;\nfn x() { crate::k::l(); }", &own);
    let shown: BTreeSet<String> = paths.iter().map(|p| p.join("::")).collect();
    let expected: BTreeSet<String> =
        ["a::b", "a::c::d", "a::c::e", "a", "toqd::g::H", "k::l"].into_iter().map(String::from).collect();
    assert_eq!(shown, expected);
}
