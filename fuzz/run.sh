#!/usr/bin/env bash
# Runs each fuzz target for a fixed budget (seconds per target, default 60).
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
budget="${1:-60}"
cd "$(dirname "$0")"
for target in capture tracker; do
    echo "== fuzzing $target for ${budget}s"
    cargo +nightly fuzz run "$target" -- -max_total_time="$budget" -rss_limit_mb=2048
done
