#!/usr/bin/env bash
# Checks what deploy/ ships, without a cluster or a network: the Helm chart (helm lint --strict and
# helm template over every values file in its ci/ folder, each rendered object strictly decoded into
# its Kubernetes API type by deploy/validate) and the Prometheus alert rules (promtool check rules and
# promtool test rules). The tools are built once from the Go module proxy and cached (scripts/install-*.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
helm="${HELM_PATH:-$(bash scripts/install-helm.sh)}"
validate="${K8S_VALIDATE_PATH:-$(bash scripts/install-k8s-validate.sh)}"
promtool="${PROMTOOL_PATH:-$(bash scripts/install-promtool.sh)}"
chart=deploy/helm/video-voice-api
for values in "$chart"/ci/*-values.yaml; do
  echo "check-deploy: $values"
  "$helm" lint --strict "$chart" -f "$values" >/dev/null
  "$helm" template video "$chart" --namespace video -f "$values" | "$validate" | tail -n 1
done
"$promtool" check rules deploy/prometheus/alerts.yaml
"$promtool" test rules deploy/prometheus/alerts.test.yaml
