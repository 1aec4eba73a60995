//! The architecture test: imports flow one way. It reads every `src/**/*.rs`, collects the
//! `crate::…` paths each file uses (`use` lines, grouped ones too, and paths written inline;
//! `super::` and `self::` resolved; comments, strings and `#[cfg(test)]` code left out), reads
//! the layer order from docs/architecture.md (its fenced `layers` block, so the document and
//! this test cannot drift apart), and fails, naming the file, the line and both modules, when
//! - a lower layer imports a higher one,
//! - a top-level module is missing from the layer order, or
//! - the children (files or sub-folders) of one folder import each other in a circle, the
//!   top level included: `llm/gemini` → `llm/registry` → `llm/gemini` is one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path below the crate root: `["llm", "gemini", "models"]`.
type ModulePath = Vec<String>;

/// A folder's imports between its children: (child, child) → where (file, line) the first
/// imports the second.
type Edges = BTreeMap<(String, String), (String, usize)>;

/// One `crate::…` path a file uses.
#[derive(Debug)]
struct Import {
    file: String,
    line: usize,
    from: ModulePath,
    to: ModulePath,
}

#[test]
fn imports_flow_one_way_and_no_two_modules_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the doc");
    let layers = layers(&doc).expect("docs/architecture.md has a ```layers block");
    let mut files = Vec::new();
    read_sources(&root.join("src"), "", &mut files);
    assert!(files.len() > 100, "found only {} source files", files.len());
    let problems = violations(&files, &layers);
    assert!(
        problems.is_empty(),
        "{} import(s) against docs/architecture.md:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_check_catches_back_edges_and_circles_and_nothing_else() {
    let files: Vec<(String, String)> = [
        (
            "lib.rs",
            "pub mod low;\npub mod high;\n#[cfg(test)]\nmod tests;\n",
        ),
        (
            "low/mod.rs",
            "//! Mentions crate::high::Doc in a comment.\nmod t;\n\
             use crate::high::Thing;\n\
             const S: &str = \"crate::high::in_a_string\";\n\
             #[cfg(test)]\nmod tests {\n    use crate::high::ForTests;\n}\n",
        ),
        (
            "low/t.rs",
            "use crate::{wire::A, low::{self as here, b::C}};\n\
             fn f<'a>(c: char) -> bool { c == '\"' || crate::low::b::ok() }\n",
        ),
        ("low/b.rs", "pub fn ok() -> bool { true }\n"),
        ("high/mod.rs", "mod x;\nmod y;\nuse crate::low::b::ok;\n"),
        ("high/x.rs", "use super::y::A;\n"),
        ("high/y.rs", "pub fn f() {\n    crate::high::x::g();\n}\n"),
        ("tests/mod.rs", "use crate::high::Anything;\n"),
        ("stray.rs", "use crate::low::b::ok;\n"),
    ]
    .into_iter()
    .map(|(p, t)| (p.to_owned(), t.to_owned()))
    .collect();
    let layers = layers("```layers\nwire low   # the bottom\nhigh\n```\n").expect("layers");
    let problems = violations(&files, &layers);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(
        has("src/low/mod.rs:3: `low` (layer 1) imports `high` (layer 2)"),
        "{problems:#?}"
    );
    assert!(
        has("`high` and `low` import each other in a circle"),
        "{problems:#?}"
    );
    assert!(has("src/high/y.rs:2: `high/y` → `high/x`"), "{problems:#?}");
    assert!(has("src/high/x.rs:1: `high/x` → `high/y`"), "{problems:#?}");
    assert!(has("`stray` has no layer"), "{problems:#?}");
    // Comments, strings, test code, grouped imports of lower layers and a folder's own
    // children are no violations: exactly the four above (the circle is one, with its edges).
    assert_eq!(problems.len(), 4, "{problems:#?}");
    let own = imports("low/t.rs", &files[2].1);
    let targets: Vec<String> = own.iter().map(|i| i.to.join("::")).collect();
    assert_eq!(
        targets,
        ["low", "low::b::C", "wire::A", "low::b::ok"],
        "{own:?}"
    );
}

/// The layer order, bottom first: the lines of the first fenced block tagged `layers`, each a
/// layer of modules separated by spaces (`#` starts a comment).
fn layers(doc: &str) -> Option<Vec<Vec<String>>> {
    let start = doc.find("```layers\n")? + "```layers\n".len();
    let end = start + doc[start..].find("```")?;
    let layers: Vec<Vec<String>> = doc[start..end]
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .map(|line| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|layer| !layer.is_empty())
        .collect();
    (!layers.is_empty()).then_some(layers)
}

/// Every `.rs` file under `dir`, as (path relative to `src/`, text).
fn read_sources(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a source directory")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            read_sources(&path, &format!("{prefix}{name}/"), out);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            out.push((format!("{prefix}{name}"), text));
        }
    }
}

/// Every violation, one line each.
fn violations(files: &[(String, String)], layers: &[Vec<String>]) -> Vec<String> {
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |m| (m.as_str(), i + 1)))
        .collect();
    let tests = test_modules(files);
    let is_test = |m: &ModulePath| tests.iter().any(|t| m.starts_with(t));
    let mut problems = Vec::new();
    let mut unplaced = BTreeSet::new();
    let mut edges: BTreeMap<ModulePath, Edges> = BTreeMap::new();
    for (path, text) in files {
        // The binary's root uses the library as `triage::`, from outside.
        if path == "main.rs" || is_test(&module_of(path)) {
            continue;
        }
        let module = module_of(path);
        if let Some(top) = module.first()
            && !layer_of.contains_key(top.as_str())
        {
            unplaced.insert(top.clone());
        }
        for import in imports(path, text) {
            let shared = import
                .from
                .iter()
                .zip(&import.to)
                .take_while(|(a, b)| a == b)
                .count();
            let (Some(a), Some(b)) = (import.from.get(shared), import.to.get(shared)) else {
                continue; // a module's own items, or its ancestors'
            };
            if shared == 0
                && let (Some(la), Some(lb)) = (layer_of.get(a.as_str()), layer_of.get(b.as_str()))
                && la < lb
            {
                problems.push(format!(
                    "src/{}:{}: `{a}` (layer {la}) imports `{b}` (layer {lb}), a higher layer",
                    import.file, import.line
                ));
            }
            edges
                .entry(import.from[..shared].to_vec())
                .or_default()
                .entry((a.clone(), b.clone()))
                .or_insert((import.file.clone(), import.line));
        }
    }
    for top in unplaced {
        problems.push(format!(
            "`{top}` has no layer in docs/architecture.md's ```layers block"
        ));
    }
    for (folder, edges) in &edges {
        for circle in circles(edges) {
            let name = |child: &str| {
                let mut parts = folder.clone();
                parts.push(child.to_owned());
                parts.join("/")
            };
            let members: Vec<String> = circle.iter().map(|c| format!("`{}`", name(c))).collect();
            let mut lines = vec![format!(
                "{} import each other in a circle:",
                members.join(" and ")
            )];
            for ((a, b), (file, line)) in edges {
                if circle.contains(a) && circle.contains(b) {
                    lines.push(format!(
                        "    src/{file}:{line}: `{}` → `{}`",
                        name(a),
                        name(b)
                    ));
                }
            }
            problems.push(lines.join("\n"));
        }
    }
    problems
}

/// The circles of a folder's import graph: its strongly connected parts of two or more.
fn circles(edges: &Edges) -> Vec<BTreeSet<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    // Two children are in one circle when each reaches the other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for &m in next.get(n).into_iter().flatten() {
                if seen.insert(m) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|&n| (n, reach(n))).collect();
    let mut circles: Vec<BTreeSet<String>> = Vec::new();
    for (&n, seen) in &reached {
        let circle: BTreeSet<String> = seen
            .iter()
            .filter(|&&m| m == n || reached.get(m).is_some_and(|r| r.contains(n)))
            .map(|m| m.to_string())
            .collect();
        if circle.len() > 1 && !circles.contains(&circle) {
            circles.push(circle);
        }
    }
    circles
}

/// The modules declared `#[cfg(test)] mod name;`: test code, with all below them.
fn test_modules(files: &[(String, String)]) -> Vec<ModulePath> {
    let mut tests = Vec::new();
    for (path, text) in files {
        let text = strip(text);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let declaration = skip_attributes(rest);
            if let Some(name) = declaration
                .strip_prefix("mod ")
                .and_then(|d| d.split_once(';'))
                .map(|(name, _)| name.trim())
                .filter(|name| name.chars().all(is_ident))
            {
                let mut module = module_of(path);
                module.push(name.to_owned());
                tests.push(module);
            }
        }
    }
    tests
}

fn skip_attributes(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        match text.strip_prefix("#[").and_then(|t| t.split_once(']')) {
            Some((_, after)) => text = after,
            None => return text,
        }
    }
}

/// `llm/gemini/mod.rs` → `["llm", "gemini"]`; `lib.rs` → `[]`.
fn module_of(path: &str) -> ModulePath {
    let mut parts: ModulePath = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The `crate::…` paths `text` (the file at `path`) uses outside comments, strings and
/// `#[cfg(test)]` blocks, `super::` and `self::` resolved against the file's module.
fn imports(path: &str, text: &str) -> Vec<Import> {
    let module = module_of(path);
    let code = without_test_blocks(&strip(text));
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found: Vec<(usize, String)> = Vec::new();
    let mut in_use = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(&code, "use", from) {
        let Some(end) = code[at..].find(';').map(|e| at + e) else {
            break;
        };
        let tree: String = code[at + 3..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for p in expand(&tree) {
            found.push((line_of(at), p));
        }
        in_use.push(at..end);
        from = end;
    }
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root).map(|i| from + i) {
            from = at + root.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':')
                || in_use.iter().any(|r| r.contains(&at))
            {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(is_ident(c) || c == ':'))
                .map_or(code.len(), |e| at + e);
            found.push((line_of(at), code[at..end].trim_end_matches(':').to_owned()));
        }
    }
    found.sort();
    found.dedup();
    found
        .into_iter()
        .filter_map(|(line, p)| {
            let mut segments = p.split("::").filter(|s| !s.is_empty());
            let mut to = match segments.next()? {
                "crate" => Vec::new(),
                "super" => module[..module.len().saturating_sub(1)].to_vec(),
                "self" => module.clone(),
                _ => return None,
            };
            for s in segments {
                match s {
                    "super" => {
                        to.pop();
                    }
                    "self" => {}
                    s => to.push(s.to_owned()),
                }
            }
            Some(Import {
                file: path.to_owned(),
                line,
                from: module.clone(),
                to,
            })
        })
        .collect()
}

/// `crate::{a::X, b::{c, d as e}}` → `crate::a::X`, `crate::b::c`, `crate::b::d`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or_default().trim();
        return vec![path.to_owned()];
    };
    let prefix = tree[..open].trim().trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| match (prefix.is_empty(), p.as_str()) {
            (true, _) => p,
            (false, "self") => prefix.to_owned(),
            (false, _) => format!("{prefix}::{p}"),
        })
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where `word` next occurs on its own (not inside an identifier) at or after `from`.
fn find_word(text: &str, word: &str, mut from: usize) -> Option<usize> {
    while let Some(at) = text[from..].find(word).map(|i| from + i) {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `text` with comments, string and character literals blanked (newlines kept, so line
/// numbers hold).
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, cs: &[char]| {
        out.extend(cs.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && is_ident(chars[i - 1]);
        let end = if c == '/' && next == Some('/') {
            chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p)
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            let mut j = i;
            loop {
                match (chars.get(j), chars.get(j + 1)) {
                    (Some('/'), Some('*')) => (depth, j) = (depth + 1, j + 2),
                    (Some('*'), Some('/')) => {
                        (depth, j) = (depth - 1, j + 2);
                        if depth == 0 {
                            break j;
                        }
                    }
                    (Some(_), _) => j += 1,
                    (None, _) => break j,
                }
            }
        } else if !ident_before && (c == 'r' || (c == 'b' && next == Some('r'))) && {
            let from = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[from..].iter().take_while(|&&h| h == '#').count();
            chars.get(from + hashes) == Some(&'"')
        } {
            let from = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[from..].iter().take_while(|&&h| h == '#').count();
            let body = from + hashes + 1;
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            (body..chars.len())
                .find(|&j| chars[j..].starts_with(&close))
                .map_or(chars.len(), |j| j + close.len())
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            (j + 1).min(chars.len())
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}'), not a lifetime ('a).
            let literal = match (next, chars.get(i + 2)) {
                (Some('\\'), _) => chars[i + 2..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|p| i + 2 + p + 1),
                (Some(_), Some('\'')) => Some(i + 3),
                _ => None,
            };
            match literal {
                Some(end) => end,
                None => {
                    out.push(c);
                    i += 1;
                    continue;
                }
            }
        } else {
            out.push(c);
            i += 1;
            continue;
        };
        blank(&mut out, &chars[i..end]);
        i = end;
    }
    out
}

/// `code` (already stripped) with each `#[cfg(test)]` item's block blanked: a test module's
/// imports are not the module's.
fn without_test_blocks(code: &str) -> String {
    let mut out = code.to_owned();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]").map(|i| from + i) {
        from = at + 1;
        let item = at + "#[cfg(test)]".len();
        let Some(open) = code[item..].find(['{', ';']).map(|o| item + o) else {
            break;
        };
        if !code[open..].starts_with('{') {
            continue;
        }
        let mut depth = 0;
        let mut close = code.len();
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        // Byte for byte, so the offsets after it hold.
        let blanked: String = code[at..close]
            .chars()
            .map(|c| match c {
                '\n' => "\n".to_owned(),
                c => " ".repeat(c.len_utf8()),
            })
            .collect();
        out.replace_range(at..close, &blanked);
        from = close;
    }
    out
}
