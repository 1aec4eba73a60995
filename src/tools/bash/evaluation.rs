//! Words bash evaluates as variable names or arithmetic expressions. bash evaluates an array
//! subscript in such a word, and a subscript may hold a command: `printf -v 'a[$(id)]' x` runs
//! `id` although every quote is in place. Every such construct is refused, even with approval
//! (the approver would see data where bash runs code); with variables and expansions refused
//! they have no troubleshooting use.

/// Completes a sentence naming the construct.
const EVALUATES_NAMES: &str = "is not allowed: bash evaluates its words as variable \
     names or arithmetic, which runs any command hidden in a subscript (`a[$(…)]`)";

/// Why a construct of the tree (a tree-sitter node kind) is refused.
pub(super) fn refusal(construct: &str) -> String {
    let what = match construct {
        "c_style_for_statement" => "`for (( … ))`",
        "compound_statement" => "`(( … ))`",
        "test_command" => "a test with -v, -R or an arithmetic comparison",
        _ => "declare, typeset, local, export, readonly and unset",
    };
    format!("{what} {EVALUATES_NAMES}")
}

/// Builtins that read a word as a variable name or an arithmetic expression.
pub(super) const NAME_BUILTINS: &[&str] = &[
    "read",
    "mapfile",
    "readarray",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "let",
    "unset",
    "getopts",
];

/// Why a builtin would evaluate one of these words as a name or an arithmetic expression.
pub(super) fn evaluates_names(base: &str, args: &[&str]) -> Option<String> {
    let opts = || {
        args.iter()
            .take_while(|a| **a != "--" && a.starts_with('-'))
    };
    let what = if NAME_BUILTINS.contains(&base) {
        Some(format!("`{base}`"))
    } else if base == "printf" && opts().any(|a| a.starts_with("-v")) {
        Some("`printf -v`".into())
    } else if base == "wait" && opts().any(|a| a.contains('p')) {
        Some("`wait -p`".into())
    } else if (base == "test" || base == "[") && args.iter().any(|a| evaluating_test_operator(a)) {
        Some(format!("`{base}` with -v, -R or an arithmetic comparison"))
    } else {
        None
    };
    what.map(|w| format!("{w} {EVALUATES_NAMES}"))
}

/// Test operators whose operands bash evaluates as variable names or arithmetic.
fn evaluating_test_operator(word: &str) -> bool {
    matches!(
        word,
        "-v" | "-R" | "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"
    )
}

/// Whether a `[ … ]` or `[[ … ]]` (its source text) uses an operator whose operands bash
/// evaluates. `[` is a command that sees its words after quote removal (`'-v'` is `-v`), so the
/// words are compared with their quotes removed.
pub(super) fn test_evaluates(source: &str) -> bool {
    source
        .replace(['\'', '"', '\\'], "")
        .split_whitespace()
        .any(evaluating_test_operator)
}

#[cfg(test)]
mod tests {
    use super::super::{BuiltinAllowlist, Policy, Verdict, classify};

    fn refused(p: &Policy, cmds: &[&str]) {
        for cmd in cmds {
            let got = classify(cmd, p);
            assert!(matches!(got, Verdict::Refused(_)), "{cmd:?}: {got:?}");
        }
    }

    /// Issue 11: bash evaluates these words as names or arithmetic, and a subscript runs
    /// commands; refused even with approval, in every spelling.
    #[test]
    fn words_evaluated_as_names_or_arithmetic_are_refused() {
        let p = Policy::new(BuiltinAllowlist::Extended, &[], &[], None, "/tmp".into());
        refused(
            &p,
            &[
                "printf -v 'a[$(id >&2)]' x",
                "printf -v x y",
                "printf -vx y",
                "printf -v 'a[`id`]' x",
                "\\printf -v 'a[$(id >&2)]' x",
                "'printf' -v 'a[$(id >&2)]' x",
                "echo x | read 'a[$(id >&2)]'",
                "read -r 'a[$(id >&2)]'",
                "mapfile 'a[$(id >&2)]'",
                "readarray -t 'a[$(id >&2)]'",
                "declare 'a[$(id >&2)]'=1",
                "declare -a x",
                "typeset 'a[$(id >&2)]'",
                "local 'a[$(id >&2)]'",
                "export 'a[$(id >&2)]'",
                "readonly 'a[$(id >&2)]'",
                "'declare' 'a[$(id >&2)]'",
                "unset 'a[$(id >&2)]'",
                "'unset' 'a[$(id >&2)]'",
                "let 'a[$(id >&2)]'",
                "let x=1",
                "getopts ab 'a[$(id >&2)]'",
                "wait -p 'a[$(id >&2)]'",
                "wait -n -p 'a[$(id >&2)]'",
                "test -v 'a[$(id >&2)]'",
                "test 'a[$(id >&2)]' -eq 1",
                "[ -v 'a[$(id >&2)]' ]",
                "[ '-v' 'a[$(id >&2)]' ]",
                "[[ -v 'a[$(id >&2)]' ]]",
                "[[ -R 'a[$(id >&2)]' ]]",
                "[[ 'a[$(id >&2)]' -eq 1 ]]",
                "[[ x -lt 'a[$(id >&2)]' ]]",
                "[[ 1 -ne 2 && x == y ]]",
                "(( a[$(id >&2)] ))",
                "((x = 1))",
                "while (( a[$(id >&2)] )); do ls; done",
                "if ((1)); then ls; fi",
                "ls && [[ -v x ]]",
                "for (( i = 0; i < 2; i++ )); do ls; done",
                "echo $(( 1 + 2 ))",
                "echo $[ 1 + 2 ]",
                "echo ${x:1:2}",
                "echo ${a[$(id)]}",
                "echo ${!x}",
                "command printf -v 'a[$(id >&2)]' x",
                "builtin printf -v 'a[$(id >&2)]' x",
                "trap id EXIT",
                "compgen -C 'id' x",
                "fc -e id -1",
                "hash -p /bin/sh ls; ls",
                "enable -f /tmp/x.so x",
                "ls; declare x",
            ],
        );
        // What stays as it was: printf without -v, tests without those operators, loops.
        for cmd in [
            "printf '%s\\n' '-v' 'a[$(id)]'",
            "printf -- -v",
            "echo -v 'a[$(id)]'",
        ] {
            assert_eq!(classify(cmd, &p), Verdict::Allowed, "{cmd:?}");
        }
        for cmd in [
            "[ -f /tmp/x ]",
            "[[ -n x && a == b ]]",
            "for i in 1 2; do ls; done",
            "test -f /tmp/x",
        ] {
            let got = classify(cmd, &p);
            assert!(matches!(got, Verdict::NeedsApproval(_)), "{cmd:?}: {got:?}");
        }
    }
}
