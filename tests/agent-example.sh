#!/usr/bin/env bash
# Drives examples/agent_filesystem.rs as a user would, against the scripted model
# (tests/peers/fake_model.py) and the real filesystem server: read-only denies a
# write; approve mode suspends it, prints one `suspended run=… tool=… decision=…` line
# and exits 0; a second process resumes it with that decision and --approve and the
# file is written; the same decision again, or an unknown one, exits non-zero and
# changes nothing; --deny --message tells the model why; --allow lets an exact name
# run; a finished run says run=<id> and --continue follows it up (--stream prints as
# it comes); --tenant keeps a tenant with a run and the suspended line shows it
# (tenant=NAME), and its resume shows it again; --record keeps a decision and --worker runs it;
# agent_chat holds a conversation on stdin with approvals asked inline; agent_inbox
# serves the inbox (loopback only unless --allow-remote) and its worker runs a decision
# recorded over its API; a
# missing AGENT_MODEL is named. Run by tests/run.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

work="$(mktemp -d)"
model_pid=""
pg_port=""
cleanup() {
  # Every step runs whatever the one before did (a process already gone is fine).
  [[ -z "${worker_pid:-}" ]] || kill "$worker_pid" 2>/dev/null || true
  [[ -z "${inbox_pid:-}" ]] || kill "$inbox_pid" 2>/dev/null || true
  [[ -z "$model_pid" ]] || kill "$model_pid" 2>/dev/null || true
  [[ -z "$pg_port" ]] || bash tests/peers/postgres.sh stop "$pg_port" || true
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
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/denied.txt", "content": "no"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/p1.txt", "content": "one"}}]},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/p2.txt", "content": "two"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/pg.txt", "content": "approved"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/allowed.txt", "content": "allowed"}}]},
 {"echo_tools": true},
 {"text": "continued in the same conversation"},
 {"text": "a streamed answer"},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/chat.txt", "content": "from the chat"}}]},
 {"echo_tools": true},
 {"text": "you are welcome"},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/t1.txt", "content": "one"}}]},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/t2.txt", "content": "two"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/worker.txt", "content": "by the worker"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "write_file", "arguments": {"path": "$work/files/inbox.txt", "content": "from the inbox"}}]},
 {"echo_tools": true},
 {"tool_calls": [{"name": "list_directory", "arguments": {"path": "$work/files"}}]},
 {"text": "{\"files\": 3}"},
 {"text": "\`\`\`json\n{\"files\": [\"allowed.txt\"]}\n\`\`\`"},
 {"text": "There are a few files."},
 {"text": "Still prose."},
 {"text": "answered over the Responses API"}]
JSON
.peers/venv/bin/python tests/peers/fake_model.py "$port" "$work/script.json" >"$work/model.log" 2>&1 &
model_pid=$!
for _ in $(seq 1 100); do grep -q READY "$work/model.log" 2>/dev/null && break; sleep 0.1; done

store="$work/state/runs.sqlite3"
run() { AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
  cargo run -q --locked -p examples --features postgres --example agent_filesystem -- --store "$store" "$@"; }
fail() { echo "agent example: $*" >&2; exit 1; }

# read_only (default): the write is denied, the model reads the error.
out="$(run "$work/files" "write a file")"
grep -q 'write_file: {"error"' <<<"$out" || fail "read_only did not deny: $out"
[[ ! -e "$work/files/out.txt" ]] || fail "a denied write happened"

suspended='^suspended run=([0-9a-f]+) tool=write_file decision=([0-9a-f]+)$'

# approve: suspends with exactly one line, exit 0; another process approves.
out="$(run --mode approve "$work/files" "write a file")"
[[ "$(wc -l <<<"$out")" -eq 1 && "$out" =~ $suspended ]] || fail "unexpected: $out"
run_id="${BASH_REMATCH[1]}"; decision="${BASH_REMATCH[2]}"
[[ ! -e "$work/files/out.txt" ]] || fail "wrote before the decision"
if run --resume "$run_id" --approve 2>/dev/null; then fail "a resume without --decision ran"; fi
out="$(run --resume "$run_id" --decision "$decision" --approve)"
[[ "$(cat "$work/files/out.txt")" == "approved" ]] || fail "the approved write did not happen: $out"
rm "$work/files/out.txt"
if err="$(run --resume "$run_id" --decision "$decision" --approve 2>&1)"; then fail "a decision applied twice"; fi
grep -q "stale decision" <<<"$err" || fail "the replay was not refused clearly: $err"
[[ ! -e "$work/files/out.txt" ]] || fail "the replayed decision ran the call again"

# deny with a message: an unknown decision id is refused first; the model reads why.
out="$(run --mode approve "$work/files" "write another file")"
[[ "$out" =~ $suspended ]] || fail "unexpected: $out"
run_id="${BASH_REMATCH[1]}"; decision="${BASH_REMATCH[2]}"
if run --resume "$run_id" --decision 0123abcd --approve 2>/dev/null; then fail "an unknown decision id was taken"; fi
[[ ! -e "$work/files/denied.txt" ]] || fail "an unknown decision id approved the write"
out="$(run --resume "$run_id" --decision "$decision" --deny --message "not that folder")"
grep -q 'a person denied `write_file`: not that folder' <<<"$out" || fail "the model did not read the denial: $out"
[[ ! -e "$work/files/denied.txt" ]] || fail "a denied write happened"

# The policy is kept with the run: a resume without --mode goes on under `approve`
# (the next write suspends again instead of being denied under the read_only
# default); a resume that would loosen it is refused and changes nothing.
out="$(run --mode approve "$work/files" "write two files")"
[[ "$out" =~ $suspended ]] || fail "unexpected: $out"
run_id="${BASH_REMATCH[1]}"; decision="${BASH_REMATCH[2]}"
if err="$(run --resume "$run_id" --decision "$decision" --mode auto --approve 2>&1)"; then fail "a looser policy was taken"; fi
grep -q "would loosen it" <<<"$err" || fail "the loosening was not named: $err"
[[ ! -e "$work/files/p1.txt" ]] || fail "a refused resume wrote"
out="$(run --resume "$run_id" --decision "$decision" --approve)"
[[ "$(cat "$work/files/p1.txt")" == "one" ]] || fail "the approved write did not happen: $out"
[[ "$out" =~ $suspended ]] || fail "the run did not go on under approve: $out"
[[ "${BASH_REMATCH[1]}" == "$run_id" && "${BASH_REMATCH[2]}" != "$decision" ]] || fail "not a new suspension of the run: $out"
out="$(run --resume "$run_id" --decision "${BASH_REMATCH[2]}" --approve)"
[[ "$(cat "$work/files/p2.txt")" == "two" ]] || fail "the second approved write did not happen: $out"

# The same across processes with the runs in PostgreSQL.
pg_port="$(.peers/venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
store="$(bash tests/peers/postgres.sh start "$pg_port")"
out="$(run --mode approve "$work/files" "write a file")"
[[ "$out" =~ $suspended ]] || fail "postgres: unexpected: $out"
run --resume "${BASH_REMATCH[1]}" --decision "${BASH_REMATCH[2]}" --approve >/dev/null; rm -f ".mcp-agent/run-${BASH_REMATCH[1]}.dir"
[[ "$(cat "$work/files/pg.txt")" == "approved" ]] || fail "postgres: the approved write did not happen"

# --allow: an exact name runs under read_only without a person.
store="$work/state/runs.sqlite3"
out="$(run --allow write_file "$work/files" "write an allowed file" 2>"$work/err")"
[[ "$(cat "$work/files/allowed.txt")" == "allowed" ]] || fail "--allow did not let the write run: $out"
grep -q 'write_file: Successfully wrote' <<<"$out" || fail "unexpected: $out"

# A finished run says its id on stderr; --continue follows it up from another process
# (the model reads the whole conversation); --stream prints the text as it arrives.
[[ "$(grep '^run=' "$work/err")" =~ ^run=([0-9a-f]+)$ ]] || fail "no run= line: $(cat "$work/err")"
run_id="${BASH_REMATCH[1]}"
out="$(run --continue "$run_id" "and now?" 2>"$work/err")"
[[ "$out" == "continued in the same conversation" ]] || fail "--continue: $out"
grep -q "^run=$run_id$" "$work/err" || fail "--continue is not the same run: $(cat "$work/err")"
out="$(run --stream --continue "$run_id" "stream it" 2>/dev/null)"
[[ "$out" == "a streamed answer" ]] || fail "--stream: $out"

# agent_chat: lines from stdin are one conversation; a write is asked inline (y).
out="$(printf 'write chat.txt\ny\nthanks\n\n' | AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
  cargo run -q --locked -p examples --features postgres --example agent_chat -- --store "$work/state/chat.sqlite3" "$work/files" 2>"$work/err")" \
  || fail "agent_chat failed: $(cat "$work/err")"
[[ "$(cat "$work/files/chat.txt")" == "from the chat" ]] || fail "agent_chat: the approved write did not happen: $out"
grep -q "allow write_file" <<<"$out" || fail "agent_chat did not ask: $out"
grep -q "you are welcome" <<<"$out" || fail "agent_chat: no follow-up answer: $out"
grep -q '^run=' "$work/err" || fail "agent_chat: no run= line"

# --tenant: kept with the run, shown at the end of its suspended lines, again after a
# resume (read from the run); not taken with --resume.
tenant_line='^suspended run=([0-9a-f]+) tool=write_file decision=([0-9a-f]+) tenant=team-a$'
out="$(run --tenant team-a --mode approve "$work/files" "write for the team")"
[[ "$(wc -l <<<"$out")" -eq 1 && "$out" =~ $tenant_line ]] || fail "--tenant: unexpected: $out"
run_id="${BASH_REMATCH[1]}"; decision="${BASH_REMATCH[2]}"
if run --tenant team-b --resume "$run_id" --decision "$decision" --approve 2>/dev/null; then fail "--tenant was taken with --resume"; fi
out="$(run --resume "$run_id" --decision "$decision" --approve)"
[[ "$(cat "$work/files/t1.txt")" == "one" ]] || fail "--tenant: the approved write did not happen: $out"
[[ "$out" =~ $tenant_line && "${BASH_REMATCH[1]}" == "$run_id" ]] || fail "--tenant: the resumed run lost its tenant: $out"
out="$(run --resume "$run_id" --decision "${BASH_REMATCH[2]}" --approve)"
[[ "$(cat "$work/files/t2.txt")" == "two" ]] || fail "--tenant: the second write did not happen: $out"

# --record keeps a decision and runs nothing; a worker (--worker, until Ctrl-C) runs it.
out="$(run --mode approve "$work/files" "write a file for the worker")"
[[ "$out" =~ $suspended ]] || fail "worker: unexpected: $out"
run_id="${BASH_REMATCH[1]}"; decision="${BASH_REMATCH[2]}"
out="$(run --resume "$run_id" --decision "$decision" --approve --record)"
[[ "$out" == "recorded run=$run_id decision=$decision" ]] || fail "--record: $out"
[[ ! -e "$work/files/worker.txt" ]] || fail "--record ran the call"
( exec env AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
  cargo run -q --locked -p examples --features postgres --example agent_filesystem -- --store "$store" --worker "$work/files" ) 2>"$work/worker.err" &
worker_pid=$!
for _ in $(seq 1 1200); do [[ -e "$work/files/worker.txt" ]] && break; sleep 0.1; done
[[ "$(cat "$work/files/worker.txt" 2>/dev/null)" == "by the worker" ]] || fail "the worker did not run the recorded decision: $(cat "$work/worker.err")"
kill -INT "$worker_pid"; wait "$worker_pid" || fail "the worker did not stop cleanly: $(cat "$work/worker.err")"
worker_pid=""

# agent_inbox: refuses an address other machines reach without --allow-remote (before
# binding anything); on loopback it serves the page and the API, a run started over
# the API waits, a decision recorded over the API is run by its worker, Ctrl-C stops it.
inbox() { AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
  cargo run -q --locked -p examples --features postgres --example agent_inbox -- --store "$store" "$@"; }
if err="$(inbox --listen 0.0.0.0:1 "$work/files" 2>&1)"; then fail "agent_inbox listened on 0.0.0.0"; fi
grep -q -- '--allow-remote' <<<"$err" || fail "agent_inbox's refusal does not say what to do: $err"
web_port="$(.peers/venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
( exec env AGENT_PROVIDER=openai AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
  cargo run -q --locked -p examples --features postgres --example agent_inbox -- --store "$store" \
  --listen "127.0.0.1:$web_port" --principal ann "$work/files" ) >"$work/inbox.out" 2>"$work/inbox.err" &
inbox_pid=$!
for _ in $(seq 1 1200); do grep -q 'inbox on' "$work/inbox.out" 2>/dev/null && break; sleep 0.1; done
web="http://127.0.0.1:$web_port"
curl -sSf "$web/" | grep -q '<title>Approval inbox</title>' || fail "agent_inbox serves no page: $(cat "$work/inbox.err")"
session="$(curl -sSf "$web/api/session")"
csrf="$(.peers/venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["csrf"])' <<<"$session")"
grep -q '"id":"ann"' <<<"$session" || fail "agent_inbox: not ann: $session"
started="$(curl -sS -X POST -H 'content-type: application/json' -H "x-csrf-token: $csrf" -d '{"prompt": "write from the inbox"}' "$web/api/runs")"
inbox_run="$(.peers/venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["run"])' <<<"$started")" || fail "agent_inbox: no run started: $started"
decision=""
for _ in $(seq 1 1200); do
  decision="$(curl -sS "$web/api/runs/$inbox_run" | .peers/venv/bin/python -c 'import json,sys; p=json.load(sys.stdin).get("pending") or [{}]; print(p[0].get("decision", ""))')"
  [[ -n "$decision" ]] && break; sleep 0.1
done
[[ -n "$decision" ]] || fail "agent_inbox: the run never waited: $(curl -sS "$web/api/runs/$inbox_run")"
[[ ! -e "$work/files/inbox.txt" ]] || fail "agent_inbox: the write ran before the decision"
curl -sSf -X POST -H 'content-type: application/json' -H "x-csrf-token: $csrf" \
  -d "{\"decision\": \"$decision\", \"kind\": \"approve\"}" "$web/api/runs/$inbox_run/decisions" >/dev/null || fail "agent_inbox: the decision was refused"
for _ in $(seq 1 1200); do [[ -e "$work/files/inbox.txt" ]] && break; sleep 0.1; done
[[ "$(cat "$work/files/inbox.txt" 2>/dev/null)" == "from the inbox" ]] || fail "agent_inbox: the approved write did not happen: $(cat "$work/inbox.err")"
kill -INT "$inbox_pid"; wait "$inbox_pid" || fail "agent_inbox did not stop cleanly: $(cat "$work/inbox.err")"
inbox_pid=""

# --output-schema: the answer is one line of JSON matching the schema (a wrong answer
# repaired once, tools working meanwhile), or the run exits 1 saying why not.
cat >"$work/listing.json" <<'JSON'
{"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}},
 "required": ["files"], "additionalProperties": false}
JSON
out="$(run --output-schema "$work/listing.json" "$work/files" "list the files as JSON" 2>"$work/err")" || fail "--output-schema: $(cat "$work/err")"
[[ "$out" == '{"files":["allowed.txt"]}' ]] || fail "--output-schema printed: $out"
if out="$(run --output-schema "$work/listing.json" "$work/files" "list them again" 2>"$work/err")"; then
  fail "--output-schema: prose was taken as the answer: $out"
fi
grep -q 'does not match the output schema: the answer is not JSON' "$work/err" || fail "--output-schema: the failure does not say why: $(cat "$work/err")"
echo '{"$ref": "https://127.0.0.1:9/s.json"}' >"$work/far.json"
if err="$(run --output-schema "$work/far.json" "$work/files" "x" 2>&1)"; then fail "--output-schema took a schema that refers outside itself"; fi
grep -q 'does not point into the schema itself' <<<"$err" || fail "--output-schema: the refusal does not say why: $err"

# AGENT_PROVIDER=openai-responses: the same example over the Responses API.
out="$(AGENT_PROVIDER=openai-responses AGENT_MODEL=fake OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
  cargo run -q --locked -p examples --features postgres --example agent_filesystem -- --store "$store" "$work/files" "say hi" 2>/dev/null)"
[[ "$out" == "answered over the Responses API" ]] || fail "openai-responses: $out"
grep -q '"path": "/v1/responses"' <(curl -sS "http://127.0.0.1:$port/_requests") || fail "openai-responses: nothing reached /v1/responses"

# No model configured: says which variable.
if err="$(cargo run -q --locked -p examples --features postgres --example agent_filesystem -- "$work/files" hi 2>&1)"; then
  fail "ran without AGENT_MODEL"
fi
grep -q AGENT_MODEL <<<"$err" || fail "the error does not name AGENT_MODEL: $err"
echo "agent example: read_only denial, suspend/resume across processes (SQLite and PostgreSQL), decisions by id (a replay and an unknown id refused), a denial with a message, the policy kept with the run, --allow, --continue, --stream, agent_chat, --tenant, --record and --worker, agent_inbox, --output-schema, openai-responses, missing model: ok"
