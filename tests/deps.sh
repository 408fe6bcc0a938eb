#!/usr/bin/env bash
# The weight of a stdio-only build (docs/runtime.md, "Cargo features"): `mcp-runtime
# --no-default-features --features stdio` has at most 35 crates in its normal
# dependency tree (mcp-runtime itself included), and none of the skills extension's
# YAML parser, `sha2` or `iri-string`. Prints the count; exits non-zero past the limit.
#
#     bash tests/deps.sh [max]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
max=${1:-35}
tree=$(cargo tree --locked -p mcp-runtime --no-default-features --features stdio -e normal --prefix none |
  sed 's/ (\*)//' | sort -u)
count=$(printf '%s\n' "$tree" | wc -l)
echo "mcp-runtime --no-default-features --features stdio: $count crates (at most $max)"
status=0
if [ "$count" -gt "$max" ]; then
  printf '%s\n' "$tree" >&2
  echo "the stdio-only build passed $max crates: make the new dependency optional behind the feature that needs it" >&2
  status=1
fi
for banned in serde-saphyr granit-parser sha2 hmac iri-string; do
  if printf '%s\n' "$tree" | grep -q "^$banned v"; then
    echo "the stdio-only build compiles $banned" >&2
    status=1
  fi
done
exit "$status"
