#!/usr/bin/env bash
# Runs each fuzz target for a fixed budget (seconds per target, default 60); further
# arguments pick targets (default: all of capture, tracker, replay_db).
#
# capture, tracker (the capture reader, Rust): need a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`).
# replay_db (the replay database reader, Python: fuzz/replay_db.py): needs atheris
# (`pip install atheris`, only for this script: `make test` does not use it) in the
# interpreter $PYTHON (default: python3) with pathtwin importable, native module built.
# Its corpus is fuzz/corpus/replay_db, a crashing input lands in fuzz/artifacts/replay_db/.
set -euo pipefail
budget="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(capture tracker replay_db)
cd "$(dirname "$0")"
for target in "${targets[@]}"; do
    echo "== fuzzing $target for ${budget}s"
    case "$target" in
        replay_db)
            mkdir -p corpus/replay_db artifacts/replay_db
            "${PYTHON:-python3}" replay_db.py corpus/replay_db -max_total_time="$budget" -rss_limit_mb=2048 \
                -artifact_prefix=artifacts/replay_db/
            ;;
        *)
            cargo +nightly fuzz run "$target" -- -max_total_time="$budget" -rss_limit_mb=2048
            ;;
    esac
done
