#!/usr/bin/env bash
# Workers under fire: RUNS runs suspend and their approvals are recorded (--record),
# then 4 worker processes of examples/agent_filesystem.rs (--worker) share one real
# PostgreSQL while random ones are killed with SIGKILL and started again. Every run
# must end finished, and no approved call may run twice: each run edits its own file
# "a" → "aa" once (the real filesystem server; edit_file is not idempotent, so a
# second send would make "aaa") — a file may stay "a" only when its worker died
# between recording the call as sent and sending it (the run then says "outcome
# unknown", never sends it again). Not part of tests/run.sh (minutes of load).
#
#   bash tests/fleet.sh [RUNS]   # default 12
#
# Status: not yet seen passing end to end (issue #37): one run on a loaded machine
# saw every file edited exactly once, but its status check was cut short; a second
# did not finish within 7 minutes. Verify before relying on it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${1:-12}"

work="$(mktemp -d)"
model_pid=""
pg_port=""
workers=()
cleanup() {
  for pid in "${workers[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  [[ -n "$model_pid" ]] && kill "$model_pid" 2>/dev/null
  [[ -n "$pg_port" ]] && bash tests/peers/postgres.sh stop "$pg_port"
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "fleet: $*" >&2; exit 1; }
free_port() { .peers/venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$work/files"
{
  echo "["
  for n in $(seq 1 "$runs"); do
    echo "{\"tool_calls\": [{\"name\": \"edit_file\", \"arguments\": {\"path\": \"$work/files/f$n.txt\", \"edits\": [{\"oldText\": \"a\", \"newText\": \"aa\"}]}}]},"
  done
  echo '{"text": "done"}]'
} >"$work/script.json"
port="$(free_port)"
.peers/venv/bin/python tests/peers/fake_model.py "$port" "$work/script.json" >"$work/model.log" 2>&1 &
model_pid=$!
for _ in $(seq 1 100); do grep -q READY "$work/model.log" 2>/dev/null && break; sleep 0.1; done
pg_port="$(free_port)"
store="$(bash tests/peers/postgres.sh start "$pg_port")"

export AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1"
cargo build -q --locked -p examples --features postgres --example agent_filesystem
bin="$(cargo metadata --format-version 1 --no-deps | .peers/venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/examples/agent_filesystem"
example() { "$bin" --store "$store" "$@"; }

suspended='^suspended run=([0-9a-f]+) tool=edit_file decision=([0-9a-f]+)$'
ids=()
for n in $(seq 1 "$runs"); do
  echo a >"$work/files/f$n.txt"
  out="$(example --mode approve "$work/files" "edit f$n")"
  [[ "$out" =~ $suspended ]] || fail "run $n did not suspend: $out"
  ids+=("${BASH_REMATCH[1]}")
  example --resume "${BASH_REMATCH[1]}" --decision "${BASH_REMATCH[2]}" --approve --record >/dev/null
done

start_worker() { example --worker "$work/files" 2>>"$work/workers.log" & workers[$1]=$!; }
for w in 0 1 2 3; do start_worker "$w"; done

# Kill a random worker now and then, and start it again, until every run finished.
count_open() {
  local n=0 id
  for id in "${ids[@]}"; do
    [[ "$(example --status "$id")" == "status=finished" ]] || n=$((n + 1))
  done
  echo "$n"
}
deadline=$((SECONDS + 600))
kills=0
while :; do
  left="$(count_open)"
  [[ "$left" == "0" ]] && break
  (( SECONDS < deadline )) || fail "$left runs not finished in time ($(tail -n 20 "$work/workers.log"))"
  if (( RANDOM % 3 == 0 )); then
    w=$((RANDOM % 4))
    kill -9 "${workers[$w]}" 2>/dev/null || true
    wait "${workers[$w]}" 2>/dev/null || true
    kills=$((kills + 1))
    start_worker "$w"
  fi
  sleep 0.$((RANDOM % 10))
done
for w in 0 1 2 3; do kill -INT "${workers[$w]}" 2>/dev/null || true; done
for w in 0 1 2 3; do wait "${workers[$w]}" 2>/dev/null || true; done
workers=()

sent=0
for n in $(seq 1 "$runs"); do
  content="$(cat "$work/files/f$n.txt")"
  case "$content" in
    aa) sent=$((sent + 1)) ;;
    a) ;;
    *) fail "f$n.txt is \"$content\": an approved call ran more than once" ;;
  esac
done
echo "fleet: $runs runs finished under 4 workers and $kills SIGKILLs; $sent calls sent once, $((runs - sent)) left unknown, none twice: ok"
