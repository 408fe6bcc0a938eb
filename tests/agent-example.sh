#!/usr/bin/env bash
# Drives examples/agent_filesystem.rs as a user would, against the scripted model
# (tests/peers/fake_model.py) and the real filesystem server: read-only denies a
# write; approve mode suspends it, prints one `suspended run=… tool=…` line and exits
# 0; a second process resumes it with --approve and the file is written; a missing
# AGENT_MODEL is named. Run by tests/run.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

work="$(mktemp -d)"
model_pid=""
pg_port=""
cleanup() {
  [[ -n "$model_pid" ]] && kill "$model_pid" 2>/dev/null
  [[ -n "$pg_port" ]] && bash tests/peers/postgres.sh stop "$pg_port"
  rm -rf "$work"
}
trap cleanup EXIT

port="$(.peers/venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$work/files"
cat >"$work/script.json" <<JSON
[{"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/out.txt", "content": "approved"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/out.txt", "content": "approved"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/pg.txt", "content": "approved"}}]},
 {"echo_tools": true}]
JSON
.peers/venv/bin/python tests/peers/fake_model.py "$port" "$work/script.json" >"$work/model.log" 2>&1 &
model_pid=$!
for _ in $(seq 1 100); do grep -q READY "$work/model.log" 2>/dev/null && break; sleep 0.1; done

store="$work/state/runs.sqlite3"
run() { AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
  cargo run -q --locked -p examples --example agent_filesystem -- --store "$store" "$@"; }
fail() { echo "agent example: $*" >&2; exit 1; }

# read_only (default): the write is denied, the model reads the error.
out="$(run "$work/files" "write a file")"
grep -q 'write_file: {"error"' <<<"$out" || fail "read_only did not deny: $out"
[[ ! -e "$work/files/out.txt" ]] || fail "a denied write happened"

# approve: suspends with exactly one line, exit 0; another process approves.
out="$(run --mode approve "$work/files" "write a file")"
[[ "$(wc -l <<<"$out")" -eq 1 && "$out" =~ ^suspended\ run=([0-9a-f]+)\ tool=write_file$ ]] || fail "unexpected: $out"
run_id="${BASH_REMATCH[1]}"
[[ ! -e "$work/files/out.txt" ]] || fail "wrote before the decision"
out="$(run --resume "$run_id" --approve)"
[[ "$(cat "$work/files/out.txt")" == "approved" ]] || fail "the approved write did not happen: $out"
if run --resume "$run_id" --approve 2>/dev/null; then fail "a decision applied twice"; fi

# The same across processes with the runs in PostgreSQL.
pg_port="$(.peers/venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
store="$(bash tests/peers/postgres.sh start "$pg_port")"
out="$(run --mode approve "$work/files" "write a file")"
[[ "$out" =~ ^suspended\ run=([0-9a-f]+)\ tool=write_file$ ]] || fail "postgres: unexpected: $out"
run --resume "${BASH_REMATCH[1]}" --approve >/dev/null; rm -f ".mcp-agent/run-${BASH_REMATCH[1]}.dir"
[[ "$(cat "$work/files/pg.txt")" == "approved" ]] || fail "postgres: the approved write did not happen"

# No model configured: says which variable.
if err="$(cargo run -q --locked -p examples --example agent_filesystem -- "$work/files" hi 2>&1)"; then
  fail "ran without AGENT_MODEL"
fi
grep -q AGENT_MODEL <<<"$err" || fail "the error does not name AGENT_MODEL: $err"
echo "agent example: read_only denial, suspend/resume across processes (SQLite and PostgreSQL), exactly-once decision, missing model: ok"
