"""The package as a user installs it: a wheel built from this tree by the project's own build
backend (maturin, not an editable install), installed into a fresh virtual environment, runs
a reproduction from another directory. The reproductions read their topologies as package
data (``pathtwin/examples``), so this fails if a file is left out of the wheel or found
through the source tree.

The wheel packages the extension `make build` compiled (``_build_settings``): maturin runs
cargo with the build's target directory and flags, cargo finds the extension fresh, and the
wheel's ``_native`` is the installed one, byte for byte. Compiling it anew in a third target
directory took 135 s of CI's parallel phase (2 cores) and proved nothing more: the build,
packaging and installation are still the build backend's and pip's. It runs where cargo and
maturin are installed (``make setup``); ``PATHTWIN_SKIP_INSTALL_TEST=1`` skips it.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(os.environ.get("PATHTWIN_SKIP_INSTALL_TEST") == "1", reason="PATHTWIN_SKIP_INSTALL_TEST=1"),
    pytest.mark.skipif(shutil.which("cargo") is None or not (BIN / "maturin").exists() and shutil.which("maturin") is None,
                       reason="building the wheel needs cargo and maturin (make setup)"),
]


def _env() -> dict[str, str]:
    """The environment without this checkout on the import path; the build backend's
    `maturin` (beside this interpreter) and cargo on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join([str(BIN), str(Path.home() / ".cargo" / "bin"), env.get("PATH", "")])
    return env


def _build_settings() -> dict[str, str]:
    """cargo's target directory and flags for the extension `make build` installed: those of
    its profile-guided release build (scripts/build.sh: ``CARGO_TARGET_DIR=target/pgo-use``,
    ``RUSTFLAGS=-Cprofile-use=$PWD/target/pgo-merged.profdata``) when the installed
    extension is that build's output; otherwise cargo's defaults (``target/release``, which
    `PGO=0 make build` and a toolchain without llvm-profdata use)."""
    installed = REPO / "python" / "pathtwin" / "_native.abi3.so"
    pgo = REPO / "target" / "pgo-use" / "release" / "lib_native.so"
    if installed.is_file() and pgo.is_file() and filecmp.cmp(installed, pgo, shallow=False):
        return {"CARGO_TARGET_DIR": str(REPO / "target" / "pgo-use"),
                "RUSTFLAGS": f"-Cprofile-use={REPO / 'target' / 'pgo-merged.profdata'}"}
    return {}


def test_a_wheel_installs_and_reproduces_from_another_directory(tmp_path):
    env = {**_env(), **_build_settings()}
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(REPO)], capture_output=True, text=True, env=env, timeout=3600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [wheel] = wheels.glob("pathtwin-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("pathtwin/examples/nsdi09-figure5.toml", "pathtwin/examples/nsdi09-table2.toml",
                   "pathtwin/examples/groundtruth/campus.toml", "pathtwin/measure/endpoints.py",
                   "pathtwin/py.typed", "pathtwin/_native.pyi", "pathtwin/cli/__main__.py"):
        assert needed in names, (needed, names)
    [native] = [n for n in names if n.startswith("pathtwin/_native") and n.endswith(".so")]
    installed = REPO / "python" / "pathtwin" / "_native.abi3.so"
    if "CARGO_TARGET_DIR" in env:  # the build's own extension, packaged, not compiled anew
        assert zipfile.ZipFile(wheel).read(native) == installed.read_bytes(), native

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, timeout=300)
    py = venv / "bin" / "python"
    # pathtwin itself from the wheel; its dependencies (pandas, pyarrow, typer, ...) from this
    # interpreter's environment, made visible by a path file instead of downloaded again. A
    # path file's directory is added as is: the editable install's own path file there is
    # not read, so this checkout stays off the new environment's path.
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, env=env).stdout.strip()
    deps = [p for p in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]} if Path(p).is_dir()]
    (Path(purelib) / "pathtwin-test-deps.pth").write_text("".join(f"{p}\n" for p in deps))
    install = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], capture_output=True,
                             text=True, env=env, timeout=600)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(py), "-c", "import pathtwin, pathtwin._native; print(pathtwin.__file__)"],
                           capture_output=True, text=True, cwd=elsewhere, env=env, timeout=120)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout

    r = subprocess.run([str(venv / "bin" / "pathtwin"), "reproduce", "nsdi09-figure5", "--duration", "5s"],
                       capture_output=True, text=True, cwd=elsewhere, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NSDI'09 Figure 5 (sim): base RTT 50 ms"), r.stdout
    assert "(paper: 629 ms vs 53.2 ms)" in r.stdout, r.stdout
