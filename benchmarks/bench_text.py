"""CPU seconds of each text step of crag on a megabyte of adversarial text, per shape.

    python benchmarks/bench_text.py [--size BYTES]

Prints the worst shape per step: "bounded work on any input" means well under a
second per step for a megabyte.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
from test_bounded_work import STEPS


def shapes(size: int) -> dict[str, str]:
    units = {
        "letters": "a", "words": "word ", "dots": ". ", "hyphens": "-", "digits": "1",
        "digit groups": "12 ", "versions": "v1.2.3 ", "quotes": '"', "vs": "A vs B ",
        "and": "and ", "caps": "ABC ", "newlines": "x\n", "greek": "λβε", "mixed": "Ab1-",
        "questions": "What is it? ", "typeset": "é–×ﬁ",
    }  # fmt: skip
    return {name: unit * (size // len(unit)) for name, unit in units.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    size = parser.parse_args().size
    print(f"{'step':<20} {'worst s':>8}  shape ({size:,} characters each)")
    for step, fn in STEPS.items():
        times = {}
        for name, sample in shapes(size).items():
            start = time.process_time()
            fn(sample)
            times[name] = time.process_time() - start
        worst = max(times, key=times.__getitem__)
        print(f"{step:<20} {times[worst]:8.2f}  {worst}")


if __name__ == "__main__":
    main()
