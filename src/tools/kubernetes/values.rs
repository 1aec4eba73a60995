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
    if is_secret_kind(&kind) {
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

/// `secret`, `secrets`, `Secret`, `secrets.v1`, `secret.v1.` … (the core `secrets` resource
/// under any spelling kubectl accepts).
pub fn is_secret_kind(kind: &str) -> bool {
    let resource = kind.split('.').next().unwrap_or(kind).to_ascii_lowercase();
    resource == "secret" || resource == "secrets"
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
