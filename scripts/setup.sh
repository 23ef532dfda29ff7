#!/usr/bin/env bash
# Installs what building and testing pathtwin needs on a fresh Debian machine: system tools
# (as root, via apt) and Python packages (via pip). Safe to run repeatedly.
set -euo pipefail

# chromium: the browser tests of HTML reports (tests/test_report.py) drive it through Playwright,
# which cannot download its own browsers here.
# aria2, opentracker: the BitTorrent swarm of NSDI'09 Figure 7 (tests/test_figure7.py,
# bench/measure/figure7.py).
apt_pkgs=(iperf3 tcpdump tshark tcptrace iproute2 ns2 ns2-examples chromium aria2 opentracker)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to install: ${missing[*]}" >&2
        exit 2
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

py=${PYTHON:-python3}
need_pip=0
$py - <<'PY' || need_pip=1
import importlib.util, sys
mods = ["maturin", "pyarrow", "pandas", "matplotlib", "rich", "typer", "numpy", "pywt", "distributed", "pytest", "xdist", "mypy", "playwright"]
sys.exit(1 if any(importlib.util.find_spec(m) is None for m in mods) else 0)
PY
if [ "$need_pip" = 1 ]; then
    $py -m pip install -q "maturin>=1.5,<2" "pyarrow>=14" "pandas>=2" "matplotlib>=3.7" "rich>=13" "typer>=0.12" "numpy>=1.24" "PyWavelets>=1.4" "dask[distributed]>=2024.1" "pytest>=7" "pytest-xdist>=3.5" "mypy>=1.10" "playwright>=1.40"
fi
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust with rustup)" >&2; exit 2; }
