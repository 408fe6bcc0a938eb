#!/usr/bin/env bash
# The whole test suite (tests/run.sh) while every CPU core is kept busy by other
# processes: one busy loop per core (`nproc`), at normal priority, so timing-
# sensitive tests run on a starved machine. Exits with run.sh's exit code.
#
#   bash tests/under-load.sh [args passed on to tests/run.sh...]
#
# Each burner, and the suite itself, runs in its own process group; every exit
# path (success, failure, Ctrl-C, TERM) kills those groups, so nothing is left
# behind. UNDER_LOAD_COMMAND replaces `bash tests/run.sh` (to try this script
# out cheaply, e.g. UNDER_LOAD_COMMAND='sleep 2; exit 3' bash tests/under-load.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

burners=()
suite=""

cleanup() {
  local pid n
  for pid in "${burners[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  for pid in "${burners[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  burners=()
  if [[ -n "$suite" ]]; then
    # Interrupted: end the suite's whole process group; KILL it if TERM has
    # not ended the suite within 10 s.
    kill -TERM -- "-$suite" 2>/dev/null || true
    for ((n = 0; n < 100; n++)); do
      [[ "$(ps -o stat= -p "$suite" 2>/dev/null)" == [!Z]* ]] || break
      sleep 0.1
    done
    kill -KILL -- "-$suite" 2>/dev/null || true
    wait "$suite" 2>/dev/null || true
    suite=""
  fi
}
trap cleanup EXIT
trap 'echo "under-load: interrupted" >&2; cleanup; exit 130' INT
trap 'echo "under-load: terminated" >&2; cleanup; exit 143' TERM

cores=$(nproc)
for ((i = 0; i < cores; i++)); do
  # setsid: the burner leads its own process group (a background job of a
  # non-interactive shell is no group leader, so setsid execs in place and $!
  # is the burner itself).
  setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
  burners+=("$!")
done
echo "under-load: $cores CPU burner(s) running at normal priority (pids ${burners[*]})" >&2

# The suite runs in the background in its own process group and is waited for,
# so a TERM or Ctrl-C reaches the trap at once (bash defers traps until a
# foreground command finishes) and the trap can end the suite's whole tree.
if [[ -n "${UNDER_LOAD_COMMAND:-}" ]]; then
  setsid bash -c "$UNDER_LOAD_COMMAND" under-load "$@" &
else
  setsid bash tests/run.sh "$@" &
fi
suite=$!
status=0
wait "$suite" || status=$?
suite=""

cleanup
echo "under-load: stopped the $cores CPU burner(s); suite exit status $status" >&2
exit "$status"
