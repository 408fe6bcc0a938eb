#!/usr/bin/env bash
# A fuzzing campaign: each target for SECONDS, two at a time (one per core), each
# continuing from its kept corpus in target/fuzz-work/<target>/corpus (plus the
# committed seeds), then a table of executions and coverage over time.
#
#   bash fuzz/campaign.sh SECONDS [target...]     (default: every target)
#   bash fuzz/campaign.sh --report [target...]    (the table of the last run only)
#
# Needs the libFuzzer binaries: cd fuzz && CARGO_TARGET_DIR=../target/fuzz cargo fuzz build -s none
# Each log line is stamped with the seconds since its target started
# (target/fuzz-work/<target>/log.txt); crashes go to target/fuzz-work/<target>/crashes/.
# The table says, per target: executions; coverage (edges) once the corpus was loaded,
# at half and three quarters of the run, and at the end; features; corpus size; and
# when the last new edge was found. A target has plateaued when the last quarter found
# no new edge, and the next run from the kept corpus finds none either.
set -u
cd "$(dirname "$0")/.."
work=target/fuzz-work
bin=target/fuzz/x86_64-unknown-linux-gnu/release
all=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^mcp-fuzz$')

report() {
  python3 - "$work" "$@" <<'EOF'
import os, re, sys
work, targets = sys.argv[1], sys.argv[2:]
print("| target | executions | edges at start | at 1/2 | at 3/4 | at the end | features | corpus | last new edge |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
total = 0
for t in targets:
    path = os.path.join(work, t, "log.txt")
    if not os.path.exists(path):
        continue
    points, start, execs, ft, corp, end, last, best = [], None, 0, None, None, 0, 0, -1
    for line in open(path, errors="replace"):
        stamp, _, rest = line.partition(" ")
        if not stamp.isdigit():
            continue
        ts = int(stamp)
        end = max(end, ts)
        m = re.search(r"cov: (\d+) ft: (\d+) corp: (\d+)", rest)
        if m:
            cov, ft, corp = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if "INITED" in rest:
                start = cov
            if cov > best:
                best, last = cov, ts
            points.append((ts, cov))
        m = re.search(r"stat::number_of_executed_units: (\d+)", rest)
        if m:
            execs = int(m.group(1))
    at = lambda x: max([c for ts, c in points if ts <= x] or [0])
    total += execs
    print(f"| `{t}` | {execs:,} | {start} | {at(end / 2)} | {at(end * 3 / 4)} | {best} | {ft} | {corp} | {last} s of {end} s |")
print(f"| **total** | **{total:,}** | | | | | | | |")
EOF
}

if [ "${1:-}" = "--report" ]; then
  shift
  report ${@:-$all}
  exit 0
fi
seconds=${1:?usage: campaign.sh SECONDS [target...]}
shift
targets=${@:-$all}
for t in $targets; do
  [ -x "$bin/$t" ] || { echo "no $bin/$t: build the targets first (see fuzz/README.md)" >&2; exit 1; }
done

run() {
  local t=$1 start=$EPOCHSECONDS
  mkdir -p "$work/$t/corpus" "$work/$t/crashes"
  "$bin/$t" "$work/$t/corpus" "fuzz/corpus/$t" -max_total_time="$seconds" -max_len=65536 \
    -artifact_prefix="$work/$t/crashes/" -print_final_stats=1 2>&1 |
    while IFS= read -r line; do printf '%d %s\n' $((EPOCHSECONDS - start)) "$line"; done > "$work/$t/log.txt"
  echo "$t: exit ${PIPESTATUS[0]} after $((EPOCHSECONDS - start)) s"
}
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 1; done
  run "$t" &
done
wait
report $targets
crashes=$(find $(for t in $targets; do echo "$work/$t/crashes"; done) -type f | wc -l)
echo "crashes: $crashes"
[ "$crashes" -eq 0 ]
