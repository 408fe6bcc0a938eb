#!/usr/bin/env bash
# Instructions per sequential call (docs/performance.md, "How to profile"): stable on a
# busy machine, where seconds are not. Counts the client process only (valgrind's
# callgrind; user space), for 3000 calls minus 50, so start-up cancels out.
#
#   bash tests/bench/instructions.sh [CLIENTS]     default: raw ours-ct ours-mt
#
# Builds the benchmark first (tests/bench/run.sh builds the same binary).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is needed" >&2; exit 1; }
CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --quiet --locked --release \
  --manifest-path tests/bench/Cargo.toml
BIN="$ROOT/target/bench/release/mcp-bench"
CLIENTS=("${@:-raw ours-ct ours-mt}")
read -r -a CLIENTS <<< "${CLIENTS[*]}"

"$ROOT/target/bench/release/fastserver" http 0 > "$ROOT/target/bench/fastserver.out" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q READY "$ROOT/target/bench/fastserver.out" 2>/dev/null && break
  sleep 0.1
done
URL="http://127.0.0.1:$(awk '/READY/ {print $2}' "$ROOT/target/bench/fastserver.out")/mcp"

count() { # SMOKE(0|1) CELL-ARGS...: instructions of one run
  local smoke=$1 out="$ROOT/target/bench/callgrind.out.$$"
  shift
  if [[ $smoke == 1 ]]; then export MCP_BENCH_SMOKE=1; else unset MCP_BENCH_SMOKE; fi
  MCP_BENCH_ROOT="$ROOT" valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" "$@" 2>&1 \
    | awk '/Collected :/ {print $4}'
  rm -f "$out"*
  unset MCP_BENCH_SMOKE
}

echo "| sequential call, instructions (client, user space) | stdio | HTTP |"
echo "|---|---|---|"
for c in "${CLIENTS[@]}"; do
  row="| $c |"
  for t in stdio http; do
    big=$(count 0 cell "$c" "$t" seq legacy "$URL")
    small=$(count 1 cell "$c" "$t" seq legacy "$URL")
    row="$row $(( (big - small) / 2950 )) |"
  done
  echo "$row"
done
