"""Bounded work on any input: every text step of crag, on a megabyte of adversarial
text, finishes (no pattern that backtracks, nothing quadratic). The times are printed
by `benchmarks/bench_text.py`; here a step that went quadratic would never end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from crag import text
from crag.directives import without_directives
from crag.grading import constraints, coverage, decompose
from crag.ingest.loaders import strip_running_lines
from crag.prompts import partial_answer
from crag.redact import redact

MB = 1_000_000
#: The shapes that cost each step the most when measured (see the benchmark).
SHAPES = {
    "a megabyte of short questions": "What is it vs that? " * (MB // 20),
    "a megabyte of number groups": "12 345-678 " * (MB // 11),
    "a megabyte of typeset symbols": "λβε–×ﬁ. " * (MB // 8),
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


@pytest.mark.parametrize("step", STEPS)
def test_every_text_step_finishes_on_a_megabyte_of_adversarial_text(step: str, tally: Any) -> None:
    for shape, sample in SHAPES.items():
        STEPS[step](sample)
        tally("bounded work", f"{shape}: {step}", True)
