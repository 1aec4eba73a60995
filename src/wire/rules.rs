//! A request field whose value reads but breaks one of the service's rules (a title too long,
//! a tag key in capitals). The types that check a rule do it while they are deserialised, and
//! the edge answers 400 naming the field, where a value of the wrong shape is a 422. serde
//! carries an error as text only, so the rule's message is marked to be told apart.

use std::fmt::Display;

/// Starts the message of a broken rule; no message of serde's own starts with it.
const MARK: &str = "\u{1}rule\u{1}";

/// The deserialisation error of a value that breaks a rule, `why` saying which.
pub fn broken<E: serde::de::Error>(why: impl Display) -> E {
    E::custom(format_args!("{MARK}{why}"))
}

/// The rule a deserialisation error message reports, if it reports one.
pub fn broken_rule(message: &str) -> Option<&str> {
    let why = message.strip_prefix(MARK)?;
    // serde_json appends the place: " at line 1 column 12".
    Some(why.rsplit_once(" at line ").map_or(why, |(why, _)| why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_rule_is_told_apart_from_serdes_own_errors() {
        let e: serde_json::Error = broken("at most 3 characters");
        assert_eq!(broken_rule(&e.to_string()), Some("at most 3 characters"));
        let placed = serde_json::from_str::<u8>("300").unwrap_err();
        assert_eq!(broken_rule(&placed.to_string()), None);
    }
}
