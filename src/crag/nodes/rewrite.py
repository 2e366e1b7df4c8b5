"""rewrite: turn the question into a short search query for the external source.

The question itself is never replaced: generate still answers `question`.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import prompts
from crag.context import Context
from crag.grading.constraints import check
from crag.grading.question_form import read
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.nodes.trail import context_of, note, recorded
from crag.redact import redact, without_masked
from crag.state import State
from crag.text import content_words, keyword_query

log = logging.getLogger(__name__)


def with_constraints(query: str, question: str, *, names: bool = True) -> str:
    """The query, plus any year, date, version (and, with `names`, specific name) of the
    question it dropped: a search that loses "2023" finds every year's results."""
    reading = read(question)
    asked = list(reading.constraints if names else reading.when)
    missing = [c.value for c in check(asked, [query]).unmet]
    return " ".join([query, *missing]).strip()


def clean_query(raw: str) -> str:
    """First line of the model's reply, without quotes or a 'Query:' label."""
    line = raw.strip().splitlines()[0] if raw.strip() else ""
    if ":" in line[:20]:
        line = line.split(":", 1)[1]
    return line.strip().strip("\"'` ").rstrip(".")


def _forms(text: str) -> set[str]:
    """A text's content words in letters and digits only ("TF-IDF" is "tfidf"), whole
    and by their hyphenated pieces."""
    found = set()
    for word in content_words(text):
        found.add(re.sub(r"[\W_]", "", word))
        found.update(p for p in re.split(r"[-_]", word) if len(p) > 1)
    return found - {""}


def _same_word(a: str, b: str) -> bool:
    """One word in two forms: equal, or a shared stem of five letters or more that
    leaves at most four letters of either ("normal" and "normally", "directed" and
    "director"; not "model" and "modelcheckpointing")."""
    pairs = enumerate(zip(a, b, strict=False))
    shared = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    return a == b or shared >= max(5, len(a) - 4, len(b) - 4)


def of_the_question(query: str, question: str) -> str:
    """The model's query if at least half of its words are the question's, else "".

    A rewrite condenses the question and may add a synonym or two; a query mostly of
    other words is the model's guess at the answer (asked who won in 2021, a small
    model searched for its guess) or words glued into one ("coldstartproblem"), and
    either sends the search away from what was asked. Words the model joined with "_"
    are searched as words, unless the question writes them so.
    """
    query = " ".join(w if w in question else w.replace("_", " ") for w in query.split())
    asked = _forms(question)
    own = _forms(query)
    kept = sum(any(_same_word(w, a) for a in asked) for w in own)
    return query if own and 2 * kept >= len(own) else ""


@recorded
async def rewrite(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    # the query leaves the machine: it is written from the question without its secrets
    outgoing = redact(state["question"]) if ctx.search.redact_queries else None
    question = outgoing.text if outgoing else state["question"]
    masked = outgoing.removed if outgoing else []

    def sendable(text: str) -> str:  # less the words of a masked secret ("jane.doe")
        return without_masked(text, state["question"]) if outgoing else text

    gaps = [g for g in state.get("missing_terms") or [] if sendable(g)]
    # Of a decomposed question, only the parts the library does not cover are searched.
    open_parts = [p["text"] for p in state.get("parts") or [] if not p["covered"]]
    if open_parts:
        searched = sendable(" ".join(open_parts))
        question = with_constraints(searched, question, names=False)
    # What the library lacks leads the query: the web is there to fill that gap.
    fallback = with_constraints(keyword_query(" ".join([*gaps, question])), question)
    if ctx.models.chat_model == EXTRACTIVE:
        return {"web_query": fallback, "redacted": masked, **note(f"keywords: {fallback}")}
    model = make_chat_model(ctx.models.chat_model, ctx, max_tokens=24)
    try:
        reply = await model.ainvoke(
            [
                SystemMessage(prompts.REWRITE_SYSTEM),
                HumanMessage(
                    prompts.REWRITE_GAP_USER.format(question=question, gaps=", ".join(gaps))
                    if gaps
                    else prompts.REWRITE_USER.format(question=question)
                ),
            ]
        )
        # the gaps are asked for in their normal form ("beta" for "β"): words of the question
        query = of_the_question(clean_query(str(reply.content)), " ".join([question, *gaps]))
    except Exception as exc:  # a rewrite is an optimisation: never fail the run on it
        log.warning("rewrite failed (%s); using keywords", exc)
        query = ""
    if not 2 <= len(query) <= 200:
        detail = f"keywords (the model gave no usable query of the question's words): {fallback}"
        return {"web_query": fallback, "redacted": masked, **note(detail)}
    query = with_constraints(query, question)
    return {"web_query": query, "redacted": masked, **note(f"query: {query}")}
