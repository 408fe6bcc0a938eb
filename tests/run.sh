#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
# Installs the pinned test peers, then: format check, clippy, tests, doc tests, the
# official conformance suite, examples.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s (disk: %s free)\n' "$*" "$(df -h --output=avail . | tail -1 | tr -d ' ')" >&2; }

# A compile-time test that fails prints its compiler errors again at the very end,
# without colours, so a log cut to its tail still shows why (and how much disk is left).
compile_test() {
  local log status=0
  log=$(mktemp)
  timeout 40m cargo test -q --locked "$@" >"$log" 2>&1 || status=$?
  cat "$log"
  if [ "$status" -ne 0 ]; then
    echo "--- the compiler's errors, again:" >&2
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E -A10 'error(\[E[0-9]+\])?:' | head -120 >&2 || true
    df -h . >&2
  fi
  rm -f "$log"
  return "$status"
}

step "installing test peers (npm servers, Python venv with mcp, Node 22)"
bash tests/peers/install.sh

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --all --manifest-path fuzz/Cargo.toml -- --check

step "imports flow downward: no import circle, at most 3 upward imports (tests/imports.py)"
python3 tests/imports.py --max-upward 3 --max-circles 0

step "files named for what they hold: no mod.rs, no shared.rs/util.rs/common.rs, at most 5 glob imports, no *Inner god struct (tests/layout.py)"
python3 tests/layout.py

step "a rust-version that is true: no normal dependency of a published crate needs a newer Rust (tests/msrv.py)"
python3 tests/msrv.py

step "at most 800 lines in every tracked .rs file, tests included (tests/lines.sh)"
bash tests/lines.sh 800

step "a stdio-only build stays light: at most 35 crates, no YAML parser, sha2 or iri-string (tests/deps.sh)"
bash tests/deps.sh 35

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "feature combinations users pick: stdio only, HTTP only (with and without OAuth), each with macros, and with skills or schema checks"
for features in stdio stdio,macros stdio,skills stdio,schema stdio,macros,skills http http,macros http,oauth http,skills; do
  cargo clippy -p mcp-runtime --locked --no-default-features --features "$features" -- -D warnings
done
for features in "" http postgres http,postgres; do
  cargo clippy -p mcp-runtime-core --locked --no-default-features --features "$features" -- -D warnings
done
cargo clippy -p mcp-agent --locked --no-default-features -- -D warnings
cargo clippy -p mcp-agent --locked --no-default-features --features web -- -D warnings
cargo run -q --locked -p mcp-runtime --no-default-features --features stdio,macros --example stdio_only
cargo run -q --locked -p mcp-runtime --no-default-features --features http,macros --example http_only

step "the crates meant for publishing package, and mcp-runtime-core, mcp-runtime, mcp-runtime-macros build from their packages"
rm -rf target/package
# mcp-soak (the soak run's binary) needs the test support crate, which is not published.
cargo package --workspace --exclude mcp-soak --locked --no-verify --allow-dirty
# Cargo unpacks the packages it verifies against into its home, in a folder named after
# target/package's path, and reuses an unpacked copy whose version has not changed: a
# checkout at a fixed path (as CI's is) would verify against the sources of an earlier
# run. Remove those copies first, and check below that what was built is what was packed.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rm -rf "$cargo_home"/registry/src/-*/mcp-runtime-core-0.1.0 \
  "$cargo_home"/registry/src/-*/mcp-runtime-macros-0.1.0 \
  "$cargo_home"/registry/src/-*/mcp-runtime-0.1.0
cargo package --locked --allow-dirty -p mcp-runtime-core -p mcp-runtime -p mcp-runtime-macros
for sibling in mcp-runtime-core mcp-runtime-macros; do
  packed=$(mktemp -d)
  tar -xzf "target/package/$sibling-0.1.0.crate" -C "$packed"
  for unpacked in "$cargo_home"/registry/src/-*/"$sibling-0.1.0"; do
    [ -d "$unpacked" ] || continue
    if ! diff -r --exclude=.cargo-ok "$packed/$sibling-0.1.0" "$unpacked" > /dev/null; then
      echo "$unpacked is not what target/package/$sibling-0.1.0.crate holds" >&2
      exit 1
    fi
  done
  rm -rf "$packed"
done
# Verification resolves siblings from the packages just built *and* crates.io: each
# verified package must have used ours (same checksum as our .crate), never a
# crates.io crate of the same name and version (docs/decisions.md, "Names nobody else owns").
for lock in target/package/*-0.1.0/Cargo.lock; do
  for sibling in mcp-runtime-core mcp-runtime-macros mcp-runtime; do
    used=$(awk -v n="$sibling" '$0 == "name = \"" n "\"" {f=1} f && /^checksum/ {gsub(/"/, "", $3); print $3; exit} /^$/ {f=0}' "$lock")
    [ -z "$used" ] && continue
    ours=$(sha256sum "target/package/$sibling-0.1.0.crate" | cut -d' ' -f1)
    if [ "$used" != "$ours" ]; then
      echo "$lock: $sibling resolved to a crate that is not ours (checksum $used, ours $ours)" >&2
      exit 1
    fi
  done
done

step "compile-time tests, untimed: they build their own dependencies (minutes when cold)"
# trybuild and the snapshot test compile scratch crates into target folders of their
# own; a cold build of their dependencies on a busy 2-core machine can outlast any
# sensible per-test limit. Run them once here, with no per-test limit (but bounded),
# so nextest below runs them warm (.config/nextest.toml, tests/README.md).
compile_test -p mcp-runtime --test it -- --exact macros::ui
compile_test -p mcp-agent --test it -- --exact attach_lines_are_checked_at_compile_time
compile_test -p mcp-runtime-cli --test cli -- --exact snapshots_take_effect_on_the_next_build

step "tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked
else
  echo "cargo-nextest not found; using cargo test" >&2
  cargo test --workspace --locked --lib --bins --tests
fi

step "doc tests"
cargo test --workspace --locked --doc

step "official MCP conformance suite (client scenarios)"
bash tests/conformance/run.sh

step "snapshots in .mcp/ match their servers (mcp snapshot --check)"
cargo run -q --locked -p mcp-runtime-cli -- snapshot --check

step "examples"
cargo run -q --locked -p examples --example quickstart
cargo run -q --locked -p examples --example custom_transport
cargo run -q --locked -p examples --example inline
cargo run -q --locked -p examples --example files
cargo run -q --locked -p examples --example everything_http
cargo run -q --locked -p examples --example tasks
cargo run -q --locked -p examples --example apps -- .peers/venv/bin/python tests/peers/pyserver.py stdio show_chart '{"title":"Tides"}'
cargo run -q --locked -p examples --example skills -- .peers/venv/bin/python tests/peers/skillserver.py stdio pdf-processing references/FORMS.md

step "the agent example, end to end (scripted model, real filesystem server)"
bash tests/agent-example.sh

step "workers under fire, smoke: 4 workers SIGKILLed at random on one PostgreSQL, 12 runs, 429/503 from the model (tests/fleet.sh; nothing timed is asserted)"
bash tests/fleet.sh --smoke

step "fuzz targets: every kept input (seeds, regressions) replayed; the libFuzzer binaries build (fuzz/README.md)"
CARGO_TARGET_DIR=target/fuzz cargo test --locked --manifest-path fuzz/Cargo.toml
CARGO_TARGET_DIR=target/fuzz cargo build -q --locked --manifest-path fuzz/Cargo.toml --bins

step "the soak run, smoke mode: 100 clients for 30 s against real peers (docs/reliability.md)"
bash tests/soak.sh 0.5

step "the side-by-side benchmark, smoke mode (every client runs; no timing asserted)"
bash tests/bench/run.sh --smoke --reps 1

step "the agent's overhead benchmark, smoke mode: every part runs briefly, in the test build (cargo bench -p mcp-agent --bench overhead measures; no timing asserted)"
cargo bench --locked --workspace --profile dev --bench overhead -- --smoke

step "all checks passed"
