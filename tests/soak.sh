#!/usr/bin/env bash
# The soak run: 100 concurrent clients for [minutes] (default 30; fractions allowed,
# e.g. 0.5 for the 30-second smoke run .ci/run does) against real peers, with servers
# killed and restarted, tokens expiring, list changes and cancellations. Prints the
# report (also in target/soak/report.md, the timeline in target/soak/timeline.csv) and
# exits non-zero when a pass condition fails (docs/reliability.md, "Soak run").
#
#   bash tests/soak.sh [minutes] [--clients N] [--release]
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
clients=100
profile=()
while [ $# -gt 0 ]; do
  case "$1" in
    --clients) clients="$2"; shift 2 ;;
    --release) profile=(--release); shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) minutes="$1"; shift ;;
  esac
done
seconds=$(awk -v m="$minutes" 'BEGIN { if (m !~ /^[0-9]*\.?[0-9]+$/ || m <= 0) exit 1; printf "%d", m * 60 + 0.5 }') || {
  echo "soak.sh: minutes must be a positive number, not '$minutes'" >&2
  exit 2
}

bash tests/peers/install.sh
cargo build --locked -q -p mcp-soak "${profile[@]}"
dir=debug
[ ${#profile[@]} -gt 0 ] && dir=release
# Each stdio client starts a server process: keep well under the descriptor limit.
ulimit -n 8192 2>/dev/null || true
exec "target/$dir/mcp-soak" --seconds "$seconds" --clients "$clients" --report target/soak
