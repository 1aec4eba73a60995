//! The kubectl commands of the toolset: typed, validated parameters and the argv they become.
//! Every value that reaches kubectl's argv is checked first ([`super::values`]), so nothing can
//! pass as a flag (a name starting with `-`) or read secrets.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::KubectlTool;
use super::run::Kubectl;
use super::values::{
    duration, kinds, name, namespace, push_namespace, single_kind, single_kind_any,
};
use crate::tools::{Tool, Typed};

/// `tail_lines` when the model gives none.
pub const DEFAULT_TAIL_LINES: u32 = 500;

/// One command of the toolset: its parameters, tool name, description and argv.
pub(super) trait Command: DeserializeOwned + JsonSchema + Send + 'static {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// kubectl's arguments (connection flags aside), every value checked.
    fn argv(&self) -> Result<Vec<String>, String>;
}

/// Every command as a tool, in the order the model sees them.
pub(super) fn tools(kubectl: &Arc<Kubectl>) -> Vec<Arc<dyn Tool>> {
    fn tool<C: Command>(kubectl: &Arc<Kubectl>) -> Arc<dyn Tool> {
        Arc::new(Typed::new(KubectlTool::<C>::new(kubectl.clone())))
    }
    vec![
        tool::<GetByName>(kubectl),
        tool::<GetByKindInNamespace>(kubectl),
        tool::<GetByKindInCluster>(kubectl),
        tool::<Describe>(kubectl),
        tool::<Logs>(kubectl),
        tool::<Events>(kubectl),
        tool::<TopPods>(kubectl),
        tool::<TopNodes>(kubectl),
    ]
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetByName {
    /// Resource kind, e.g. `pod`, `deployment`, `node`, `deployments.apps`.
    kind: String,
    /// The resource's name.
    name: String,
    /// Namespace of a namespaced resource; omit for cluster-scoped kinds.
    #[serde(default)]
    namespace: Option<String>,
}

impl Command for GetByName {
    const NAME: &'static str = "kubectl_get_by_name";
    const DESCRIPTION: &'static str = "Get one Kubernetes resource by kind and name (`kubectl get \
         <kind> <name> -o wide`): status, readiness, restarts, node, IP. Omit `namespace` for \
         cluster-scoped kinds (nodes, namespaces…).";

    fn argv(&self) -> Result<Vec<String>, String> {
        let mut argv = vec!["get".into(), kinds(&self.kind)?, name("name", &self.name)?];
        push_namespace(&mut argv, self.namespace.as_deref())?;
        argv.extend(["-o".into(), "wide".into()]);
        Ok(argv)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetByKindInNamespace {
    /// Resource kind, e.g. `pods`, `deployments`, `services`; several comma-separated.
    kind: String,
    /// The namespace.
    namespace: String,
}

impl Command for GetByKindInNamespace {
    const NAME: &'static str = "kubectl_get_by_kind_in_namespace";
    const DESCRIPTION: &'static str = "List all resources of a kind in one namespace (`kubectl get \
         <kind> -n <namespace> -o wide`), e.g. pods, deployments, services, jobs. Several kinds \
         may be given comma-separated (`pods,services`).";

    fn argv(&self) -> Result<Vec<String>, String> {
        Ok(vec![
            "get".into(),
            kinds(&self.kind)?,
            "-n".into(),
            namespace(&self.namespace)?,
            "-o".into(),
            "wide".into(),
        ])
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetByKindInCluster {
    /// Resource kind, e.g. `pods`, `nodes`, `deployments`; several comma-separated.
    kind: String,
}

impl Command for GetByKindInCluster {
    const NAME: &'static str = "kubectl_get_by_kind_in_cluster";
    const DESCRIPTION: &'static str = "List all resources of a kind in every namespace (`kubectl \
         get <kind> -A -o wide`); use it to find where something runs when the namespace is \
         unknown.";

    fn argv(&self) -> Result<Vec<String>, String> {
        Ok(vec![
            "get".into(),
            kinds(&self.kind)?,
            "-A".into(),
            "-o".into(),
            "wide".into(),
        ])
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Describe {
    /// Resource kind, e.g. `pod`, `deployment`, `node`.
    kind: String,
    /// The resource's name.
    name: String,
    /// Namespace of a namespaced resource; omit for cluster-scoped kinds.
    #[serde(default)]
    namespace: Option<String>,
}

impl Command for Describe {
    const NAME: &'static str = "kubectl_describe";
    const DESCRIPTION: &'static str = "Describe one Kubernetes resource (`kubectl describe <kind> \
         <name>`): full spec and status, container states and last termination reason, conditions \
         and the object's recent events.";

    fn argv(&self) -> Result<Vec<String>, String> {
        let mut argv = vec![
            "describe".into(),
            single_kind(&self.kind)?,
            name("name", &self.name)?,
        ];
        push_namespace(&mut argv, self.namespace.as_deref())?;
        Ok(argv)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Logs {
    /// The pod's name.
    pod: String,
    /// The pod's namespace.
    namespace: String,
    /// Container name; needed only when the pod has several containers.
    #[serde(default)]
    container: Option<String>,
    /// Logs of the previous (terminated) run of the container; default false.
    #[serde(default)]
    previous: Option<bool>,
    /// Number of most recent lines to return; default 500.
    #[serde(default)]
    tail_lines: Option<u32>,
    /// Only logs newer than this duration, e.g. `10m`, `1h`, `2h30m`.
    #[serde(default)]
    since: Option<String>,
}

impl Command for Logs {
    const NAME: &'static str = "kubectl_logs";
    const DESCRIPTION: &'static str = "Logs of a pod's container (`kubectl logs`). Set `previous` \
         to true to read the log of the previous, crashed run of a restarting container \
         (CrashLoopBackOff, RESTARTS > 0). Returns the last `tail_lines` lines (default 500).";

    fn argv(&self) -> Result<Vec<String>, String> {
        let mut argv = vec![
            "logs".into(),
            name("pod", &self.pod)?,
            "-n".into(),
            namespace(&self.namespace)?,
        ];
        if let Some(c) = &self.container {
            argv.extend(["-c".into(), name("container", c)?]);
        }
        if self.previous == Some(true) {
            argv.push("--previous".into());
        }
        argv.push(format!(
            "--tail={}",
            self.tail_lines.unwrap_or(DEFAULT_TAIL_LINES)
        ));
        if let Some(since) = &self.since {
            argv.push(format!("--since={}", duration(since)?));
        }
        Ok(argv)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Events {
    /// Namespace; omit for events of all namespaces.
    #[serde(default)]
    namespace: Option<String>,
    /// Only events about this object, as `kind/name`, e.g. `pod/web-1`, `deployment/api`.
    #[serde(default)]
    for_object: Option<String>,
}

impl Command for Events {
    const NAME: &'static str = "kubectl_events";
    const DESCRIPTION: &'static str = "Kubernetes events (`kubectl events`), oldest first: \
         scheduling failures, image pull errors, back-offs, OOM kills, probe failures. Filter with \
         `namespace` and `for_object` (`kind/name`, e.g. `pod/web-1`); without a namespace, events \
         of all namespaces.";

    fn argv(&self) -> Result<Vec<String>, String> {
        let mut argv = vec!["events".into()];
        match &self.namespace {
            Some(ns) => argv.extend(["-n".into(), namespace(ns)?]),
            None => argv.push("-A".into()),
        }
        if let Some(object) = &self.for_object {
            let Some((kind, object_name)) = object.split_once('/') else {
                return Err(format!(
                    "invalid parameter `for_object`: expected `kind/name` such as `pod/web-1`, got {object:?}"
                ));
            };
            argv.push(format!(
                "--for={}/{}",
                single_kind_any(kind)?,
                name("for_object", object_name)?
            ));
        }
        Ok(argv)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TopPods {
    /// Namespace; omit for pods of all namespaces.
    #[serde(default)]
    namespace: Option<String>,
}

impl Command for TopPods {
    const NAME: &'static str = "kubectl_top_pods";
    const DESCRIPTION: &'static str = "Current CPU and memory usage of pods (`kubectl top pods`), \
         in one namespace or all. Needs metrics-server in the cluster.";

    fn argv(&self) -> Result<Vec<String>, String> {
        let mut argv = vec!["top".into(), "pods".into()];
        match &self.namespace {
            Some(ns) => argv.extend(["-n".into(), namespace(ns)?]),
            None => argv.push("-A".into()),
        }
        Ok(argv)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TopNodes {}

impl Command for TopNodes {
    const NAME: &'static str = "kubectl_top_nodes";
    const DESCRIPTION: &'static str = "Current CPU and memory usage of the nodes (`kubectl top \
         nodes`). Needs metrics-server in the cluster.";

    fn argv(&self) -> Result<Vec<String>, String> {
        Ok(vec!["top".into(), "nodes".into()])
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::tools::parse_params;
    use serde_json::{Value, json};

    /// The argv of the command named `tool` for these parameters.
    pub(in super::super) fn argv_by_name(tool: &str, params: Value) -> Result<Vec<String>, String> {
        fn argv<C: Command>(params: Value) -> Result<Vec<String>, String> {
            parse_params::<C>(&params)?.argv()
        }
        let argv = match tool {
            GetByName::NAME => argv::<GetByName>,
            GetByKindInNamespace::NAME => argv::<GetByKindInNamespace>,
            GetByKindInCluster::NAME => argv::<GetByKindInCluster>,
            Describe::NAME => argv::<Describe>,
            Logs::NAME => argv::<Logs>,
            Events::NAME => argv::<Events>,
            TopPods::NAME => argv::<TopPods>,
            TopNodes::NAME => argv::<TopNodes>,
            _ => return Err(format!("no tool {tool}")),
        };
        argv(params)
    }

    fn build(tool: &str, params: Value) -> Result<String, String> {
        argv_by_name(tool, params).map(|argv| argv.join(" "))
    }

    #[test]
    fn get_commands() {
        assert_eq!(
            build(
                "kubectl_get_by_name",
                json!({"kind":"pod","name":"web-1","namespace":"shop"})
            ),
            Ok("get pod web-1 -n shop -o wide".into())
        );
        assert_eq!(
            build(
                "kubectl_get_by_name",
                json!({"kind":"node","name":"node-1"})
            ),
            Ok("get node node-1 -o wide".into())
        );
        assert_eq!(
            build(
                "kubectl_get_by_name",
                json!({"kind":"clusterrole","name":"system:node","namespace":null})
            ),
            Ok("get clusterrole system:node -o wide".into())
        );
        assert_eq!(
            build(
                "kubectl_get_by_kind_in_namespace",
                json!({"kind":"pods,services","namespace":"shop"})
            ),
            Ok("get pods,services -n shop -o wide".into())
        );
        assert_eq!(
            build(
                "kubectl_get_by_kind_in_cluster",
                json!({"kind":"deployments.apps"})
            ),
            Ok("get deployments.apps -A -o wide".into())
        );
        assert_eq!(
            build(
                "kubectl_describe",
                json!({"kind":"pod","name":"web-1","namespace":"shop"})
            ),
            Ok("describe pod web-1 -n shop".into())
        );
    }

    #[test]
    fn flag_injection_is_refused() {
        for (tool, params) in [
            (
                "kubectl_get_by_name",
                json!({"kind":"pod","name":"--kubeconfig=/x"}),
            ),
            ("kubectl_get_by_name", json!({"kind":"pod","name":"-A"})),
            (
                "kubectl_get_by_name",
                json!({"kind":"--raw=/api","name":"x"}),
            ),
            (
                "kubectl_get_by_name",
                json!({"kind":"pod","name":"x","namespace":"-n"}),
            ),
            ("kubectl_get_by_name", json!({"kind":"pod","name":"a b"})),
            ("kubectl_get_by_name", json!({"kind":"pod","name":"pod/x"})),
            ("kubectl_get_by_name", json!({"kind":"pod","name":""})),
            (
                "kubectl_get_by_kind_in_namespace",
                json!({"kind":"pods","namespace":"--all-namespaces"}),
            ),
            (
                "kubectl_get_by_kind_in_namespace",
                json!({"kind":"pods","namespace":"Shop"}),
            ),
            (
                "kubectl_get_by_kind_in_cluster",
                json!({"kind":"pods,-o=json"}),
            ),
            (
                "kubectl_describe",
                json!({"kind":"pod","name":"--context=prod"}),
            ),
            ("kubectl_logs", json!({"pod":"-f","namespace":"shop"})),
            (
                "kubectl_logs",
                json!({"pod":"web","namespace":"shop","container":"--all-containers"}),
            ),
            (
                "kubectl_logs",
                json!({"pod":"web","namespace":"shop","since":"1h --follow"}),
            ),
            ("kubectl_events", json!({"for_object":"pod/--watch"})),
            ("kubectl_events", json!({"for_object":"web-1"})),
            ("kubectl_top_pods", json!({"namespace":"--containers"})),
        ] {
            let r = build(tool, params.clone());
            assert!(
                r.as_ref()
                    .is_err_and(|e| e.starts_with("invalid parameter")),
                "{tool} {params}: {r:?}"
            );
        }
        let long = "a".repeat(254);
        assert!(build("kubectl_get_by_name", json!({"kind":"pod","name":long})).is_err());
    }

    #[test]
    fn unknown_and_mistyped_parameters_are_refused() {
        let r = build(
            "kubectl_get_by_name",
            json!({"kind":"pod","name":"x","selector":"a=b"}),
        );
        assert!(r.is_err_and(|e| e.contains("selector")));
        let r = build(
            "kubectl_logs",
            json!({"pod":"x","namespace":"y","tail_lines":-5}),
        );
        assert!(r.is_err_and(|e| e.contains("`tail_lines`")));
        let r = build("kubectl_get_by_kind_in_namespace", json!({"kind":"pods"}));
        assert!(r.is_err_and(|e| e.contains("namespace")));
    }

    #[test]
    fn secrets_are_refused() {
        for kind in [
            "secret",
            "secrets",
            "Secret",
            "SECRETS",
            "secret.v1",
            "secrets.v1.",
            "pods,secrets",
        ] {
            for (tool, params) in [
                (
                    "kubectl_get_by_name",
                    json!({"kind":kind,"name":"db-password","namespace":"shop"}),
                ),
                (
                    "kubectl_get_by_kind_in_namespace",
                    json!({"kind":kind,"namespace":"shop"}),
                ),
                ("kubectl_get_by_kind_in_cluster", json!({"kind":kind})),
                (
                    "kubectl_describe",
                    json!({"kind":kind,"name":"db-password","namespace":"shop"}),
                ),
            ] {
                if tool == "kubectl_describe" && kind.contains(',') {
                    assert!(build(tool, params).is_err());
                    continue;
                }
                assert_eq!(
                    build(tool, params),
                    Err("reading secrets is not allowed".into()),
                    "{tool} {kind}"
                );
            }
        }
        assert_eq!(
            build(
                "kubectl_get_by_kind_in_cluster",
                json!({"kind":"sealedsecrets.bitnami.com"})
            ),
            Ok("get sealedsecrets.bitnami.com -A -o wide".into())
        );
        // Events about a secret reveal no secret data.
        assert_eq!(
            build(
                "kubectl_events",
                json!({"namespace":"shop","for_object":"secret/tls"})
            ),
            Ok("events -n shop --for=secret/tls".into())
        );
    }

    #[test]
    fn logs_flags() {
        assert_eq!(
            build("kubectl_logs", json!({"pod":"web-1","namespace":"shop"})),
            Ok("logs web-1 -n shop --tail=500".into())
        );
        assert_eq!(
            build(
                "kubectl_logs",
                json!({"pod":"web-1","namespace":"shop","container":"app","previous":true,"tail_lines":50,"since":"1h30m"})
            ),
            Ok("logs web-1 -n shop -c app --previous --tail=50 --since=1h30m".into())
        );
        assert_eq!(
            build(
                "kubectl_logs",
                json!({"pod":"web-1","namespace":"shop","previous":false,"container":null})
            ),
            Ok("logs web-1 -n shop --tail=500".into())
        );
        for bad in ["", "1", "h", "1d", "10mm", "-1h", "1.5h"] {
            assert!(
                build(
                    "kubectl_logs",
                    json!({"pod":"w","namespace":"s","since":bad})
                )
                .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn events_and_top() {
        assert_eq!(build("kubectl_events", json!({})), Ok("events -A".into()));
        assert_eq!(
            build(
                "kubectl_events",
                json!({"namespace":"shop","for_object":"pod/web-1"})
            ),
            Ok("events -n shop --for=pod/web-1".into())
        );
        assert_eq!(
            build(
                "kubectl_events",
                json!({"for_object":"deployment.apps/api"})
            ),
            Ok("events -A --for=deployment.apps/api".into())
        );
        assert_eq!(
            build("kubectl_top_pods", json!({})),
            Ok("top pods -A".into())
        );
        assert_eq!(
            build("kubectl_top_pods", json!({"namespace":"shop"})),
            Ok("top pods -n shop".into())
        );
        assert_eq!(
            build("kubectl_top_nodes", json!({})),
            Ok("top nodes".into())
        );
        assert!(build("kubectl_top_nodes", json!({"namespace":"x"})).is_err());
    }
}
