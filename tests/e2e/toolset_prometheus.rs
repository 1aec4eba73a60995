//! The `prometheus` toolset against a REAL Prometheus server (Debian's `prometheus` package)
//! that scrapes itself every second and evaluates an always-firing alerting rule.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use triage::tools::prometheus::{PrometheusConfig, toolset};
use triage::tools::{ToolOutput, ToolsetStatus};
use triage::wire::events::ToolStatus;

use crate::helpers::{call, tool};
use crate::helpers::{eventually, http_client};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const READY_WITHIN: Duration = Duration::from_secs(20);

/// A running Prometheus; killed (and its data removed) on drop.
struct PromServer {
    url: String,
    dir: PathBuf,
    child: Option<tokio::process::Child>,
}

impl Drop for PromServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl PromServer {
    fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// These tests need the real server; say so loudly instead of passing without it.
fn require_prometheus() {
    assert!(
        Path::new(PROMETHEUS).exists(),
        "{PROMETHEUS} is missing: the prometheus toolset tests drive a real Prometheus server; \
         `.ci/run` installs Debian's `prometheus` package (apt-get install prometheus)"
    );
}

async fn start_prometheus() -> PromServer {
    require_prometheus();
    let port = crate::helpers::free_port();
    let dir = crate::helpers::scratch().join(format!("prom-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data")).expect("create the Prometheus directory");
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - rules.yml\n\
             scrape_configs:\n  - job_name: prometheus\n    static_configs:\n      \
             - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .expect("write prometheus.yml");
    std::fs::write(
        dir.join("rules.yml"),
        "groups:\n  - name: test\n    rules:\n      - alert: TriageTestAlwaysFiring\n        \
         expr: vector(1)\n        labels:\n          severity: info\n        annotations:\n          \
         summary: This alert always fires\n          runbook_url: https://runbooks.example/always\n",
    )
    .expect("write rules.yml");
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("create the log file");
    let log_err = log.try_clone().expect("clone the log file");
    let child = tokio::process::Command::new(PROMETHEUS)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-lifecycle")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {PROMETHEUS}: {e}"));
    let server = PromServer {
        url: format!("http://127.0.0.1:{port}"),
        dir,
        child: Some(child),
    };
    wait_until_scraped(&server).await;
    server
}

/// Waits until Prometheus is ready, has a few samples of `up`, and the alert fires.
async fn wait_until_scraped(server: &PromServer) {
    let client = http_client();
    let ready_url = format!("{}/-/ready", server.url);
    let samples = format!(
        "{}/api/v1/query?query=count_over_time(up%5B1m%5D)%20%3E%3D%203",
        server.url
    );
    let alerts = format!("{}/api/v1/alerts", server.url);
    let stage = std::cell::Cell::new("ready");
    let what = format!(
        "Prometheus at {} to be ready, scraped, alerting",
        server.url
    );
    eventually(&what, READY_WITHIN, || async {
        let done = match stage.get() {
            "ready" => get_ok(&client, &ready_url).await.is_some(),
            "samples" => get_ok(&client, &samples)
                .await
                .is_some_and(|b| b.contains("\"job\":\"prometheus\"")),
            _ => get_ok(&client, &alerts)
                .await
                .is_some_and(|b| b.contains("\"state\":\"firing\"")),
        };
        match (done, stage.get()) {
            (true, "alert") => return Ok(()),
            (true, "ready") => stage.set("samples"),
            (true, _) => stage.set("alert"),
            (false, _) => {}
        }
        Err(format!(
            "stage `{}`; its log:\n{}",
            stage.get(),
            server.log()
        ))
    })
    .await
}

async fn get_ok(client: &reqwest::Client, url: &str) -> Option<String> {
    let resp = client.get(url).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.text().await.ok()
}

fn ok(out: &ToolOutput) -> &str {
    assert_eq!(out.status, ToolStatus::Success, "{out:?}");
    &out.data
}

#[tokio::test]
async fn tools_against_a_real_prometheus() {
    let server = start_prometheus().await;
    let client = http_client();
    let cfg = PrometheusConfig {
        url: Some(server.url.clone()),
        ..PrometheusConfig::default()
    };
    let ts = toolset(&cfg, &client).await;
    assert_eq!(ts.status, ToolsetStatus::Enabled, "{}", server.log());
    let names: Vec<&str> = ts.tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "prometheus_query",
            "prometheus_query_range",
            "prometheus_list_metrics",
            "prometheus_list_labels",
            "prometheus_active_alerts"
        ]
    );
    assert!(
        ts.instructions.contains("version 2."),
        "{}",
        ts.instructions
    );
    assert!(ts.instructions.contains("rate("), "{}", ts.instructions);

    // Instant query: the self-scrape target is up.
    let params = json!({"query": "up"});
    assert_eq!(
        tool(&ts, "prometheus_query").one_liner(&params),
        "PromQL instant query: up"
    );
    let out = call(&ts, "prometheus_query", params).await;
    let text = ok(&out);
    assert!(text.starts_with("Instant query `up` at "), "{text}");
    assert!(text.contains("returned 1 series:"), "{text}");
    let port = server.url.rsplit(':').next().unwrap_or_default();
    assert!(
        text.contains(&format!(
            "up{{instance=\"127.0.0.1:{port}\", job=\"prometheus\"}} 1"
        )),
        "{text}"
    );
    assert!(
        out.invocation
            .as_deref()
            .is_some_and(|i| i.contains("/api/v1/query?query=up")),
        "{out:?}"
    );

    // Explicit times: unix seconds as a number, and one before the server started.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let out = call(&ts, "prometheus_query", json!({"query": "up", "time": now})).await;
    assert!(ok(&out).contains("job=\"prometheus\"} 1"), "{out:?}");
    let out = call(
        &ts,
        "prometheus_query",
        json!({"query": "up", "time": "now-1h"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::NoData, "{out:?}");

    // Range query: the summary of the series over the last minute.
    let out = call(
        &ts,
        "prometheus_query_range",
        json!({"query": "up{job=\"prometheus\"}", "start": "now-1m", "step": "1s"}),
    )
    .await;
    let text = ok(&out);
    assert!(
        text.starts_with("Range query `up{job=\"prometheus\"}` from "),
        "{text}"
    );
    assert!(text.contains("(step 1s) returned 1 series:"), "{text}");
    let points: usize = text
        .split_once("\n  ")
        .and_then(|(_, rest)| rest.split_once(" points"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no point count in {text}"));
    assert!(points >= 3, "{text}");
    assert!(text.contains("min 1, max 1, avg 1, last 1"), "{text}");
    assert!(text.contains("values") && text.contains(" 1, "), "{text}");

    // Default range (last hour) with a rate over a counter.
    let out = call(
        &ts,
        "prometheus_query_range",
        json!({"query": "sum(rate(prometheus_http_requests_total[1m]))"}),
    )
    .await;
    assert!(
        ok(&out).contains("(step 20s) returned 1 series:"),
        "{out:?}"
    );

    // Metric names, filtered.
    let out = call(
        &ts,
        "prometheus_list_metrics",
        json!({"match": "^prometheus_build"}),
    )
    .await;
    let text = ok(&out);
    assert!(
        text.starts_with("1 metric name matching `^prometheus_build`:\nprometheus_build_info"),
        "{text}"
    );
    let out = call(&ts, "prometheus_list_metrics", json!({})).await;
    let text = ok(&out);
    assert!(text.contains("\nprometheus_build_info\n"), "{text}");
    assert!(text.contains("\nup\n") || text.ends_with("\nup"), "{text}");
    let out = call(
        &ts,
        "prometheus_list_metrics",
        json!({"match": "no_such_metric_anywhere"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::NoData, "{out:?}");

    // Labels of a metric, and the values of one label.
    let out = call(&ts, "prometheus_list_labels", json!({"metric": "up"})).await;
    let text = ok(&out);
    assert!(
        text.starts_with("3 label names on series matching `up`:\n__name__, instance, job"),
        "{text}"
    );
    let out = call(
        &ts,
        "prometheus_list_labels",
        json!({"metric": "up", "label": "job"}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "1 value of label `job` on series matching `up`:\nprometheus"
    );

    // The always-firing rule.
    let out = call(&ts, "prometheus_active_alerts", json!({})).await;
    let text = ok(&out);
    assert!(
        text.starts_with(
            "1 alert (1 firing, 0 pending):\n- TriageTestAlwaysFiring [firing] since "
        ),
        "{text}"
    );
    assert!(text.contains(": This alert always fires\n"), "{text}");
    assert!(text.contains("labels: {severity=\"info\"}"), "{text}");
    assert!(
        text.contains("runbook: https://runbooks.example/always"),
        "{text}"
    );

    // Errors: bad PromQL, an unknown parameter, a query matching nothing.
    let out = call(&ts, "prometheus_query", json!({"query": "rate(up[5m]"})).await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    let err = out.error.unwrap_or_default();
    assert!(err.starts_with("Prometheus error (bad_data):"), "{err}");
    assert!(err.contains("parse error"), "{err}");
    let out = call(&ts, "prometheus_query", json!({"query": "up", "at": "x"})).await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    let out = call(
        &ts,
        "prometheus_query",
        json!({"query": "up", "time": "yesterday"}),
    )
    .await;
    assert!(
        out.error.as_deref().is_some_and(|e| e.contains("RFC 3339")),
        "{out:?}"
    );
    let out = call(
        &ts,
        "prometheus_query",
        json!({"query": "up{job=\"no-such-job\"}"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::NoData, "{out:?}");
    assert!(
        out.data
            .starts_with("The query `up{job=\"no-such-job\"}` matched no series at "),
        "{out:?}"
    );
    let out = call(
        &ts,
        "prometheus_query_range",
        json!({"query": "up", "start": "now", "end": "now-1h"}),
    )
    .await;
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.contains("must be before")),
        "{out:?}"
    );

    // Without the start-up check, a server that goes away gives a readable tool error.
    let unchecked = toolset(
        &PrometheusConfig {
            url: Some(server.url.clone()),
            check_on_startup: false,
            ..PrometheusConfig::default()
        },
        &client,
    )
    .await;
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    drop(server);
    eventually(
        "the Prometheus server to be gone",
        Duration::from_secs(10),
        || async { std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err() },
    )
    .await;
    let out = call(&unchecked, "prometheus_query", json!({"query": "up"})).await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.starts_with("cannot reach Prometheus at http://127.0.0.1:")),
        "{out:?}"
    );
}

#[tokio::test]
async fn unreachable_prometheus_is_unavailable_with_a_reason() {
    let client = http_client();
    let port = crate::helpers::free_port();
    let cfg = PrometheusConfig {
        url: Some(format!("http://127.0.0.1:{port}")),
        ..PrometheusConfig::default()
    };
    let started = Instant::now();
    let ts = toolset(&cfg, &client).await;
    let ToolsetStatus::Unavailable(reason) = &ts.status else {
        panic!("expected unavailable, got {:?}", ts.status);
    };
    assert!(
        reason.starts_with(&format!(
            "cannot reach Prometheus at http://127.0.0.1:{port}: "
        )),
        "{reason}"
    );
    assert!(
        reason.to_lowercase().contains("connection refused"),
        "{reason}"
    );
    assert!(ts.tools.is_empty());
    assert!(started.elapsed() < Duration::from_secs(5));

    let ts = toolset(&PrometheusConfig::default(), &client).await;
    assert_eq!(
        ts.status,
        ToolsetStatus::Unavailable(
            "set toolsets.prometheus.url to the Prometheus server's URL".into()
        )
    );
}
