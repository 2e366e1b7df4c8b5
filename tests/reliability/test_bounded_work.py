"""Bounded work on any input: every text step of crag does work linear in its input
(no pattern that backtracks, nothing quadratic), measured here on adversarial shapes.

Each case times the step (CPU seconds, best of three) on an input large enough to
measure and on four times that input, and asserts the ratio stays near linear: 4 for
linear work, 16 for quadratic, failing above `MAX_RATIO`. That is a bound on
complexity, not on speed (the seconds per megabyte are printed by
`benchmarks/bench_text.py`); a step gone badly super-linear is also stopped by the
case's timeout rather than hanging the suite."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import pytest

from crag import text
from crag.directives import without_directives
from crag.grading import constraints, coverage, decompose
from crag.ingest.page_edges import strip_running_lines
from crag.prompts import partial_answer
from crag.redact import redact

#: The shapes that cost the steps the most when measured (see the benchmark), each a
#: unit repeated to the input's size.
SHAPES = {
    "short questions": "What is it vs that? ",
    "questions that lean on the one before": "What is it? ",
    "number groups": "12 345-678 ",
    "typeset symbols": "λβε–×ﬁ. ",
}
STEPS: dict[str, Callable[[str], Any]] = {
    "normalize": text.normalize,
    "split_sentences": text.split_sentences,
    "strips_of": lambda t: text.strips_of(t, 2),
    "terms": text.terms,
    "keyword_query": text.keyword_query,
    "clauses": text.clauses,
    "printable": text.printable,
    "key_terms": coverage.key_terms,
    "rule_parts": decompose.rule_parts,
    "constraints": constraints.constraints,
    "without_directives": without_directives,
    "redact": redact,
    "strip_running_lines": lambda t: strip_running_lines([t, t]),
    "partial_answer": lambda t: partial_answer('{"answer": "' + t),
}
#: Linear work grows 4x with 4x the input, n log n about 4.5x, n^1.5 8x, quadratic 16x;
#: measured, the linear steps grow 2.3x to 5.6x.
MAX_RATIO = 10.0
#: The smaller input grows from `START` characters until the step takes `MIN_S` on it
#: (timing noise is small against that), up to `LIMIT` characters.
START, LIMIT, MIN_S = 2_000, 256_000, 0.003
#: Known super-linear steps: (step, shape) -> why. Strict, so a fix shows as a failure
#: that asks for its line here to go.
KNOWN: dict[tuple[str, str], str] = {}


#: Steps that remember whole passages: cleared before each run, so a run does the work
#: rather than find it remembered.
PASSAGE_MEMOS = (text.normalize, text._sentences)


def cpu_seconds(step: Callable[[str], Any], sample: str, *, enough: float = 0.0) -> float:
    """The step's CPU time on `sample`: the best of three runs, each from cold passage
    memos, or the first run that takes no more than `enough` (noise only ever adds
    time)."""
    best = float("inf")
    for _ in range(3):
        for memo in PASSAGE_MEMOS:
            memo.cache_clear()
        started = time.process_time()
        step(sample)
        best = min(best, time.process_time() - started)
        if best <= enough:
            break
    return best


def growth(step: Callable[[str], Any], unit: str) -> tuple[int, float, float]:
    """(n, seconds on n characters of `unit`, seconds on 4n characters), with no garbage
    collection while it measures."""
    gc.collect()
    gc.disable()
    try:
        n = START
        small = cpu_seconds(step, unit * (n // len(unit)))
        while small < MIN_S and n < LIMIT:
            n *= 2
            small = cpu_seconds(step, unit * (n // len(unit)))
        large = cpu_seconds(step, unit * (4 * n // len(unit)), enough=MAX_RATIO * small)
    finally:
        gc.enable()
    return n, small, large


def cases() -> list[Any]:
    marks = {
        key: pytest.mark.xfail(reason=f"super-linear: {why}", strict=True)
        for key, why in KNOWN.items()
    }
    return [
        pytest.param(step, shape, marks=marks.get((step, shape), ()), id=f"{step}-{shape}")
        for step in STEPS
        for shape in SHAPES
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("step", "shape"), cases())
def test_every_text_step_does_linear_work(step: str, shape: str, tally: Any) -> None:
    n, small, large = growth(STEPS[step], SHAPES[shape])
    ratio = large / max(small, 1e-9)
    tally("bounded work", f"{shape}: {step}", ratio <= MAX_RATIO)
    assert ratio <= MAX_RATIO, (
        f"{step} on {shape}: {small:.4f} s for {n:,} characters, {large:.4f} s for "
        f"{4 * n:,} ({ratio:.1f}x for 4x the input; linear is 4x)"
    )
