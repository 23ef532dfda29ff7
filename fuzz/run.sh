#!/usr/bin/env bash
# Runs each fuzz target for a fixed budget (seconds per target, default 60), one after the
# other; further arguments pick targets (default: all of capture, tracker, config_toml,
# config_json, replay_db).
#
# capture, tracker (the capture reader), config_toml, config_json (the config schema): Rust,
# need a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Corpora grow in
# corpus/<target> (not committed). The config targets also start from seeds read in place:
# the TOML examples (../examples) and seeds/config_toml (sections the examples do not use:
# markers, pipes and replay, RED/RIO/FRIO, shared bottlenecks, steps); seeds/config_json
# holds the same configs as JSON, as Python passes them (regenerate with Python's tomllib:
# json.dumps(tomllib.load(f)) for each TOML seed and example).
# replay_db (the replay database reader, Python: fuzz/replay_db.py): needs atheris
# (`pip install atheris`, only for this script: `make test` does not use it) in the
# interpreter $PYTHON (default: python3) with pathtwin importable, native module built.
# A crashing input lands in artifacts/<target>/.
set -euo pipefail
budget="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(capture tracker config_toml config_json replay_db)
cd "$(dirname "$0")"
seeds() {
    case "$1" in
        config_toml) echo seeds/config_toml ../examples ;;
        config_json) echo seeds/config_json ;;
    esac
}
for target in "${targets[@]}"; do
    echo "== fuzzing $target for ${budget}s"
    mkdir -p "corpus/$target" "artifacts/$target"
    case "$target" in
        replay_db)
            "${PYTHON:-python3}" replay_db.py corpus/replay_db -max_total_time="$budget" -rss_limit_mb=2048 \
                -artifact_prefix=artifacts/replay_db/
            ;;
        *)
            # shellcheck disable=SC2046 # seeds is a list of directories
            cargo +nightly fuzz run "$target" "corpus/$target" $(seeds "$target") -- -max_total_time="$budget" \
                -rss_limit_mb=2048
            ;;
    esac
done
