#!/usr/bin/env bash
# Compile cost of a crate declaring a server from a 200-tool snapshot (docs/performance.md):
# a scratch crate outside the workspace, built in debug; prints the times.
#   bash tests/bench/compile-cost.sh [TOOLS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
TOOLS="${1:-200}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR/src" "$DIR/.mcp"
cat > "$DIR/Cargo.toml" <<TOML
[package]
name = "compile-cost"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
mcp-runtime = { path = "$ROOT/mcp-runtime" }

[workspace]
TOML
cp "$ROOT/Cargo.lock" "$DIR/Cargo.lock"
python3 - "$DIR/.mcp/big.json" "$TOOLS" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
tools = []
for i in range(n):
    tools.append({
        "name": f"tool_{i:03}",
        "description": f"Tool number {i}: does one thing with its arguments.",
        "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer"},
            "mode": {"type": "string", "enum": ["fast", "full"]},
            "filters": {"type": "object", "properties": {"owner": {"type": "string"}, "open": {"type": "boolean"}}},
        }, "required": ["query"]},
        "outputSchema": {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}}, "total": {"type": "integer"}}},
    })
snap = {"format": 1, "name": "big", "server": {"command": ["true"]}, "tools": tools, "prompts": [], "resourceTemplates": []}
open(path, "w").write(json.dumps(snap, indent=2) + "\n")
PY
cat > "$DIR/src/main.rs" <<'RS'
use mcp_runtime::mcp;

#[mcp(command("true"))]
pub struct Big;

fn main() {
    let big = Big::new();
    println!("{}", big.mcp().name());
}
RS
export CARGO_TARGET_DIR="$ROOT/target/compile-cost"
secs() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $s" | bc; }
cd "$DIR"
deps=$(secs cargo build --offline --quiet)
cargo clean --offline -p compile-cost >/dev/null 2>&1
crate=$(secs cargo build --offline --quiet)
touch src/main.rs
incremental=$(secs cargo build --offline --quiet)
cargo check --offline --quiet >/dev/null 2>&1
touch src/main.rs
check=$(secs cargo check --offline --quiet)
sed -i 's/#\[mcp(command("true"))\]/#[mcp(command("true"), snapshot = "none")]/' src/main.rs
cargo build --offline --quiet >/dev/null 2>&1
touch src/main.rs
bare=$(secs cargo build --offline --quiet)
printf 'tools=%s: first build (with dependencies, cached or not) %.1fs; the declaring crate alone %.1fs; after a touch: build %.1fs (the same crate without a snapshot: %.1fs), check %.1fs\n' \
  "$TOOLS" "$deps" "$crate" "$incremental" "$bare" "$check"
