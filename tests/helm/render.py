"""Renders deploy/helm/triage with Helm's own engine, lints it and validates every object.

    python render.py CHART [--values FILE]... [--name NAME] [--namespace NS] [--kubeconfig F]

With --kubeconfig the render is an upgrade's, cluster-aware: `lookup` reads that cluster (and
nothing else contacts it); without, `lookup` finds nothing, as under `helm template`.

Values files are YAML (JSON is YAML too), merged in order as `helm -f a -f b` merges them.
Prints one JSON object: {"ok": true, "objects": [...], "notes": "...", "lint": [...],
"kube_version": "1.37"} or {"ok": false, "stage": "render" | "lint" | "validate", "error":
"..."}. Exits 0 either way, so the caller reads why; 2 on a usage error.
"""

import argparse
import json
import sys

import helm_python
import kubernetes_validate
import yaml

# Lint severities (helm_python.lint): 3 is an error, and strict linting makes warnings errors;
# infos (such as "icon is recommended") are reported, not failures.
LINT_ERROR = 3


def merge(base, override):
    """Maps merge key by key; anything else is replaced (Helm's coalescing of -f files)."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base.get(key), value) if key in base else value
        return merged
    return override


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("chart")
    parser.add_argument("--values", action="append", default=[])
    parser.add_argument("--name", default="triage")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--kubeconfig")
    args = parser.parse_args()

    values = {}
    for path in args.values:
        with open(path, encoding="utf-8") as f:
            values = merge(values, yaml.safe_load(f) or {})

    def answer(**fields):
        print(json.dumps(fields))
        sys.exit(0)

    try:
        with helm_python.Chart.load(args.chart) as chart:
            if args.kubeconfig:
                with helm_python.Config(
                    kubeconfig_path=args.kubeconfig, namespace=args.namespace
                ) as cluster:
                    manifests = cluster.render(
                        chart, values, name=args.name, namespace=args.namespace, is_upgrade=True
                    )
            else:
                manifests = chart.render(
                    values, name=args.name, namespace=args.namespace, is_install=True
                )
    except helm_python.HelmError as e:
        answer(ok=False, stage="render", error=str(e))

    report = helm_python.lint(args.chart, values, namespace=args.namespace, strict=True)
    errors = [m for m in report.get("messages", []) if m.get("severity") == LINT_ERROR]
    if errors or report.get("errors"):
        answer(ok=False, stage="lint", error=json.dumps(errors + report.get("errors", [])))

    kube_version = kubernetes_validate.latest_version()
    objects, notes = [], ""
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        for obj in yaml.safe_load_all(text):
            if not obj:
                continue
            try:
                kubernetes_validate.validate(obj, kube_version, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = "%s %s (%s)" % (obj.get("kind"), obj.get("metadata", {}).get("name"), path)
                answer(ok=False, stage="validate", error="%s: %s at %s" % (where, e.message, list(e.path)))
            except kubernetes_validate.SchemaNotFoundError as e:
                answer(ok=False, stage="validate", error=e.message)
            objects.append(obj)

    answer(
        ok=True,
        objects=objects,
        notes=notes,
        lint=report.get("messages", []),
        kube_version=kube_version,
    )


if __name__ == "__main__":
    main()
