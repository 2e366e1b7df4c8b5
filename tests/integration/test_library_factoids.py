"""A figure the library states once is the library's answer: the question stays in the
library (no web search) and the answer quotes the page that states it; a figure only
the web has is quoted beside the library's."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag import Context, ask

# (question, the figure, the document that states it); each stated on one page only
FACTOIDS = [
    (
        "How much does the Business plan cost per user per year?",
        "USD 110",
        "03_lumen_billing_refunds.pdf",
    ),
    (  # scored by its best strip: the whole page, about refunds in general, scores 0.50
        "Within how many business days are approved refunds paid?",
        "10 business days",
        "03_lumen_billing_refunds.pdf",
    ),
    (
        "How many times is a failed webhook delivery retried?",
        "up to 6",
        "02_lumen_api_rate_limits.pdf",
    ),
]


@pytest.mark.parametrize(("question", "figure", "document"), FACTOIDS)
def test_a_figure_stated_once_in_the_library_is_answered_from_it(
    sample_home: Path, question: str, figure: str, document: str
) -> None:
    ctx = Context(home=sample_home, chat_model="extractive", cache=False)
    state = ask(question, context=ctx)
    assert state["verdict"] == "correct", state["scores"]
    assert "web_search" not in state["path"]
    assert state["answered"] and figure in state["answer"]
    assert document in {c["source"] for c in state["citations"]}


def test_a_partial_answer_quotes_the_new_figure_beside_the_old(sample_home: Path) -> None:
    """The handbook has version 2.4's limit, only the changelog version 3's: the
    extractive answer quotes both, the changelog's strip that names version 3 first."""
    ctx = Context(home=sample_home, chat_model="extractive", cache=False)
    state = ask("How did the Lumen API rate limit change in version 3?", context=ctx)
    assert state["verdict"] == "ambiguous" and state["answered"]
    assert "120 requests per minute" in state["answer"]
    assert "300 requests per minute" in state["answer"]
