#!/usr/bin/env bash
# The side-by-side benchmark (docs/performance.md): builds mcp-bench in its own
# workspace and target folder, installs the pinned TypeScript SDK v2 client next to
# the other peers, and prints the table.
#
#   bash tests/bench/run.sh [--reps N] [--only raw,ours-mt,...]   the full table
#   bash tests/bench/run.sh --smoke                                a few calls per cell (CI)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"

bash tests/peers/install.sh >/dev/null

TS_CLIENT="@modelcontextprotocol/client@2.4.0"
BENCH_NPM="$ROOT/.peers/bench-npm"
if [[ "$(cat "$BENCH_NPM/.stamp" 2>/dev/null)" != "$TS_CLIENT" ]]; then
  rm -rf "$BENCH_NPM"
  mkdir -p "$BENCH_NPM"
  npm install --prefix "$BENCH_NPM" --no-audit --no-fund --save-exact "$TS_CLIENT" >&2 \
    || { echo "bench: npm install $TS_CLIENT failed" >&2; exit 1; }
  echo "$TS_CLIENT" > "$BENCH_NPM/.stamp"
fi

CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --quiet --locked --release \
  --manifest-path tests/bench/Cargo.toml
MCP_BENCH_ROOT="$ROOT" exec "$ROOT/target/bench/release/mcp-bench" "$@"
