//! Shell analysis: parses a command with tree-sitter-bash (the grammar the reference uses)
//! and reduces it to its simple commands ("segments") with their words exactly as bash
//! would pass them, or to the reason it cannot be run as written.
//!
//! Structure comes only from the tree. Each word's text is then unquoted by [`lex`], which
//! also rejects anything whose meaning bash and tree-sitter might disagree on (an unquoted
//! metacharacter inside a word, a line continuation, words not separated by blanks), so that
//! what is checked is what bash runs.

use super::evaluation::{refusal, test_evaluates};
use tree_sitter::{Node, Parser};

/// One word of a simple command after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The word as bash passes it to the program (a leading `~` kept as is).
    pub text: String,
    /// The word with `~` replaced by the home directory, for the sensitive-path check.
    pub expanded: String,
    /// Has an unquoted glob (`*`, `?`, `[…]`).
    pub glob: bool,
    /// Has an unquoted brace expansion (`{a,b}`, `{1..3}`).
    pub brace: bool,
    /// Has a tilde form other than `~` / `~/…` with a known home (`~user`, `~+`, `~-`).
    pub tilde_other: bool,
}

/// A simple command: a command name and its arguments.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// The command's source text, for messages.
    pub source: String,
    pub words: Vec<Word>,
}

#[derive(Debug)]
pub(crate) enum Analysis {
    /// tree-sitter reported a syntax error.
    Unparsed,
    /// Something that is never run (substitution, expansion, file redirection, …).
    Refused(String),
    /// The simple commands, in source order, and the structural reasons (compound
    /// statements…) that need approval whatever the segments are.
    Parsed {
        segments: Vec<Segment>,
        approvals: Vec<String>,
    },
}

pub(crate) const UNRELIABLE: &str = "the command could not be analysed reliably: write it on one \
     line, separate words with spaces, put redirections at the end and quote arguments that \
     contain special characters";
const CONTINUATION: &str = "line continuations (a backslash before a newline) are not supported; write the command on one line";
const EXPANSION: &str = "`$` expansions ($VAR, ${VAR}, $(…), $'…') are not allowed; write literal \
     values and put a literal $ inside single quotes";
const SUBSTITUTION: &str = "command substitution ($(…) or backticks) is not allowed";
const BACKGROUND: &str = "running commands in the background (&) is not allowed";
const REDIRECTION: &str = "redirection to or from files is not allowed (only 2>&1-style \
     duplication and /dev/null are)";

pub(crate) fn analyse(command: &str, home: Option<&str>) -> Analysis {
    let mut parser = Parser::new();
    if parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .is_err()
    {
        return Analysis::Unparsed;
    }
    let Some(tree) = parser.parse(command, None) else {
        return Analysis::Unparsed;
    };
    let root = tree.root_node();
    if root.has_error() {
        return Analysis::Unparsed;
    }
    let mut walker = Walker {
        src: command,
        home,
        refused: None,
        unreliable: None,
        approvals: Vec::new(),
        segments: Vec::new(),
    };
    walker.walk(root);
    // A construct found in the tree (`$(…)`) explains more than the word check it also fails.
    match walker.refused.or(walker.unreliable) {
        Some(reason) => Analysis::Refused(reason),
        None => Analysis::Parsed {
            segments: walker.segments,
            approvals: walker.approvals,
        },
    }
}

struct Walker<'a> {
    src: &'a str,
    home: Option<&'a str>,
    /// A refused construct found in the tree.
    refused: Option<String>,
    /// A word or gap that fails [`lex`] or the blank check.
    unreliable: Option<String>,
    approvals: Vec<String>,
    segments: Vec<Segment>,
}

impl<'a> Walker<'a> {
    fn text(&self, node: Node) -> &'a str {
        self.src.get(node.byte_range()).unwrap_or("")
    }

    fn refuse(&mut self, reason: &str) {
        if self.refused.is_none() {
            self.refused = Some(reason.to_owned());
        }
    }

    fn word_failed(&mut self, reason: &str) {
        if self.unreliable.is_none() {
            self.unreliable = Some(reason.to_owned());
        }
    }

    fn approval(&mut self, reason: &str) {
        if !self.approvals.iter().any(|r| r == reason) {
            self.approvals.push(reason.to_owned());
        }
    }

    /// Depth-first, in source order, without recursion (a long `a && b && …` nests deeply).
    fn walk(&mut self, root: Node) {
        let mut stack = vec![root];
        while let Some(node) = stack.pop() {
            if self.visit(node) {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.children(&mut cursor).collect();
                stack.extend(children.into_iter().rev());
            }
        }
    }

    /// Checks one node; returns whether to look at its children.
    fn visit(&mut self, node: Node) -> bool {
        if !node.is_named() {
            if node.kind() == "&" {
                self.refuse(BACKGROUND);
            }
            return true;
        }
        match node.kind() {
            "command_substitution" => self.refuse(SUBSTITUTION),
            "process_substitution" => {
                self.refuse("process substitution (<(…) or >(…)) is not allowed")
            }
            "subshell" => self.refuse("subshells ( … ) are not allowed"),
            "function_definition" => self.refuse("defining functions is not allowed"),
            "variable_assignment" | "variable_assignments" => {
                self.refuse("setting variables (NAME=value, also before a command) is not allowed")
            }
            "simple_expansion"
            | "expansion"
            | "arithmetic_expansion"
            | "ansi_c_string"
            | "translated_string" => self.refuse(EXPANSION),
            "heredoc_redirect"
            | "heredoc_body"
            | "heredoc_start"
            | "heredoc_end"
            | "heredoc_content"
            | "herestring_redirect" => {
                self.refuse("here-documents and here-strings (<<, <<<) are not allowed")
            }
            "file_redirect" => {
                self.redirect(node);
                return false;
            }
            "c_style_for_statement" | "declaration_command" | "unset_command" => {
                self.refuse(&refusal(node.kind()))
            }
            "compound_statement" if self.text(node).starts_with("((") => {
                self.refuse(&refusal(node.kind()))
            }
            "for_statement" | "while_statement" | "if_statement" | "case_statement"
            | "compound_statement" => {
                self.approval("compound statements (for, while, if, case, { … }) need approval");
                return true;
            }
            "test_command" if test_evaluates(self.text(node)) => self.refuse(&refusal(node.kind())),
            "test_command" => {
                self.approval("test expressions ([ … ], [[ … ]]) need approval");
                return true;
            }
            "command" => {
                self.command(node);
                return true;
            }
            "redirected_statement" | "negated_command" => {
                self.check_gaps(node);
                return true;
            }
            "comment" => {
                self.comment(node);
                return false;
            }
            "program" | "list" | "pipeline" | "command_name" | "word" | "number" | "string"
            | "string_content" | "raw_string" | "concatenation" | "brace_expression"
            | "file_descriptor" => return true,
            // Parts of compound statements and tests, which already need approval.
            "do_group"
            | "else_clause"
            | "elif_clause"
            | "case_item"
            | "variable_name"
            | "test_operator"
            | "unary_expression"
            | "binary_expression"
            | "parenthesized_expression"
            | "postfix_expression"
            | "ternary_expression"
            | "regex"
            | "extglob_pattern" => return true,
            other => {
                let reason = format!("unsupported shell syntax ({other}) needs approval");
                self.approval(&reason);
                return true;
            }
        }
        false
    }

    fn command(&mut self, node: Node) {
        self.check_gaps(node);
        let mut words = Vec::new();
        let mut cursor = node.walk();
        if cursor.goto_first_child() {
            loop {
                if matches!(cursor.field_name(), Some("name" | "argument")) {
                    match lex(self.text(cursor.node()), self.home) {
                        Ok(word) => words.push(word),
                        Err(reason) => self.word_failed(reason),
                    }
                }
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        if !words.is_empty() {
            self.segments.push(Segment {
                source: self.text(node).to_owned(),
                words,
            });
        }
    }

    /// Consecutive parts of a command (words, redirections) must be separated by blanks
    /// only — no line continuation, no other character tree-sitter skipped — and words must
    /// not touch, or bash could join what tree-sitter split (`secre\<newline>t`, `$"x"`).
    fn check_gaps(&mut self, node: Node) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        for pair in children.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let gap = self.src.get(prev.end_byte()..next.start_byte());
            let ok = match gap {
                None => false,
                Some(g) if g.contains('\\') => {
                    self.word_failed(CONTINUATION);
                    continue;
                }
                Some(g) if !g.chars().all(|c| c == ' ' || c == '\t') => false,
                Some("") => self.text(next).starts_with(['<', '>', '&']),
                Some(_) => true,
            };
            if !ok {
                self.word_failed(UNRELIABLE);
            }
        }
    }

    fn redirect(&mut self, node: Node) {
        let mut op = "";
        let mut destinations = Vec::new();
        let mut cursor = node.walk();
        if cursor.goto_first_child() {
            loop {
                let child = cursor.node();
                match cursor.field_name() {
                    Some("descriptor") => {}
                    Some("destination") => destinations.push(child),
                    _ if !child.is_named() => op = child.kind(),
                    _ => {
                        self.refuse(REDIRECTION);
                        return;
                    }
                }
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        if destinations.len() > 1 {
            // tree-sitter reads `ls 2>/dev/null -la` as two destinations; bash as an argument.
            self.word_failed(UNRELIABLE);
            return;
        }
        let dest = match destinations.first() {
            None => None,
            Some(d) => match lex(self.text(*d), self.home) {
                Ok(w) => Some(w.text),
                Err(reason) => {
                    self.word_failed(reason);
                    return;
                }
            },
        };
        let dest = dest.as_deref();
        let fd = |d: Option<&str>| {
            d.is_some_and(|d| d == "-" || (!d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())))
        };
        let allowed = match op {
            ">&-" | "<&-" => dest.is_none(),
            ">&" => fd(dest) || dest == Some("/dev/null"),
            "<&" => fd(dest),
            ">" | ">>" | "&>" | "&>>" | ">|" | "<" => dest == Some("/dev/null"),
            _ => false,
        };
        if !allowed {
            self.refuse(REDIRECTION);
        }
    }

    /// bash starts a comment only at the beginning of a word; anything else is a word
    /// character, so a "comment" tree-sitter found elsewhere would be run by bash.
    fn comment(&mut self, node: Node) {
        let before = self
            .src
            .get(..node.start_byte())
            .and_then(|s| s.chars().next_back());
        if !matches!(
            before,
            None | Some(' ' | '\t' | '\n' | ';' | '|' | '&' | '(' | ')')
        ) {
            self.word_failed(UNRELIABLE);
        }
    }
}

/// Removes quotes and backslashes from one word as bash would, refusing whatever would be
/// expanded (`$…`, backticks) or would not be a single word to bash, and flagging globs,
/// brace expansions and tilde forms.
pub(crate) fn lex(raw: &str, home: Option<&str>) -> Result<Word, &'static str> {
    let chars: Vec<char> = raw.chars().collect();
    let mut w = Word {
        text: String::new(),
        expanded: String::new(),
        glob: false,
        brace: false,
        tilde_other: false,
    };
    let push = |w: &mut Word, c: char| {
        w.text.push(c);
        w.expanded.push(c);
    };
    let (mut open_bracket, mut open_brace) = (false, false);
    // Where an unquoted `~` is expanded: at the start, and (in assignment-like words) after
    // `=` or `:`. The latter is applied to every word, which only makes checks stricter.
    let mut tilde_here = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let tilde_pos = std::mem::replace(&mut tilde_here, false);
        match c {
            '\\' => match chars.get(i + 1) {
                None => return Err(UNRELIABLE),
                Some('\n') => return Err(CONTINUATION),
                Some(&d) => {
                    push(&mut w, d);
                    i += 1;
                }
            },
            '\'' => {
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(UNRELIABLE),
                        Some('\'') => break,
                        Some(&d) => push(&mut w, d),
                    }
                    j += 1;
                }
                i = j;
            }
            '"' => {
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(UNRELIABLE),
                        Some('"') => break,
                        Some('`') => return Err(SUBSTITUTION),
                        Some('\\') => match chars.get(j + 1) {
                            Some('\n') => return Err(CONTINUATION),
                            Some(&d @ ('$' | '`' | '"' | '\\')) => {
                                push(&mut w, d);
                                j += 1;
                            }
                            _ => push(&mut w, '\\'),
                        },
                        Some('$') => match chars.get(j + 1) {
                            Some(&n) if n.is_ascii_alphanumeric() || "_{([@*#?$!-".contains(n) => {
                                return Err(EXPANSION);
                            }
                            _ => push(&mut w, '$'),
                        },
                        Some(&d) => push(&mut w, d),
                    }
                    j += 1;
                }
                i = j;
            }
            '$' => return Err(EXPANSION),
            '`' => return Err(SUBSTITUTION),
            ' ' | '\t' | '\n' | '\r' | ';' | '&' | '|' | '(' | ')' | '<' | '>' => {
                return Err(UNRELIABLE);
            }
            '#' if i == 0 => return Err(UNRELIABLE),
            '*' | '?' => {
                w.glob = true;
                push(&mut w, c);
            }
            '[' => {
                open_bracket = true;
                push(&mut w, c);
            }
            ']' => {
                w.glob |= open_bracket;
                push(&mut w, c);
            }
            '{' => {
                open_brace = true;
                push(&mut w, c);
            }
            '}' => {
                w.brace |= open_brace;
                push(&mut w, c);
            }
            '~' if tilde_pos => {
                let prefix_empty = matches!(chars.get(i + 1), None | Some('/' | ':'));
                w.text.push('~');
                match home {
                    Some(h) if prefix_empty => w.expanded.push_str(h),
                    _ => {
                        w.tilde_other = true;
                        w.expanded.push('~');
                    }
                }
            }
            '=' | ':' => {
                push(&mut w, c);
                tilde_here = true;
            }
            _ => push(&mut w, c),
        }
        i += 1;
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(raw: &str) -> Word {
        lex(raw, Some("/home/t")).unwrap_or_else(|e| panic!("lex({raw:?}) failed: {e}"))
    }

    #[test]
    fn lex_removes_quotes_like_bash() {
        for (raw, want) in [
            ("plain", "plain"),
            ("'a b'", "a b"),
            ("\"a b\"", "a b"),
            ("--f=\"x y\"", "--f=x y"),
            ("'it''s'", "its"),
            ("e\\cho", "echo"),
            ("a\\ b", "a b"),
            ("\"c\\$d\"", "c$d"),
            ("\"e$\"", "e$"),
            ("\"a\\nb\"", "a\\nb"),
            ("'$HOME'", "$HOME"),
            ("\\$HOME", "$HOME"),
            ("\"\\`id\\`\"", "`id`"),
            ("'*'", "*"),
        ] {
            assert_eq!(word(raw).text, want, "lex({raw:?})");
        }
    }

    #[test]
    fn lex_flags_globs_braces_and_tildes() {
        assert!(word("/etc/*").glob);
        assert!(word("a?").glob);
        assert!(word("[ab]").glob);
        assert!(!word("[").glob, "a lone [ is literal");
        assert!(!word("'/etc/*'").glob);
        assert!(!word("\\*").glob);
        assert!(word("{a,b}").brace);
        assert!(word("s{u,}do").brace);
        assert!(!word("'{a,b}'").brace);
        let home = word("~/.ssh");
        assert_eq!(
            (home.text.as_str(), home.expanded.as_str()),
            ("~/.ssh", "/home/t/.ssh")
        );
        assert!(!home.tilde_other);
        assert_eq!(word("--x=~/y").expanded, "--x=/home/t/y");
        assert!(word("~root").tilde_other);
        assert!(word("~+").tilde_other);
        assert!(!word("x~").tilde_other);
        assert!(lex("~", None).unwrap().tilde_other, "unknown home");
    }

    #[test]
    fn lex_refuses_expansions_and_unreliable_words() {
        for raw in [
            "$x",
            "a$",
            "$'\\x41'",
            "$\"x\"",
            "\"$HOME\"",
            "\"${x}\"",
            "\"$(id)\"",
            "\"$1\"",
            "\"$[1+2]\"",
            "`id`",
            "\"`id`\"",
            "a b",
            "a;b",
            "a|b",
            "#x",
            "'open",
            "\"open",
            "tail\\",
            "a\\\nb",
        ] {
            assert!(lex(raw, Some("/h")).is_err(), "lex({raw:?}) should fail");
        }
    }

    fn segments(cmd: &str) -> Vec<Vec<String>> {
        match analyse(cmd, Some("/h")) {
            Analysis::Parsed { segments, .. } => segments
                .into_iter()
                .map(|s| s.words.into_iter().map(|w| w.text).collect())
                .collect(),
            other => panic!("{cmd:?}: {other:?}"),
        }
    }

    #[test]
    fn splits_into_simple_commands() {
        assert_eq!(
            segments("kubectl get pods -A | grep -v Running | head -20"),
            vec![
                vec!["kubectl", "get", "pods", "-A"],
                vec!["grep", "-v", "Running"],
                vec!["head", "-20"]
            ]
        );
        assert_eq!(
            segments("echo a && echo 'b c' || date; uname\nid"),
            vec![
                vec!["echo", "a"],
                vec!["echo", "b c"],
                vec!["date"],
                vec!["uname"],
                vec!["id"]
            ]
        );
        assert_eq!(
            segments("ls -la > /dev/null 2>&1 | grep x"),
            vec![vec!["ls", "-la"], vec!["grep", "x"]]
        );
    }

    #[test]
    fn refuses_what_bash_could_read_differently() {
        for cmd in [
            "kubectl get secre\\\nt x",
            "echo $\"x\"",
            "ls 2>/dev/null -la",
            "ls \\\n -la",
        ] {
            assert!(
                matches!(analyse(cmd, None), Analysis::Refused(_)),
                "{cmd:?} should be refused"
            );
        }
    }
}
