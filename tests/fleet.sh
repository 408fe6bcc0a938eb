#!/usr/bin/env bash
# Workers under fire, on one real PostgreSQL (issue #37).
#
#   bash tests/fleet.sh --smoke   # 12 runs, chaos only (about 1-2 minutes on a busy 2-core box)
#   bash tests/fleet.sh [RUNS]    # RUNS runs (default 12) under chaos; with RUNS >= 40, then
#                                 # timed phases at 1, 2 and 4 workers (RUNS/4 runs each, no kills)
#
# Chaos: 4 worker processes of examples/agent_filesystem.rs (--worker) share the store
# while a "web" process starts runs and records their decisions (--record) as they
# come; every third run needs a person's approval (its edit_file is not on the
# allow-list), the others run at once where they start. The scripted model
# (tests/peers/fake_model.py, FAKE_MODEL_FAIL_EVERY) answers every 7th request with
# a 429 (Retry-After 0 or 1) or a 503, which the model loop retries. Every few seconds
# a random worker is SIGKILLed and started again. A run whose worker died between
# claiming it and keeping it waits again under new decision ids: the driver approves
# those again (counted as "asked again").
#
# After: every run finished; no approved call ran twice — each run edits its own
# file "a" → "aa" once on the real filesystem server (edit_file is not idempotent: a
# second send makes "aaa"); a file may stay "a" only when its worker died between
# recording the call as sent and sending it (the run says "outcome unknown", never
# sends it again). Figures: runs/s per worker count, decision-to-call latency
# (decision recorded → the server's write, by the file's mtime), and PostgreSQL
# transactions committed per run (pg_stat_database.xact_commit delta; a transaction
# is at least one round-trip, so a lower bound). No figure is asserted; --smoke is
# meant for tests/run.sh. Verified passing: --smoke, 12 and 40 runs (2-core box, load 2-3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=12
if [[ "${1:-}" == "--smoke" ]]; then
  runs=12
elif [[ -n "${1:-}" ]]; then
  [[ "$1" =~ ^[0-9]+$ && "$1" -ge 3 ]] || { echo "usage: bash tests/fleet.sh [--smoke | RUNS>=3]" >&2; exit 2; }
  runs="$1"
fi
py=.peers/venv/bin/python

work="$(mktemp -d)"
model_pid=""
web_pid=""
pg_port=""
workers=()
stop_workers() {
  local pid
  for pid in "${workers[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${workers[@]}"; do wait "$pid" 2>/dev/null || true; done
  workers=()
}
cleanup() {
  stop_workers
  [[ -n "$web_pid" ]] && kill "$web_pid" 2>/dev/null
  [[ -n "$model_pid" ]] && kill "$model_pid" 2>/dev/null
  [[ -n "$pg_port" ]] && bash tests/peers/postgres.sh stop "$pg_port"
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "fleet: $*" >&2; exit 1; }
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One turn serves every run: edit the file the prompt names, then answer "done".
mkdir -p "$work/files"
cat >"$work/script.json" <<EOF
[{"tool_calls": [{"name": "edit_file", "arguments": {"path": "$work/files/{prompt}.txt", "edits": [{"oldText": "a", "newText": "aa"}]}}],
  "after_tools": {"text": "done"}}]
EOF
port="$(free_port)"
FAKE_MODEL_FAIL_EVERY=7 "$py" tests/peers/fake_model.py "$port" "$work/script.json" >"$work/model.log" 2>&1 &
model_pid=$!
for _ in $(seq 1 300); do grep -q READY "$work/model.log" 2>/dev/null && break; sleep 0.1; done
grep -q READY "$work/model.log" || fail "the scripted model did not start: $(cat "$work/model.log")"
pg_port="$(free_port)"
store="$(bash tests/peers/postgres.sh start "$pg_port")"
sql() { "$py" tests/peers/pg_query.py "$store" "$1"; }

export AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1"
cargo build -q --locked -p examples --features postgres --example agent_filesystem
bin="$(cargo metadata --format-version 1 --no-deps | "$py" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/examples/agent_filesystem"
# The example keeps each run's folder under ./.mcp-agent: keep that in $work.
example() { (cd "$work" && "$bin" --store "$store" "$@"); }

suspended='^suspended run=([0-9a-f]+) tool=edit_file decision=([0-9a-f]+)'
# start_run PHASE NAME APPROVAL(yes/no) RECORD(yes/no): a new run editing $work/files/NAME.txt.
start_run() {
  local phase="$1" name="$2" approval="$3" record="$4" out allow=(--allow edit_file)
  echo a >"$work/files/$name.txt"
  [[ "$approval" == yes ]] && allow=(--allow read_text_file)
  out="$(example --mode approve "${allow[@]}" --tenant "$phase" "$work/files" "$name" 2>>"$work/web.log")" \
    || { echo "run $name did not start: $out" >>"$work/web.errors"; return 0; }
  if [[ "$approval" == no ]]; then
    [[ "$out" == done ]] || echo "run $name did not finish at once: $out" >>"$work/web.errors"
    return 0
  fi
  [[ "$out" =~ $suspended ]] || { echo "run $name did not suspend: $out" >>"$work/web.errors"; return 0; }
  echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} $name" >>"$work/$phase.suspended"
  if [[ "$record" == yes ]]; then
    example --resume "${BASH_REMATCH[1]}" --decision "${BASH_REMATCH[2]}" --approve --record >/dev/null 2>>"$work/web.log" \
      || { echo "run $name: the decision was not recorded" >>"$work/web.errors"; return 0; }
    echo "$name $(date +%s.%N)" >>"$work/decided"
  fi
}
# open PHASE: how many of the phase's runs are not finished.
open() { sql "SELECT count(*) FROM mcp_agent_runs WHERE tenant = '$1' AND status <> 'finished'"; }
# `exec`: $! is the worker itself (a SIGKILL must reach it, not a subshell).
start_worker() { (cd "$work" && exec "$bin" --store "$store" --worker "$work/files") 2>>"$work/workers.log" & workers[$1]=$!; }
xact() { sql "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }

# ---- chaos -------------------------------------------------------------------------
for w in 0 1 2 3; do start_worker "$w"; done
(
  for n in $(seq 1 "$runs"); do
    if (( n % 3 == 0 )); then start_run chaos "c$n" yes yes; else start_run chaos "c$n" no no; fi
  done
) &
web_pid=$!

deadline=$((SECONDS + 900))
kills=0
asked_again=0
next_kill=$((SECONDS + 2 + RANDOM % 3))
while :; do
  web_done=no
  kill -0 "$web_pid" 2>/dev/null || web_done=yes
  if [[ "$web_done" == yes ]]; then
    [[ ! -s "$work/web.errors" ]] || fail "the web process: $(head -n 5 "$work/web.errors")"
    left="$(open chaos)"
    [[ "$left" == 0 ]] && break
  fi
  (( SECONDS < deadline )) || fail "${left:-?} runs not finished in time ($(tail -n 20 "$work/workers.log"))"
  if (( SECONDS >= next_kill )); then
    w=$((RANDOM % 4))
    kill -9 "${workers[$w]}" 2>/dev/null || true
    wait "${workers[$w]}" 2>/dev/null || true
    kills=$((kills + 1))
    start_worker "$w"
    next_kill=$((SECONDS + 2 + RANDOM % 4))
  fi
  # Runs that wait again (their worker died after claiming them): approve them again.
  if [[ "$web_done" == yes ]]; then
    for id in $(sql "SELECT id FROM mcp_agent_runs WHERE tenant = 'chaos' AND status = 'suspended'"); do
      while read -r _ run tool decision; do
        [[ "$run" == "run=$id" && "$tool" == tool=edit_file ]] || continue
        if example --resume "$id" --decision "${decision#decision=}" --approve --record >/dev/null 2>&1; then
          asked_again=$((asked_again + 1))
        fi
      done < <(example --status "$id" | grep '^pending ' || true)
    done
  fi
  sleep 1
done
web_pid=""
stop_workers

sent=0
unknown=0
for n in $(seq 1 "$runs"); do
  content="$(cat "$work/files/c$n.txt")"
  case "$content" in
    aa) sent=$((sent + 1)) ;;
    a) unknown=$((unknown + 1)) ;;
    *) fail "c$n.txt is \"$content\": an approved call ran more than once" ;;
  esac
done
approvals=$((runs / 3))
decided="$(wc -l <"$work/decided")"
[[ "$decided" == "$approvals" ]] || fail "$decided of $approvals decisions recorded"
statuses="$(sql "SELECT status || '=' || count(*) FROM mcp_agent_runs GROUP BY status" | tr '\n' ' ')"
stats="$(curl -s "http://127.0.0.1:$port/_stats" 2>/dev/null || echo '?')"
echo "fleet: chaos: $runs runs ($approvals approved while 4 workers ran, $asked_again asked again after a kill), $kills SIGKILLs; store: $statuses"
echo "fleet: chaos: $sent calls sent once, $unknown left unknown, none twice; model: $stats"

# Decision-to-call latency: from the recording process's return to the server's
# write of the file (its mtime); runs left unknown have no write.
latency() {
  "$py" - "$work" "$1" <<'EOF'
import os, sys
work, prefix = sys.argv[1], sys.argv[2]
ms = []
for line in open(os.path.join(work, "decided")):
    name, at = line.split()
    if not name.startswith(prefix):
        continue
    path = os.path.join(work, "files", name + ".txt")
    if open(path).read().strip() == "aa":
        ms.append((os.stat(path).st_mtime - float(at)) * 1000)
ms.sort()
if not ms:
    print("not measured (no call sent)")
else:
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
    print(f"p50 {pick(0.5):.0f} ms, p99 {pick(0.99):.0f} ms over {len(ms)} calls")
EOF
}
echo "fleet: chaos: decision-to-call latency (with kills): $(latency c)"

# ---- throughput: 1, 2, 4 workers, no kills -------------------------------------------
if (( runs >= 40 )); then
  each=$((runs / 4))
  : >"$work/decided"
  for k in 1 2 4; do
    for n in $(seq 1 "$each"); do start_run "t$k" "t${k}_$n" yes no; done
    [[ ! -s "$work/web.errors" ]] || fail "phase $k: $(head -n 5 "$work/web.errors")"
    while read -r run decision name; do
      example --resume "$run" --decision "$decision" --approve --record >/dev/null 2>>"$work/web.log" \
        || fail "phase $k: run $name: the decision was not recorded"
    done <"$work/t$k.suspended"
    before="$(xact)"
    t0="$(date +%s.%N)"
    for w in $(seq 0 $((k - 1))); do start_worker "$w"; done
    deadline=$((SECONDS + 1800))
    until [[ "$(open "t$k")" == 0 ]]; do
      (( SECONDS < deadline )) || fail "phase $k: $(open "t$k") runs not finished in time"
      sleep 0.5
    done
    t1="$(date +%s.%N)"
    after="$(xact)"
    stop_workers
    for n in $(seq 1 "$each"); do
      [[ "$(cat "$work/files/t${k}_$n.txt")" == aa ]] || fail "phase $k: t${k}_$n.txt is not \"aa\""
    done
    "$py" -c "import sys; e=float(sys.argv[2])-float(sys.argv[1]); n=int(sys.argv[3]); print(f'fleet: {sys.argv[4]} worker(s): {n} runs in {e:.1f} s = {n/e:.2f} runs/s; PostgreSQL transactions committed per run: {(int(sys.argv[6])-int(sys.argv[5]))/n:.1f} (includes idle polling and this script\'s few queries)')" \
      "$t0" "$t1" "$each" "$k" "$before" "$after"
  done
else
  echo "fleet: runs/s at 1, 2, 4 workers: not measured (give RUNS >= 40)"
fi
echo "fleet: load average: $(cut -d' ' -f1-3 /proc/loadavg); ok"
