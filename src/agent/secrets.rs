//! Secret masking: configured secrets, the values of named environment variables and triage's
//! own credentials never reach the LLM or the client; tool output and error messages carry
//! `<secret-hidden>` instead.

pub const MASK: &str = "<secret-hidden>";
/// Shorter values are too likely to occur by chance (and masking them would garble output).
const MIN_SECRET_LEN: usize = 6;

#[derive(Debug, Default)]
pub struct SecretMasker {
    /// Longest first, so a secret containing another is masked whole.
    secrets: Vec<String>,
}

impl SecretMasker {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> SecretMasker {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        SecretMasker { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn mask(&self, text: &mut String) {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), MASK);
            }
        }
    }

    pub fn mask_opt(&self, text: &mut Option<String>) {
        if let Some(t) = text {
            self.mask(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_occurrence_longest_first() {
        let m = SecretMasker::new([
            "sk-abcdef".to_owned(),
            "sk-abcdef-longer".to_owned(),
            "abc".to_owned(),
        ]);
        let mut t = "key=sk-abcdef-longer and sk-abcdef; abc stays".to_owned();
        m.mask(&mut t);
        assert_eq!(t, "key=<secret-hidden> and <secret-hidden>; abc stays");
    }
}
