#!/usr/bin/env bash
# Builds the native extension into the project's virtual environment (an editable install),
# guided by a profile of a training run (profile-guided optimisation, PGO):
#
#   1. an instrumented build (target/pgo-instrumented) counts which branches each run takes;
#   2. scripts/pgo_train.py drives it through simulations and a trace analysis of its own;
#   3. LLVM's llvm-profdata merges the counts, and the release build (target/pgo-use) lays
#      out and inlines the code by them.
#
# The engine does the same work either way; the measured gain and the training set are in
# bench/sim/README.md ("Profile-guided build"). PGO=0 builds without it, and so does a
# toolchain without llvm-profdata (the `llvm-tools` rustup component, added here if rustup
# can), with a note on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
# maturin's build backend runs the `maturin` installed beside the interpreter.
export PATH="$(cd "$(dirname "$PYTHON")" && pwd):$PATH"

install() { "$PYTHON" -m pip install --no-build-isolation -q -e .; }

if [ "${PGO:-1}" = 0 ]; then
    install
    exit 0
fi
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ] && command -v rustup >/dev/null; then
    rustup component add llvm-tools >/dev/null 2>&1 || true
fi
if [ ! -x "$profdata" ]; then
    echo "build: no llvm-profdata for $(rustc -V) (rustup component add llvm-tools); building without profile guidance" >&2
    install
    exit 0
fi

profiles="$PWD/target/pgo-profiles"
merged="$PWD/target/pgo-merged.profdata"
RUSTFLAGS="-Cprofile-generate=$profiles" CARGO_TARGET_DIR=target/pgo-instrumented install
# Train again only when the instrumented code changed: rustc tracks the profile as an input,
# and a new training run (whose thread timing varies) would rebuild an unchanged tree.
stamp=$(sha256sum target/pgo-instrumented/release/lib_native.so | cut -d' ' -f1)
if [ ! -s "$merged" ] || [ "$(cat "$merged.source" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$profiles"
    mkdir -p "$profiles"
    LLVM_PROFILE_FILE="$profiles/%m_%p.profraw" "$PYTHON" scripts/pgo_train.py
    "$profdata" merge -o "$merged" "$profiles"
    echo "$stamp" > "$merged.source"
fi
RUSTFLAGS="-Cprofile-use=$merged" CARGO_TARGET_DIR=target/pgo-use install
