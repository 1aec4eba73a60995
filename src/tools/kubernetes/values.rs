//! The checks every value passes before it reaches kubectl's argv: object and namespace
//! names, resource kinds (never secrets) and durations.

const MAX_NAME_LEN: usize = 253;

pub(super) fn push_namespace(argv: &mut Vec<String>, ns: Option<&str>) -> Result<(), String> {
    if let Some(ns) = ns {
        argv.extend(["-n".into(), namespace(ns)?]);
    }
    Ok(())
}

/// An object name (also containers): `^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,252}$`. A leading
/// alphanumeric keeps it from being read as a flag; no `/`, `,`, `=` or spaces.
pub(super) fn name(field: &str, value: &str) -> Result<String, String> {
    let ok = value.len() <= MAX_NAME_LEN
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if ok {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "invalid parameter `{field}`: {value:?} is not a Kubernetes object name \
             (letters, digits, '.', '-', '_', ':'; starting with a letter or digit)"
        ))
    }
}

/// A namespace: a DNS label (`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, at most 63 characters).
pub(super) fn namespace(value: &str) -> Result<String, String> {
    let ok = !value.is_empty()
        && value.len() <= 63
        && value.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && value.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "invalid parameter `namespace`: {value:?} is not a namespace name \
             (lower-case letters, digits and '-')"
        ))
    }
}

/// A resource type as kubectl takes it: `pod`, `Pods`, `deployments.apps`, `deploy`,
/// `deployments.v1.apps`. Not checked for secrets.
pub(super) fn single_kind_any(value: &str) -> Result<String, String> {
    let ok = value.len() <= MAX_NAME_LEN
        && value.starts_with(|c: char| c.is_ascii_alphabetic())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
    if ok {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "invalid parameter `kind`: {value:?} is not a resource kind \
             (e.g. pod, deployment, deployments.apps)"
        ))
    }
}

/// One resource type whose objects may be read (not secrets).
pub(super) fn single_kind(value: &str) -> Result<String, String> {
    let kind = single_kind_any(value)?;
    if is_secret_resource(&kind) {
        return Err("reading secrets is not allowed".into());
    }
    Ok(kind)
}

/// One or more comma-separated resource types, none of them secrets.
pub(super) fn kinds(value: &str) -> Result<String, String> {
    let parts = value
        .split(',')
        .map(single_kind)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(parts.join(","))
}

/// Whether a resource as kubectl takes it (a kind, or `kind/name`) is the core `secrets`
/// resource, under any spelling kubectl accepts: `secret`, `secrets`, `Secret`, `secrets.v1`,
/// `secret.v1.`, `secret/db`. The one rule for the kubernetes tools and for kubectl run from
/// the bash tool. kubectl matches no prefixes and Secrets have no short name, so `sec`,
/// `secretproviderclasses` and `sealedsecrets.bitnami.com` are not Secrets; whatever follows
/// the first dot is not checked, so `secrets.example.io` counts as one (refusing a
/// look-alike costs less than reading a Secret).
pub fn is_secret_resource(resource: &str) -> bool {
    let kind = resource.split('/').next().unwrap_or(resource);
    let kind = kind.split('.').next().unwrap_or(kind);
    kind.eq_ignore_ascii_case("secret") || kind.eq_ignore_ascii_case("secrets")
}

/// A duration for `--since`: `30s`, `10m`, `1h`, `2h30m`.
pub(super) fn duration(value: &str) -> Result<String, String> {
    let mut digits = 0;
    let mut ok = !value.is_empty() && value.len() <= 16;
    for c in value.chars() {
        if c.is_ascii_digit() {
            digits += 1;
        } else if matches!(c, 's' | 'm' | 'h') && digits > 0 {
            digits = 0;
        } else {
            ok = false;
        }
    }
    if ok && digits == 0 {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "invalid parameter `since`: {value:?} is not a duration such as 10m, 1h or 2h30m"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_spellings() {
        for secret in [
            "secret",
            "secrets",
            "Secret",
            "SECRETS",
            "secret.v1",
            "secrets.v1.",
            "secret/db",
            "Secrets/db",
            "secrets.v1/db",
            "secret.",
            "secrets.example.io",
        ] {
            assert!(is_secret_resource(secret), "{secret}");
        }
        for other in [
            "sec",
            "secre",
            "secretss",
            "secretproviderclasses",
            "sealedsecrets.bitnami.com",
            "pods",
            "pod/secret",
            "configmap/secrets",
            "",
            "/secret",
        ] {
            assert!(!is_secret_resource(other), "{other}");
        }
    }
}
