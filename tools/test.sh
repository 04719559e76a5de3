#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test under //tests/...
# Ends with one "N passed, M failed" line counted from Bazel's per-target summary.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
bazel test //tests/... "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -cE '^//[^ ]+ .*PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ .*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$log" || true)
echo "tests: $passed passed, $failed failed"
exit "$status"
