//! Times and durations as the model writes them (RFC 3339, unix seconds, `now-1h`, `5m`) and
//! as the Prometheus API wants them, and the default step of a range query.

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, NaiveDate, NaiveDateTime};

use super::render;

/// A default range-query step aims at about this many points per series.
const TARGET_POINTS: f64 = 200.0;

pub(super) fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Unix seconds as the API wants them (millisecond precision).
pub(super) fn api_time(t: f64) -> String {
    let s = format!("{t:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Reads a time: RFC 3339, a date-time without zone (UTC), a date, unix seconds (or
/// milliseconds), `now`, `now-1h` / `now+5m`, or `-1h` (before now).
pub(super) fn parse_time(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "cannot read the time `{t}`: use RFC 3339 (2024-05-01T10:00:00Z), unix seconds, \
             `now` or `now-1h`"
        )
    };
    if t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    let relative = t
        .strip_prefix("now")
        .or_else(|| t.strip_prefix("NOW"))
        .map(str::trim)
        .or_else(|| t.starts_with('-').then_some(t));
    if let Some(rest) = relative {
        let (sign, dur) = if let Some(d) = rest.strip_prefix('-') {
            (-1.0, d)
        } else if let Some(d) = rest.strip_prefix('+') {
            (1.0, d)
        } else {
            return Err(bad());
        };
        let secs = parse_duration(dur.trim()).map_err(|_| bad())?;
        return Ok(now + sign * secs);
    }
    if let Ok(n) = t.parse::<f64>() {
        if !n.is_finite() || n < 0.0 {
            return Err(bad());
        }
        // Unix milliseconds (anything past the year 5000 in seconds).
        return Ok(if n > 1e11 { n / 1000.0 } else { n });
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp_millis() as f64 / 1000.0);
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, fmt) {
            return Ok(dt.and_utc().timestamp_millis() as f64 / 1000.0);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d")
        && let Some(dt) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(dt.and_utc().timestamp() as f64);
    }
    Err(bad())
}

/// Reads a positive duration: seconds (`30`, `0.5`) or Prometheus style (`90s`, `5m`,
/// `1h30m`, `2d`, `1w`, `500ms`).
pub(super) fn parse_duration(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let bad = || format!("cannot read the duration `{s}`: use e.g. `30s`, `5m`, `1h` or seconds");
    if let Ok(n) = s.parse::<f64>() {
        return if n.is_finite() && n > 0.0 {
            Ok(n)
        } else {
            Err(bad())
        };
    }
    let mut total = 0.0;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "w" => 604_800.0,
            "y" => 31_536_000.0,
            _ => return Err(bad()),
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    if total > 0.0 { Ok(total) } else { Err(bad()) }
}

/// A round step giving at most about [`TARGET_POINTS`] points over `range` seconds.
pub(super) fn default_step(range: f64) -> f64 {
    const NICE: [f64; 20] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0,
        3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0,
    ];
    let raw = range / TARGET_POINTS;
    NICE.iter()
        .copied()
        .find(|&s| s >= raw)
        .unwrap_or_else(|| (raw / 86400.0).ceil() * 86400.0)
}

pub(super) fn fmt_step(step: f64) -> String {
    if step >= 3600.0 && step % 3600.0 == 0.0 {
        format!("{}h", step / 3600.0)
    } else if step >= 60.0 && step % 60.0 == 0.0 {
        format!("{}m", step / 60.0)
    } else {
        format!("{}s", render::fmt_num(step))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations() {
        let now = 1_714_557_600.0;
        assert_eq!(parse_time("now", now), Ok(now));
        assert_eq!(parse_time("now-1h", now), Ok(now - 3600.0));
        assert_eq!(parse_time("now + 5m", now), Ok(now + 300.0));
        assert_eq!(parse_time("-30m", now), Ok(now - 1800.0));
        assert_eq!(parse_time("1714557600", now), Ok(now));
        assert_eq!(parse_time("1714557600500", now), Ok(now + 0.5));
        assert_eq!(parse_time("2024-05-01T10:00:00Z", now), Ok(now));
        assert_eq!(parse_time("2024-05-01T12:00:00+02:00", now), Ok(now));
        assert_eq!(parse_time("2024-05-01 10:00:00", now), Ok(now));
        assert_eq!(parse_time("2024-05-01", now), Ok(now - 36000.0));
        assert!(
            parse_time("yesterday", now)
                .unwrap_err()
                .contains("RFC 3339")
        );
        assert!(parse_time("nan", now).is_err());
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("15"), Ok(15.0));
        assert_eq!(parse_duration("500ms"), Ok(0.5));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("m").is_err());
        assert_eq!(default_step(3600.0), 20.0);
        assert_eq!(default_step(60.0), 1.0);
        assert_eq!(default_step(86400.0 * 7.0), 3600.0);
        assert_eq!(fmt_step(20.0), "20s");
        assert_eq!(fmt_step(300.0), "5m");
        assert_eq!(api_time(1714557600.0), "1714557600");
        assert_eq!(api_time(1714557600.25), "1714557600.25");
    }
}
