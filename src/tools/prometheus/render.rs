//! Turns Prometheus API results into compact text for the LLM: one line per series for
//! instant vectors, a statistical summary plus a few downsampled points per series for range
//! matrices, and a note on whatever was left out.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

/// Downsampled points listed per series when few series are shown…
const POINTS_FEW_SERIES: usize = 20;
/// …and when many are (to keep the whole answer within budget).
const POINTS_MANY_SERIES: usize = 8;
const MANY_SERIES: usize = 10;
/// Longest annotation text shown per alert.
const MAX_ANNOTATION_CHARS: usize = 300;

/// A rendered result: `None` when the query matched no series.
pub(super) type Rendered = Result<Option<String>, String>;

/// Renders the `data` object of a query or query_range answer
/// (`{"resultType": …, "result": …}`).
pub(super) fn render_result(data: &Value, max_series: usize) -> Rendered {
    let kind = data
        .get("resultType")
        .and_then(Value::as_str)
        .ok_or("unexpected answer from Prometheus: no resultType")?;
    let result = data
        .get("result")
        .ok_or("unexpected answer from Prometheus: no result")?;
    match kind {
        "vector" => render_vector(as_array(result)?, max_series),
        "matrix" => render_matrix(as_array(result)?, max_series),
        "scalar" | "string" => {
            let (ts, value) = sample(result)?;
            Ok(Some(format!(
                "{kind} result: {value} (at {})",
                fmt_time(ts)
            )))
        }
        other => Err(format!(
            "unexpected answer from Prometheus: unknown resultType `{other}`"
        )),
    }
}

fn as_array(v: &Value) -> Result<&Vec<Value>, String> {
    v.as_array()
        .ok_or_else(|| "unexpected answer from Prometheus: result is not a list".to_owned())
}

fn render_vector(series: &[Value], max_series: usize) -> Rendered {
    if series.is_empty() {
        return Ok(None);
    }
    let shown = series.len().min(max_series.max(1));
    let mut out = header(series.len(), shown);
    for s in &series[..shown] {
        let labels = fmt_labels(s.get("metric"));
        let value = if let Some(v) = s.get("value") {
            fmt_value(&sample(v)?.1)
        } else if let Some(h) = s.get("histogram") {
            fmt_histogram(h)
        } else {
            return Err("unexpected answer from Prometheus: a sample has no value".into());
        };
        let _ = writeln!(out, "{labels} {value}");
    }
    omitted(&mut out, series.len(), shown);
    Ok(Some(out.trim_end().to_owned()))
}

fn render_matrix(series: &[Value], max_series: usize) -> Rendered {
    if series.is_empty() {
        return Ok(None);
    }
    let shown = series.len().min(max_series.max(1));
    let max_points = if shown <= MANY_SERIES {
        POINTS_FEW_SERIES
    } else {
        POINTS_MANY_SERIES
    };
    let mut out = header(series.len(), shown);
    for s in &series[..shown] {
        let labels = fmt_labels(s.get("metric"));
        let mut points: Vec<(f64, String)> = Vec::new();
        if let Some(values) = s.get("values").and_then(Value::as_array) {
            for v in values {
                points.push(sample(v)?);
            }
        }
        if let Some(hists) = s.get("histograms").and_then(Value::as_array) {
            for h in hists {
                let arr = h.as_array().filter(|a| a.len() == 2);
                let ts = arr.and_then(|a| a[0].as_f64());
                let (Some(arr), Some(ts)) = (arr, ts) else {
                    return Err("unexpected answer from Prometheus: malformed histogram".into());
                };
                points.push((ts, fmt_histogram(&arr[1])));
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let _ = writeln!(out, "\n{labels}");
        series_summary(&mut out, &points, max_points);
    }
    out.push('\n');
    omitted(&mut out, series.len(), shown);
    Ok(Some(out.trim_end().to_owned()))
}

fn series_summary(out: &mut String, points: &[(f64, String)], max_points: usize) {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        out.push_str("  no points\n");
        return;
    };
    let _ = write!(
        out,
        "  {} from {} to {}",
        plural(points.len(), "point"),
        fmt_time(first.0),
        fmt_time(last.0)
    );
    let numbers: Vec<f64> = points
        .iter()
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .collect();
    if numbers.is_empty() {
        let _ = writeln!(out, "; last {}", fmt_value(&last.1));
    } else {
        let min = numbers.iter().copied().fold(f64::INFINITY, f64::min);
        let max = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let avg = numbers.iter().sum::<f64>() / numbers.len() as f64;
        let _ = writeln!(
            out,
            "; min {}, max {}, avg {}, last {}",
            fmt_num(min),
            fmt_num(max),
            fmt_num(avg),
            fmt_value(&last.1)
        );
    }
    if points.len() == 1 {
        return;
    }
    let picked = downsample(points.len(), max_points);
    let span = last.0 - first.0;
    let label = if picked.len() == points.len() {
        "values".to_owned()
    } else {
        format!("{} of the values, evenly spaced", picked.len())
    };
    let listed: Vec<String> = picked
        .iter()
        .map(|&i| {
            let (ts, value) = &points[i];
            format!("{} {}", fmt_short_time(*ts, span), fmt_value(value))
        })
        .collect();
    let _ = writeln!(out, "  {label}: {}", listed.join(", "));
}

/// Indices of at most `max` evenly spaced points, always keeping the first and the last.
pub(super) fn downsample(len: usize, max: usize) -> Vec<usize> {
    if len <= max {
        return (0..len).collect();
    }
    if max < 2 {
        return (0..max).collect();
    }
    let mut picked: Vec<usize> = (0..max)
        .map(|k| ((k * (len - 1)) as f64 / (max - 1) as f64).round() as usize)
        .collect();
    picked.dedup();
    picked
}

fn header(total: usize, shown: usize) -> String {
    if total == shown {
        format!("{total} series:\n")
    } else {
        format!("{total} series (showing the first {shown}):\n")
    }
}

fn omitted(out: &mut String, total: usize, shown: usize) {
    if total > shown {
        let _ = writeln!(
            out,
            "… {} more series omitted. Narrow the query with label matchers, or aggregate \
             (e.g. `sum by (job) (…)`, `topk(10, …)`).",
            total - shown
        );
    }
}

/// `[<unix seconds>, "<value>"]`.
fn sample(v: &Value) -> Result<(f64, String), String> {
    let bad = || "unexpected answer from Prometheus: malformed sample".to_owned();
    let arr = v.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
    let ts = arr[0].as_f64().ok_or_else(bad)?;
    let value = match &arr[1] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok((ts, value))
}

fn fmt_histogram(h: &Value) -> String {
    let field = |k: &str| {
        h.get(k)
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_else(|| "?".into())
    };
    format!("histogram(count={}, sum={})", field("count"), field("sum"))
}

/// `name{a="b", c="d"}`, Prometheus style; `{}` for a series without labels.
pub(super) fn fmt_labels(metric: Option<&Value>) -> String {
    let empty = Map::new();
    let labels = metric.and_then(Value::as_object).unwrap_or(&empty);
    let name = labels
        .get("__name__")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let pairs: Vec<String> = labels
        .iter()
        .filter(|(k, _)| k.as_str() != "__name__")
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v.as_str().unwrap_or_default())))
        .collect();
    if !name.is_empty() && pairs.is_empty() {
        return name.to_owned();
    }
    format!("{name}{{{}}}", pairs.join(", "))
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Unix seconds as RFC 3339 UTC.
pub(super) fn fmt_time(ts: f64) -> String {
    match to_datetime(ts) {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        None => fmt_num(ts),
    }
}

/// A shorter timestamp for point lists: the time of day when the series spans less than a
/// day (its full first and last times are printed beside it).
fn fmt_short_time(ts: f64, span: f64) -> String {
    match to_datetime(ts) {
        Some(t) if span < 86_400.0 => t.format("%H:%M:%S").to_string(),
        Some(t) => t.format("%Y-%m-%dT%H:%M").to_string(),
        None => fmt_num(ts),
    }
}

fn to_datetime(ts: f64) -> Option<DateTime<Utc>> {
    if !ts.is_finite() {
        return None;
    }
    let ms = (ts * 1000.0).round() as i64;
    DateTime::from_timestamp_millis(ms)
}

/// A number with at most ~6 significant digits, without trailing zeros.
pub(super) fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let abs = v.abs();
    if !(1e-4..1e15).contains(&abs) {
        let s = format!("{v:.4e}");
        return match s.split_once('e') {
            Some((mantissa, exp)) if mantissa.contains('.') => format!(
                "{}e{exp}",
                mantissa.trim_end_matches('0').trim_end_matches('.')
            ),
            _ => s,
        };
    }
    let decimals = (5 - abs.log10().floor() as i32).clamp(0, 10) as usize;
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    };
    if s == "-0" { "0".into() } else { s }
}

/// A sample value for display: numbers compacted by [`fmt_num`], anything else as it came.
fn fmt_value(raw: &str) -> String {
    raw.parse::<f64>()
        .map(fmt_num)
        .unwrap_or_else(|_| raw.to_owned())
}

/// "1 point", "3 points".
pub(super) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Renders the `data` of `/api/v1/alerts`; `None` when no alert is pending or firing.
pub(super) fn render_alerts(data: &Value, max: usize) -> Rendered {
    let alerts = data
        .get("alerts")
        .and_then(Value::as_array)
        .ok_or("unexpected answer from Prometheus: no alerts list")?;
    if alerts.is_empty() {
        return Ok(None);
    }
    let state = |a: &Value| {
        a.get("state")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned()
    };
    let active_at = |a: &Value| {
        a.get("activeAt")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut sorted: Vec<&Value> = alerts.iter().collect();
    // Firing first, then the oldest first.
    sorted.sort_by_key(|a| (state(a) != "firing", active_at(a)));
    let firing = sorted.iter().filter(|a| state(a) == "firing").count();
    let pending = sorted.iter().filter(|a| state(a) == "pending").count();
    let mut out = format!(
        "{} ({firing} firing, {pending} pending):\n",
        plural(sorted.len(), "alert")
    );
    let shown = sorted.len().min(max.max(1));
    for a in &sorted[..shown] {
        let labels = a.get("labels").and_then(Value::as_object);
        let name = labels
            .and_then(|l| l.get("alertname"))
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)");
        let mut line = format!("- {name} [{}]", state(a));
        let since = active_at(a);
        if !since.is_empty() {
            let since = DateTime::parse_from_rfc3339(&since)
                .map(|t| {
                    t.with_timezone(&Utc)
                        .to_rfc3339_opts(SecondsFormat::Secs, true)
                })
                .unwrap_or(since);
            let _ = write!(line, " since {since}");
        }
        if let Some(v) = a.get("value").and_then(Value::as_str) {
            let _ = write!(line, ", value {}", fmt_value(v));
        }
        let annotations = a.get("annotations").and_then(Value::as_object);
        let text = ["summary", "description", "message"]
            .iter()
            .find_map(|k| annotations.and_then(|m| m.get(*k)).and_then(Value::as_str));
        if let Some(text) = text {
            let _ = write!(line, ": {}", clip(text.trim(), MAX_ANNOTATION_CHARS));
        }
        let other: Vec<String> = labels
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "alertname")
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v.as_str().unwrap_or_default())))
            .collect();
        let _ = writeln!(out, "{line}\n    labels: {{{}}}", other.join(", "));
        if let Some(url) = annotations
            .and_then(|m| m.get("runbook_url"))
            .and_then(Value::as_str)
        {
            let _ = writeln!(out, "    runbook: {url}");
        }
    }
    if sorted.len() > shown {
        let _ = writeln!(out, "… {} more alerts omitted.", sorted.len() - shown);
    }
    Ok(Some(out.trim_end().to_owned()))
}

fn clip(s: &str, max_chars: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_an_instant_vector() {
        let data = json!({"resultType":"vector","result":[
            {"metric":{"__name__":"up","job":"prometheus","instance":"localhost:9090"},"value":[1714557600.0,"1"]},
            {"metric":{"job":"node","path":"C:\\x \"y\""},"value":[1714557600.0,"0.25"]},
            {"metric":{},"value":[1714557600.0,"NaN"]}
        ]});
        let text = render_result(&data, 50).unwrap().unwrap();
        assert_eq!(
            text,
            "3 series:\n\
             up{instance=\"localhost:9090\", job=\"prometheus\"} 1\n\
             {job=\"node\", path=\"C:\\\\x \\\"y\\\"\"} 0.25\n\
             {} NaN"
        );
    }

    #[test]
    fn caps_the_number_of_series() {
        let result: Vec<Value> = (0..7)
            .map(|i| json!({"metric":{"__name__":"m","i":i.to_string()},"value":[1.0,"1"]}))
            .collect();
        let data = json!({"resultType":"vector","result":result});
        let text = render_result(&data, 3).unwrap().unwrap();
        assert!(
            text.starts_with("7 series (showing the first 3):\n"),
            "{text}"
        );
        assert!(text.contains("m{i=\"2\"} 1"));
        assert!(!text.contains("m{i=\"3\"}"));
        assert!(text.contains("4 more series omitted"), "{text}");
    }

    #[test]
    fn summarises_a_matrix() {
        let values: Vec<Value> = (0..100)
            .map(|i| json!([1714557600.0 + 15.0 * i as f64, (i % 10).to_string()]))
            .collect();
        let data = json!({"resultType":"matrix","result":[
            {"metric":{"__name__":"rate","pod":"api-1"},"values":values},
            {"metric":{"pod":"api-2"},"values":[[1714557600.0,"2.5"],[1714557615.0,"+Inf"]]}
        ]});
        let text = render_result(&data, 50).unwrap().unwrap();
        assert!(
            text.starts_with("2 series:\n\nrate{pod=\"api-1\"}\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  100 points from 2024-05-01T10:00:00Z to 2024-05-01T10:24:45Z; \
                 min 0, max 9, avg 4.5, last 9\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  20 of the values, evenly spaced: 10:00:00 0, 10:01:15 5,"),
            "{text}"
        );
        assert!(text.contains(", 10:24:45 9\n"), "{text}");
        assert!(
            text.contains(
                "{pod=\"api-2\"}\n  2 points from 2024-05-01T10:00:00Z to \
                 2024-05-01T10:00:15Z; min 2.5, max 2.5, avg 2.5, last +Inf\n  \
                 values: 10:00:00 2.5, 10:00:15 +Inf"
            ),
            "{text}"
        );
    }

    #[test]
    fn empty_results_are_none_and_scalars_render() {
        let data = json!({"resultType":"vector","result":[]});
        assert_eq!(render_result(&data, 50), Ok(None));
        let data = json!({"resultType":"matrix","result":[]});
        assert_eq!(render_result(&data, 50), Ok(None));
        let data = json!({"resultType":"scalar","result":[1714557600.5,"42"]});
        assert_eq!(
            render_result(&data, 50),
            Ok(Some(
                "scalar result: 42 (at 2024-05-01T10:00:00.500Z)".into()
            ))
        );
        let err = render_result(&json!({"resultType":"vector"}), 50).unwrap_err();
        assert!(err.contains("no result"));
        let err = render_result(
            &json!({"resultType":"vector","result":[{"metric":{},"value":[1]}]}),
            50,
        )
        .unwrap_err();
        assert!(err.contains("malformed sample"));
    }

    #[test]
    fn downsampling_keeps_ends() {
        assert_eq!(downsample(5, 20), vec![0, 1, 2, 3, 4]);
        let d = downsample(100, 20);
        assert_eq!(d.len(), 20);
        assert_eq!(d[0], 0);
        assert_eq!(d[19], 99);
        assert_eq!(downsample(0, 20), Vec::<usize>::new());
    }

    #[test]
    fn numbers_are_compact() {
        assert_eq!(fmt_num(1.0), "1");
        assert_eq!(fmt_num(1.0 / 3.0), "0.333333");
        assert_eq!(fmt_num(1234.56789), "1234.57");
        assert_eq!(fmt_num(0.000012345), "1.2345e-5");
        assert_eq!(fmt_num(1.5e-7), "1.5e-7");
        assert_eq!(fmt_num(2e20), "2e20");
        assert_eq!(fmt_value("0.22550833333333334"), "0.225508");
        assert_eq!(fmt_value("+Inf"), "+Inf");
        assert_eq!(fmt_value("n/a"), "n/a");
        assert_eq!(fmt_num(-2.5), "-2.5");
        assert_eq!(fmt_num(f64::NAN), "NaN");
    }

    #[test]
    fn renders_alerts() {
        let data = json!({"alerts":[
            {"labels":{"alertname":"Pending1","severity":"warning"},"annotations":{},
             "state":"pending","activeAt":"2024-05-01T10:05:00.123456789Z","value":"0.5"},
            {"labels":{"alertname":"HighErrorRate","severity":"critical","service":"api"},
             "annotations":{"summary":"Error rate   above\n5%","runbook_url":"https://runbooks/x"},
             "state":"firing","activeAt":"2024-05-01T10:00:00Z","value":"1e+00"}
        ]});
        let text = render_alerts(&data, 50).unwrap().unwrap();
        assert_eq!(
            text,
            "2 alerts (1 firing, 1 pending):\n\
             - HighErrorRate [firing] since 2024-05-01T10:00:00Z, value 1: Error rate above 5%\n    \
             labels: {service=\"api\", severity=\"critical\"}\n    \
             runbook: https://runbooks/x\n\
             - Pending1 [pending] since 2024-05-01T10:05:00Z, value 0.5\n    \
             labels: {severity=\"warning\"}"
        );
        assert_eq!(render_alerts(&json!({"alerts":[]}), 50), Ok(None));
    }
}
