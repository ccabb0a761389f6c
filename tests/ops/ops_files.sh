#!/usr/bin/env bash
# The ops team's files in ops/ against the real tools and a real coordinator:
#   - the alert rules pass `promtool check rules` and their unit tests (`promtool test rules`);
#   - every PromQL expression of the Grafana dashboard parses (as a recording rule promtool checks).
# That every metric they name is served: tests/core/coordinator/test_metrics_service.cpp.
# Usage: ops_files.sh. Exit 77 (skipped) without promtool or jq, unless
# GPUPOOL_REQUIRE_PROMETHEUS=1 (CI), where that is a failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rules=$root/ops/prometheus/gpupool-alerts.yml
dashboard=$root/ops/grafana/gpupool-dashboard.json
for tool in promtool jq; do
  if ! command -v "$tool" > /dev/null; then
    if [ "${GPUPOOL_REQUIRE_PROMETHEUS:-}" = 1 ]; then
      echo "FAIL: $tool is not installed and GPUPOOL_REQUIRE_PROMETHEUS=1" >&2
      exit 1
    fi
    echo "SKIP: $tool is not installed (promtool: Debian package prometheus)" >&2
    exit 77
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

promtool check rules "$rules"
(cd "$(dirname "$rules")" && promtool test rules gpupool-alerts.test.yml)

# The dashboard's queries, with its $job variable set, as recording rules.
{
  echo "groups:"
  echo "  - name: dashboard"
  echo "    rules:"
  n=0
  jq -r '.panels[].targets[].expr' "$dashboard" | sed 's/\$job/gpupool/g' | while IFS= read -r expr; do
    n=$((n + 1))
    printf '      - record: dashboard:query_%d\n        expr: %s\n' "$n" "$(jq -Rn --arg e "$expr" '$e')"
  done
} > "$work/dashboard-rules.yml"
promtool check rules "$work/dashboard-rules.yml"

echo "ok: the alert rules and their tests pass; the dashboard's $(jq '[.panels[].targets[]] | length' "$dashboard") queries parse"
