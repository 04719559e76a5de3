#!/usr/bin/env bash
# Where the output goes: logs and errors on stderr, a command's report on stdout; `validate --json`
# prints exactly one JSON document; no colour codes in logs written to a file or under mpirun (even
# with TERM set); `lattice --version` names the version, commit and build.
set -uo pipefail
source tests/parallel/mpi_env.sh
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
CONFIG=configs/test-tiny-gpt2.json
NODATA=(--set data.path=)  # validate checks a named dataset: the test config's is not prepared here
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# An error: exit 2, nothing on stdout, the message on stderr.
$LATTICE validate --config $CONFIG --set model.hiden_size=3 >"$WORK/err.out" 2>"$WORK/err.err"
rc=$?
[[ $rc -eq 2 ]] || fail "bad config: exit $rc (want 2)"
[[ ! -s $WORK/err.out ]] && echo "ok: an error writes nothing to stdout" || fail "stdout of an error: $(cat "$WORK/err.out")"
grep -q "did you mean 'hidden_size'" "$WORK/err.err" && echo "ok: the error is on stderr" || fail "stderr lacks the error"

# validate: the text report on stdout; --json: one JSON document and nothing else.
$LATTICE validate --config $CONFIG "${NODATA[@]}" >"$WORK/report.out" 2>/dev/null || fail "validate failed"
grep -q "config OK" "$WORK/report.out" && echo "ok: validate's report is on stdout" || fail "no report on stdout"
$LATTICE validate --config $CONFIG "${NODATA[@]}" --json --world-size 2 --set parallel.pipeline=2 >"$WORK/report.json" 2>"$WORK/report.err" ||
  fail "validate --json failed: $(cat "$WORK/report.err")"
python3 - "$WORK/report.json" <<'PY' || fail "validate --json is not one JSON document with the report"
import json, sys
d = json.load(open(sys.argv[1]))  # fails on anything but one JSON document
assert sorted(d) == ["compute", "config", "layout", "memory_bytes", "parameters"], sorted(d)
assert d["config"]["model"]["num_layers"] == 2 and d["parameters"]["total"] == 34208, d["parameters"]
assert d["memory_bytes"]["total"] > 0 and d["compute"]["flops_per_token"] > 0
assert d["layout"]["pipeline"] == 2 and d["layout"]["world_size"] == 2 and d["layout"]["micro_batches"] == 2
# The simulated 1F1B (p 2, m 2, backward = 2 forward) idles (p-1)/(m+p-1) = 1/3, the textbook figure; the
# first rank holds min(p, m) = 2 micro-batches' activations at once, the last one 1.
assert abs(d["layout"]["bubble_simulated"] - 1 / 3) < 1e-12, d["layout"]["bubble_simulated"]
assert d["layout"]["peak_inflight_per_pp_rank"] == [2, 1], d["layout"]["peak_inflight_per_pp_rank"]
print("ok: validate --json is one JSON document with config, parameters, compute, memory and layout")
PY

# Colour only on a terminal: logs in a file and ranks under mpirun (stdout a pseudo-terminal) have
# no ESC bytes, though TERM names a colour terminal.
check_no_escapes() {
  if grep -q $'\e' "$1"; then fail "$2: ANSI escape codes in $(cat -v "$1" | grep -m1 '\^\[')"; else echo "ok: $2: no escape codes"; fi
}
TERM=xterm $LATTICE validate --config $CONFIG --set model.hiden_size=3 >"$WORK/plain.log" 2>&1
grep -q "error" "$WORK/plain.log" || fail "no error logged in plain.log"
check_no_escapes "$WORK/plain.log" "one process, logs in a file"
TERM=xterm timeout 60 mpirun --allow-run-as-root -np 1 -x TERM $LATTICE validate --config $CONFIG \
  --set model.hiden_size=3 >"$WORK/mpirun.log" 2>&1
grep -q "error" "$WORK/mpirun.log" || fail "no error logged under mpirun: $(cat "$WORK/mpirun.log")"
check_no_escapes "$WORK/mpirun.log" "mpirun"

# --version: version, commit (12 hex digits, maybe -dirty, or "unknown" outside git), backend, BLAS.
out=$($LATTICE --version 2>/dev/null)
rc=$?
if [[ $rc -eq 0 ]] && grep -qE "^lattice [0-9]+\.[0-9]+\.[0-9]+$" <<<"$out" &&
  grep -qE "^commit   ([0-9a-f]{12}(-dirty)?|unknown)$" <<<"$out" && grep -q "^backend  CPU" <<<"$out" &&
  grep -q "^BLAS     OpenBLAS" <<<"$out"; then
  echo "ok: --version: $(tr '\n' ' ' <<<"$out")"
else
  fail "--version (exit $rc): $out"
fi

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
