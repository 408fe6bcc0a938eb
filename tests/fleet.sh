#!/usr/bin/env bash
# Workers under fire, on one real PostgreSQL (issue #37).
#
#   bash tests/fleet.sh --smoke   # 150 runs, chaos only (under a minute on a busy 2-core box)
#   bash tests/fleet.sh [RUNS]    # RUNS runs (default 150) under chaos; with RUNS >= 40, then
#                                 # timed phases at 1, 2 and 4 workers (RUNS/4 runs each, no kills)
#   bash tests/fleet.sh 2000      # the long run (about 5 minutes; figures in docs/benchmarks.md)
#
# Chaos: 4 worker processes of examples/agent_filesystem.rs (--worker) share the store
# while one "web" process (examples/agent_fleet.rs) starts the runs, 4 at a time, and
# records each decision as its run suspends; every third run needs a person's
# approval (its edit_file is not on its allow-list), the others run at once where
# they start. The scripted model (tests/peers/fake_model.py, FAKE_MODEL_FAIL_EVERY)
# answers every 7th request with a 429 (Retry-After 0 or 1) or a 503, which the model
# loop retries. Every few seconds a random worker is SIGKILLed and started again. A
# run whose worker died between claiming it and keeping it waits again under new
# decision ids: the driver approves those again (counted as "asked again").
#
# After: every run finished; no approved call ran twice — each run edits its own
# file "a" → "aa" once on the real filesystem server (edit_file is not idempotent: a
# second send makes "aaa"); a file may stay "a" only when its worker died between
# recording the call as sent and sending it (the run says "outcome unknown", never
# sends it again). No run held by two workers: a trigger on the store's table logs,
# in PostgreSQL's own clock, every change of a run's lease owner; a run taken from a
# holder whose lease had not ended fails the test. Figures: runs/s per worker count,
# decision-to-call latency (decision recorded → the server's write, by the file's
# mtime), and PostgreSQL transactions committed per run (pg_stat_database.xact_commit
# delta; a transaction is at least one round-trip, so a lower bound). No figure is
# asserted; --smoke is meant for tests/run.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=150
smoke=no
if [[ "${1:-}" == "--smoke" ]]; then
  smoke=yes
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
# kill_tree PID: the process and everything it started (the web subshell runs the
# example in a child of its own).
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null
}
cleanup() {
  # Everything, whatever already ended (a failed `kill` must not stop the cleanup).
  set +e
  stop_workers
  [[ -n "$web_pid" ]] && kill_tree "$web_pid"
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
cargo build -q --locked -p examples --features postgres --example agent_filesystem --example agent_fleet
target="$(cargo metadata --format-version 1 --no-deps | "$py" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/examples"
bin="$target/agent_filesystem"
# The examples keep each run's folder under ./.mcp-agent: keep that in $work.
example() { (cd "$work" && "$bin" --store "$store" "$@"); }
# web PHASE PREFIX RUNS APPROVE_EVERY: the web process starts RUNS runs (PREFIX1 …),
# each editing $work/files/<name>.txt, and records their decisions; its lines go to
# $work/PHASE.web, "NAME SECONDS" per decision to $work/decided.
web() {
  local n
  for n in $(seq 1 "$3"); do echo a >"$work/files/$2$n.txt"; done
  (cd "$work" && "$target/agent_fleet" --store "$store" --tenant "$1" --prefix "$2" --runs "$3" \
    --approve-every "$4" --concurrency 4 "$work/files") >"$work/$1.web" 2>>"$work/web.log" \
    || { echo "the web process failed: $(tail -n 5 "$work/web.log")" >>"$work/web.errors"; }
  sed -nE 's/^decided name=([^ ]+) run=[0-9a-f]+ at=([0-9.]+)$/\1 \2/p' "$work/$1.web" >>"$work/decided"
}
# open PHASE: how many of the phase's runs are not finished.
open() { sql "SELECT count(*) FROM mcp_agent_runs WHERE tenant = '$1' AND status <> 'finished'"; }
# `exec`: $! is the worker itself (a SIGKILL must reach it, not a subshell).
start_worker() { (cd "$work" && exec "$bin" --store "$store" --worker "$work/files") 2>>"$work/workers.log" & workers[$1]=$!; }
xact() { sql "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }

# The store's tables (the first connection makes them), then the claim log: every
# change of a run's lease owner, with the status and lease it had, at PostgreSQL's
# clock (milliseconds, as the store keeps lease_until).
example --status none >/dev/null 2>&1 || true
sql "CREATE TABLE fleet_claims (run_id text, was text, old_owner text, old_until bigint, new_owner text, at bigint);
CREATE FUNCTION fleet_claim() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
  IF NEW.lease_owner IS DISTINCT FROM OLD.lease_owner THEN
    INSERT INTO fleet_claims VALUES (NEW.id, OLD.status, OLD.lease_owner, OLD.lease_until, NEW.lease_owner,
      (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  END IF; RETURN NEW; END \$\$;
CREATE TRIGGER fleet_claim AFTER UPDATE ON mcp_agent_runs FOR EACH ROW EXECUTE FUNCTION fleet_claim();" >/dev/null

# approve_waiting PHASE: approves the calls of the phase's runs that wait for a person
# (not those decided already): a run recovered after its worker died, or retried by a
# worker after it failed where it started, asks again under new decision ids.
asked_again=0
approve_waiting() {
  local id run tool decision
  for id in $(sql "SELECT id FROM mcp_agent_runs WHERE tenant = '$1' AND status = 'suspended'
      AND (due_at IS NULL OR due_at > (extract(epoch FROM now()) * 1000)::bigint)"); do
    while read -r _ run tool decision; do
      [[ "$run" == "run=$id" && "$tool" == tool=edit_file ]] || continue
      if example --resume "$id" --decision "${decision#decision=}" --approve --record >/dev/null 2>&1; then
        asked_again=$((asked_again + 1))
      fi
    done < <(example --status "$id" | grep '^pending ' || true)
  done
}

# ---- chaos -------------------------------------------------------------------------
: >"$work/decided"
chaos_t0="$(date +%s.%N)"
for w in 0 1 2 3; do start_worker "$w"; done
web chaos c "$runs" 3 &
web_pid=$!

deadline=$((SECONDS + 900 + runs))
kills=0
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
  [[ "$web_done" == yes ]] && approve_waiting chaos
  sleep 1
done
web_pid=""
chaos_t1="$(date +%s.%N)"
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
decided="$(wc -l <"$work/decided")"
finished_at_once="$(grep -c '^done ' "$work/chaos.web" || true)"
failed_at_once="$(grep -c '^failed ' "$work/chaos.web" || true)"
(( decided + finished_at_once + failed_at_once == runs )) \
  || fail "the web process accounts for $((decided + finished_at_once + failed_at_once)) of $runs runs"
# No run held by two: a run is taken from a running holder only once its lease ended.
overlap="$(sql "SELECT run_id || ' at ' || at || ' (lease until ' || old_until || ')' FROM fleet_claims
  WHERE was = 'running' AND old_owner IS NOT NULL AND old_until IS NOT NULL AND old_until >= at LIMIT 5")"
[[ -z "$overlap" ]] || fail "a run was taken from a worker whose lease had not ended: $overlap"
claims="$(sql "SELECT count(*) || ' claims, ' || count(*) FILTER (WHERE was = 'running') || ' of them recoveries of ended leases' FROM fleet_claims")"
statuses="$(sql "SELECT status || '=' || count(*) FROM mcp_agent_runs GROUP BY status" | tr '\n' ' ')"
stats="$(curl -s "http://127.0.0.1:$port/_stats" 2>/dev/null || echo '?')"
echo "fleet: chaos: $runs runs ($finished_at_once finished where they started, $decided decided there while 4 workers ran, $failed_at_once failed there and retried by a worker; $asked_again asked again after a kill or a retry), $kills SIGKILLs; store: $statuses"
echo "fleet: chaos: $sent calls sent once, $unknown left unknown, none twice; $claims, none while held; model: $stats"

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
"$py" -c "import sys; e=float(sys.argv[2])-float(sys.argv[1]); print(f'fleet: chaos: {sys.argv[3]} runs in {e:.0f} s = {int(sys.argv[3])/e:.1f} runs/s (with kills, the last lease waited out)')" \
  "$chaos_t0" "$chaos_t1" "$runs"

# ---- throughput: 1, 2, 4 workers, no kills -------------------------------------------
if [[ "$smoke" == no ]] && (( runs >= 40 )); then
  each=$((runs / 4))
  : >"$work/decided"
  for k in 1 2 4; do
    web "t$k" "t${k}_" "$each" 1
    [[ ! -s "$work/web.errors" ]] || fail "phase $k: $(head -n 5 "$work/web.errors")"
    [[ "$(grep -cE '^(decided|failed) ' "$work/t$k.web" || true)" == "$each" ]] || fail "phase $k: not every run waits decided"
    before="$(xact)"
    t0="$(date +%s.%N)"
    for w in $(seq 0 $((k - 1))); do start_worker "$w"; done
    deadline=$((SECONDS + 1800))
    until [[ "$(open "t$k")" == 0 ]]; do
      (( SECONDS < deadline )) || fail "phase $k: $(open "t$k") runs not finished in time"
      approve_waiting "t$k"
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
  echo "fleet: runs/s at 1, 2, 4 workers: not measured (give RUNS >= 40, without --smoke)"
fi
overlap="$(sql "SELECT count(*) FROM fleet_claims WHERE was = 'running' AND old_owner IS NOT NULL AND old_until IS NOT NULL AND old_until >= at")"
[[ "$overlap" == 0 ]] || fail "$overlap runs were taken from a worker whose lease had not ended"
# Positive control: the log and the check see a run taken while its lease holds.
some="$(sql "SELECT id FROM mcp_agent_runs WHERE tenant = 'chaos' LIMIT 1")"
sql "UPDATE mcp_agent_runs SET status = 'running', lease_owner = 'control-a', lease_until = 9000000000000 WHERE id = '$some';
UPDATE mcp_agent_runs SET lease_owner = 'control-b' WHERE id = '$some'" >/dev/null
overlap="$(sql "SELECT count(*) FROM fleet_claims WHERE was = 'running' AND old_owner IS NOT NULL AND old_until IS NOT NULL AND old_until >= at")"
[[ "$overlap" == 1 ]] || fail "the claim log does not see a run taken while held (control: $overlap)"
echo "fleet: load average: $(cut -d' ' -f1-3 /proc/loadavg); ok"
