"""Per-file test time of `make test`'s phases, from the JUnit XML files pytest wrote
(``--junitxml``): each file's tests summed (set-up, call and tear-down; in the parallel phase
that is worker time, spread over the workers), slowest first, with each phase's total.

    python scripts/test_times.py out/test-parallel.xml out/test-serial.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def per_file(junit: Path) -> dict[str, tuple[float, int]]:
    """Seconds and test count per test file in ``junit``."""
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for case in ET.parse(junit).getroot().iter("testcase"):
        # classname is the module's dotted path ("tests.test_replay"), or with a class after it.
        module = case.get("classname", "?")
        parts = module.split(".")
        name = next((".".join(parts[:i + 1]) for i, p in enumerate(parts) if p.startswith("test_")), module)
        path = name.replace(".", "/") + ".py"
        seconds[path] += float(case.get("time", 0.0))
        count[path] += 1
    return {k: (seconds[k], count[k]) for k in seconds}


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: test_times.py JUNIT.xml...", file=sys.stderr)
        return 2
    status = 0
    for arg in argv:
        junit = Path(arg)
        if not junit.is_file():
            # A phase that stopped before its end wrote none: say so, and list the others.
            print(f"{junit}: no such file (pytest --junitxml writes it)", file=sys.stderr)
            status = 1
            continue
        try:
            rows = per_file(junit)
        except ET.ParseError as e:
            print(f"{junit}: not a JUnit XML file ({e})", file=sys.stderr)
            return 1
        total = sum(s for s, _n in rows.values())
        print(f"{junit.name}: {total:.0f} s in {sum(n for _s, n in rows.values())} tests")
        for path, (s, n) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
            if s >= 1.0:
                print(f"  {s:8.1f} s  {n:4d}  {path}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
