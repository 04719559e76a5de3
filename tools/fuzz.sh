#!/usr/bin/env bash
# Fuzzes the parsers of user files with libFuzzer (clang, ASan + UBSan), one target after another
# for a fixed time each, from the seeds in tests/fuzz/seeds/<target>/; prints one summary table.
#
#   tools/fuzz.sh [--seconds N] [target...]      (default: 60 s each, every target)
#
# Built outside Bazel (Bazel here drives gcc): objects, binaries, the growing corpora and any
# crash/timeout/oom inputs go under build/fuzz/. Reproduce a finding with
# `build/fuzz/bin/<target>_fuzz build/fuzz/artifacts/<target>/crash-...`. Exits 1 when a target
# found something. Installs clang and libFuzzer from Debian when missing (CI does not fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each target's sources besides tests/fuzz/<target>_fuzz.cc: only what its parser needs.
declare -A SOURCES=(
  [config]="trainer/config.cc trainer/config_field.cc trainer/config_schema.cc data/gpt_dataset.cc data/epoch_permutation.cc data/indexed_dataset.cc data/utf8.cc parallel/grid.cc parallel/schedule.cc model/model_config.cc"
  [idx]="data/indexed_dataset.cc data/dataset_stats.cc data/file_io.cc"
  [safetensors]="checkpoint/safetensors.cc kernels/tensor.cc"
  [hf_tokenizer]="data/bpe_loaders.cc data/file_io.cc data/bpe_model.cc data/bpe_tokenizer.cc data/pretokenizer.cc data/utf8.cc"
  [gpt2_bpe]="data/bpe_loaders.cc data/file_io.cc data/bpe_model.cc data/bpe_tokenizer.cc data/pretokenizer.cc data/utf8.cc"
  [checkpoint_metadata]="checkpoint/checkpoint_format.cc checkpoint/box.cc kernels/tensor.cc"
  [document_reader]="data/document_reader.cc"
)
ALL_TARGETS=(config idx safetensors hf_tokenizer gpt2_bpe checkpoint_metadata document_reader)
# Targets whose input is mostly JSON get the dictionary of edge-case numbers and strings.
JSON_TARGETS=" config safetensors hf_tokenizer gpt2_bpe checkpoint_metadata "

seconds=60
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) [[ -n "${SOURCES[$1]+x}" ]] || { echo "unknown target '$1' (targets: ${ALL_TARGETS[*]})" >&2; exit 2; }
       targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${ALL_TARGETS[@]}")

# clang + libFuzzer runtime (idempotent).
if ! command -v clang++-14 >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >/dev/null
fi
CXX=clang++-14

out=build/fuzz
mkdir -p "$out/obj" "$out/bin"
# Bazel's include paths (repo root; nlohmann, spdlog, fmt, pcre2 from /usr/include) and defines.
CXXFLAGS=(-std=c++20 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -I. -DSPDLOG_FMT_EXTERNAL
          -DSPDLOG_SHARED_LIB -DSPDLOG_COMPILED_LIB -DPCRE2_CODE_UNIT_WIDTH=8 -Wall -Wno-sign-compare)
# -lfmt before -lspdlog, as third_party/system/spdlog.BUILD explains.
LIBS=(-lfmt -lspdlog -lpcre2-8 -lz -pthread)

# Compiles src into an object unless the object is newer than src and every header it includes.
compile() {
  local src=$1 obj="$out/obj/${1%.cc}.o"
  mkdir -p "$(dirname "$obj")"
  if [[ -f "$obj" && -f "$obj.d" ]]; then
    local stale=0 dep
    for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$obj.d"); do
      [[ "$dep" -nt "$obj" ]] && { stale=1; break; }
    done
    ((stale)) || { echo "$obj"; return; }
  fi
  echo "  compiling $src" >&2
  "$CXX" "${CXXFLAGS[@]}" -fsanitize=fuzzer-no-link -MMD -MF "$obj.d" -c "$src" -o "$obj"
  echo "$obj"
}

build() {
  local t=$1 objs=() src
  for src in ${SOURCES[$t]} "tests/fuzz/${t}_fuzz.cc"; do objs+=("$(compile "$src")"); done
  "$CXX" "${CXXFLAGS[@]}" -fsanitize=fuzzer "${objs[@]}" "${LIBS[@]}" -o "$out/bin/${t}_fuzz"
}

rows=()
found=0
for t in "${targets[@]}"; do
  echo "== $t: building" >&2
  build "$t"
  corpus="$out/corpus/$t" artifacts="$out/artifacts/$t" log="$out/logs/$t.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  echo "== $t: fuzzing for ${seconds} s (log: $log)" >&2
  # New inputs go to the first corpus directory; the checked-in seeds are only read.
  dict=()
  [[ "$JSON_TARGETS" == *" $t "* ]] && dict=(-dict=tests/fuzz/json.dict)
  set +e
  "$out/bin/${t}_fuzz" "$corpus" "tests/fuzz/seeds/$t" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -artifact_prefix="$artifacts/" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  crash=$(grep -oE "(crash|timeout|oom|leak|slow-unit)-[0-9a-f]+" "$log" | grep -v '^slow-unit' | tail -1 || true)
  result="ok"
  if ((rc != 0)); then
    found=1
    result="FOUND ${crash:-exit $rc} (see $log)"
  fi
  rows+=("$(printf '%-20s %6s %12s %8s %7s %7s  %s' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "$result")")
done

printf '\n%-20s %6s %12s %8s %7s %7s  %s\n' target sec execs exec/s cov ft result
printf '%s\n' "${rows[@]}"
exit "$found"
