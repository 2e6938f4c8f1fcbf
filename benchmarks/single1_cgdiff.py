"""Per-message inclusive instructions of the functions of two callgrind runs (N1 and N2 messages):
(I(N2) - I(N1)) / (N2 - N1) per function, from ``callgrind_annotate --inclusive=yes`` (single1.md).

    python benchmarks/single1_cgdiff.py RUN_N1.out RUN_N2.out COUNT [PATTERN ...]

COUNT is N2 - N1; PATTERN: substrings of the function names to show (default: the largest 40)."""

from __future__ import annotations

import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+(.*?)(?: \[.*\])?$")


def inclusive(path: str) -> dict[str, int]:
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", path], capture_output=True, text=True
    ).stdout
    out: dict[str, int] = {}
    for line in text.splitlines():
        match = LINE.match(line)
        if match:
            name = match.group(2)
            out[name] = max(out.get(name, 0), int(match.group(1).replace(",", "")))
    return out


def main() -> None:
    first, second, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    patterns = sys.argv[4:]
    a, b = inclusive(first), inclusive(second)
    rows = [(name, (b.get(name, 0) - a.get(name, 0)) / count) for name in set(a) | set(b)]
    if patterns:
        rows = [row for row in rows if any(p in row[0] for p in patterns)]
    rows.sort(key=lambda row: -row[1])
    for name, per in rows[: 40 if not patterns else len(rows)]:
        print(f"{per:12,.0f}  {name[:150]}")


if __name__ == "__main__":
    main()
