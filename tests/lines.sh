#!/usr/bin/env bash
# The 800-line rule (docs/decisions.md): every git-tracked `.rs` file of the repository,
# tests included, has at most 800 lines. Vendored, generated and ignored folders are
# not tracked (or are left out below). Prints each offender with its count; exits
# non-zero when there is one.
#
#     bash tests/lines.sh [max]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
max=${1:-800}
offenders=0
while IFS= read -r -d '' file; do
  case "$file" in
    */vendor/* | vendor/* | */generated/* | target/* | */target/*) continue ;;
  esac
  [ -f "$file" ] || continue
  lines=$(wc -l < "$file")
  if [ "$lines" -gt "$max" ]; then
    echo "$file: $lines lines (at most $max)" >&2
    offenders=$((offenders + 1))
  fi
done < <(git ls-files -z -- '*.rs')
if [ "$offenders" -ne 0 ]; then
  echo "$offenders .rs file(s) over $max lines: split them by what their parts do" >&2
  exit 1
fi
echo "every tracked .rs file has at most $max lines"
