"""Which txmq modules run compiled with mypyc: ``python -m txmq.native [--summary]``."""

from __future__ import annotations

import sys

from txmq._native import StaleNativeModule, compiled, entries, pure_wanted, summary

__all__ = ["StaleNativeModule", "compiled", "entries", "main", "pure_wanted", "summary"]


def main(argv: list[str]) -> None:
    print(summary())
    if argv == ["--summary"]:
        return
    for module, on in sorted(compiled().items()):
        print(f"  {'compiled' if on else 'pure    '}  {module}")


if __name__ == "__main__":
    main(sys.argv[1:])
