# pathtwin — the two commands the README promises:
#   make demo   builds everything and runs the NSDI'09 Table 2 reproduction (simulation)
#   make test   builds everything and runs every test (Rust and Python)
# Both work on a fresh machine: `make setup` installs what they need first. Python packages go
# into a project virtual environment (.venv, or VENV=...), never into the system interpreter.

VENV ?= .venv
PYTHON := $(VENV)/bin/python
PIP := $(PYTHON) -m pip
# The venv's bin comes first: maturin's build backend runs the `maturin` it installed there.
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)

.PHONY: setup build demo test test-rust test-python bench clean

$(PYTHON):
	python3 -m venv $(VENV)

# System packages the tests use as peers and tools (iperf3, tcpdump, tshark, tcptrace, ns-2,
# chromium for the browser tests of reports),
# and the Python build/runtime dependencies in the venv. Idempotent and quick when already
# installed.
setup: $(PYTHON)
	PYTHON=$(PYTHON) ./scripts/setup.sh

# The extension is built guided by a profile of a training run (scripts/build.sh; PGO=0
# skips it). The package's bytecode is compiled here, once: an editable install runs from the
# source tree, and where PYTHONDONTWRITEBYTECODE is set every command would otherwise compile
# the modules it imports anew (a tenth of a short `pathtwin sim`).
build: setup
	PYTHON=$(PYTHON) ./scripts/build.sh
	$(PYTHON) -m compileall -q python/pathtwin > /dev/null

demo: build
	$(PYTHON) -m pathtwin.cli reproduce nsdi09-table2 --out out/demo

# pathtwin-py's own tests (the Parquet writer's) touch no Python symbol, so its test binary
# links without libpython.
test-rust: setup
	cargo test --workspace

# The package is type-checked (mypy, configured in pyproject.toml) before its tests run. The
# tests run in two phases: those that compute (simulations, traces, reports) spread over the
# processors (pytest-xdist); then those marked `serial` (real
# traffic in real time: emulations, loopback, kernel relays) one at a time, with the machine
# to themselves. Both phases run whatever the first gives; either failing fails the target.
# Each lists its slowest tests at the end, and both end with their time per test file
# (scripts/test_times.py, from the JUnit XML each writes to out/), so that a run's log says
# where its time went. In the parallel phase the tests marked `long` start first.
PYTEST_WORKERS ?= auto
test-python: build
	$(PYTHON) -m mypy python/pathtwin
	status=0; \
	$(PYTHON) -m pytest -q -m "not serial" -n $(PYTEST_WORKERS) --dist loadgroup --durations=15 \
		--junitxml=out/test-parallel.xml || status=$$?; \
	$(PYTHON) -m pytest -q -m serial --durations=25 --junitxml=out/test-serial.xml || status=$$?; \
	$(PYTHON) scripts/test_times.py out/test-parallel.xml out/test-serial.xml; \
	exit $$status

test: test-rust test-python

bench: build
	$(PYTHON) bench/sim/run.py

clean:
	cargo clean
	rm -rf python/pathtwin/_native*.so $(VENV)
