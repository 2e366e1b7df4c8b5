"""verify: one step from the draft answer to answered, partly answered or declined,
with the reason, and the probability that this outcome is right.

The draft's claims are checked against its sources (with `verify_claims`, one judge
call), its citations moved to the source that states each claim's figures, and the
evidence it rests on checked against the question's constraints (years, dates,
versions, names): a passage about 2022 does not answer a question about 2023, so crag
declines and says what it found instead. A constraint decides only when the evidence
states another value, or when nothing crag searched names it; otherwise it is weak
evidence and the answer stands as partial. Whether crag answered is state
(`answered`, `support`, `decline_reason`), never read back from the answer's words.
A confident, verified answer is kept in the tenant's answer cache.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import cache, prompts
from crag.context import Context
from crag.errors import StoreError
from crag.grading.conflicts import disagreement
from crag.grading.constraints import Check, Constraint, check
from crag.grading.outcome import probability, signals
from crag.grading.question_form import read
from crag.models.chat import UNSTREAMED, make_chat_model
from crag.nodes.generate import (
    asked_of,
    citation_of,
    cited,
    label,
    marked,
    number_sources,
    render_sources,
    renumbered,
    repointed,
    true_pages,
)
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.external import NoSearch
from crag.retrieval.library_index import library_texts, missing_terms
from crag.state import Citation, Draft, Passage, State, Strip, documents_seen
from crag.text import brief, counted, split_sentences

log = logging.getLogger(__name__)

#: Why crag declines (`decline_reason`, what `crag eval` counts declines by): nothing
#: relevant reached the context, the chat model found no answer in it, no sentence of
#: the answer was grounded, or the evidence speaks of other years, versions or names
#: than the question asks.
DeclineReason = Literal["no evidence", "model found none", "ungrounded", "constraints unmet"]


def asked_outside(state: State) -> bool:
    """Whether the web path asked a source beyond the library (`external=none`, and a
    database that the question did not suit, ask nothing)."""
    return any(
        not entry.startswith(f"{NoSearch.name}:") and ": skipped" not in entry
        for entry in state.get("searched") or []
    )


def declined(
    state: State, why: DeclineReason, reason: str, detail: str, unsupported: Sequence[str] = ()
) -> dict[str, Any]:
    """crag's refusal: no answer, no citations, and why (`why` as a code the lab counts,
    `reason` as the user reads it), saying where crag looked."""
    opening = prompts.NOT_FOUND if asked_outside(state) else prompts.NOT_FOUND_IN_LIBRARY
    return {
        "answer": f"{opening} {reason}".strip(),
        "citations": [],
        "answered": False,
        "decline_reason": why,
        "support": "none",
        "unsupported": list(unsupported),
        "composite": 0.0,
        **note(detail),
    }


def answered(
    answer: str,
    citations: list[Citation],
    detail: str,
    unsupported: Sequence[str] = (),
    *,
    partial: bool = False,
) -> dict[str, Any]:
    """crag's answer, partial when the evidence does not show all it asks (`unsupported`)
    or the claims check dropped sentences."""
    return {
        "answer": answer,
        "citations": citations,
        "answered": True,
        "decline_reason": None,
        "support": "partial" if unsupported or partial else "supported",
        "unsupported": list(unsupported),
        **note(detail),
    }


def near_miss(result: Check) -> str:
    """What the evidence speaks of instead of what was asked (2021, not 2023)."""
    instead = [f"{', '.join(v)}, not {k}" for k, v in result.instead.items() if v]
    absent = [c.value for c in result.unmet if not result.instead.get(c.value)]
    said = [f"speak of {'; '.join(instead)}"] if instead else []
    said += [f"do not mention {', '.join(absent)}"] if absent else []
    return "The sources found " + " and ".join(said) + "."


def identity(numbered: list[tuple[Citation, list[Strip]]]) -> list[str]:
    """What the sources are, as text a name can be met in: each one's title, and its
    file or site name in words ("requests_quickstart.md": "requests quickstart")."""
    found = []
    for c, _ in numbered:
        found.append(c.get("title") or "")
        where = c.get("url") or c["source"]
        found.append(re.sub(r"\.\w{1,5}$|[\W_]+", " ", where.rsplit("/", 1)[-1] or where))
    return [f for f in found if f.strip()]


def unknown(ctx: Context, unmet: Sequence[Constraint], seen: Sequence[str]) -> list[Constraint]:
    """The unmet constraints that nothing crag searched names: the library never does,
    and no document the run saw (library chunks, search results) does either. A name is
    looked up in any usual spelling; a year or version only as itself ("23.1.0" is not
    "23.10")."""
    if not unmet:
        return []
    names = [c for c in unmet if c.kind == "name"]
    try:
        missing = set(missing_terms(ctx, ctx.store.collection, [c.value for c in names]))
        values = [c for c in unmet if c.kind != "name"]
        if values:
            texts = library_texts(ctx, ctx.store.collection)
            missing |= {c.value for c in values if not check([c], texts).holds}
    except StoreError as e:
        # no library to look in (answering from search results alone): nothing is
        # known to be absent, so nothing is declined for it
        log.info("the library could not be read for the answer check: %s", e)
        return []
    return [c for c in unmet if c.value in missing and not check([c], seen).holds]


def part_answered(state: State, evidence: Sequence[str], context: Sequence[str]) -> bool:
    """Whether the evidence answers some part of a question of several (a comparison,
    two questions in one): it meets all of that part's years, versions and names, and
    either there are some to meet or the library covers the part. The answer then
    stands for that part and says first what the sources lack for the others ("What did
    it cost in 2024, and after the 2025 change?" answered with the 2024 price, saying
    the sources speak of 2024, not 2025)."""
    parts = state.get("parts") or []
    if len(parts) < 2:
        return False
    for part in parts:
        asked = list(read(part["text"]).constraints)
        if (asked or part["covered"]) and check(asked, evidence, context=context).holds:
            return True
    return False


async def grounded(
    answer: str, numbered: list[tuple[Citation, list[Strip]]], ctx: Context
) -> tuple[str, int, str]:
    """The answer without the sentences its sources do not state (one model call for
    all sentences), how many were dropped, and a note. A reply that cannot be read
    keeps the answer as it is: the check is a filter, not a gate."""
    sentences = split_sentences(answer)
    if not sentences:
        return answer, 0, "nothing to check"
    model = make_chat_model(ctx.models.judge, ctx, max_tokens=16 * len(sentences))
    listed = "\n".join(f"{i}. {text}" for i, text in enumerate(sentences, 1))
    tag = prompts.data_tag()
    messages = [
        SystemMessage(prompts.GROUND_SYSTEM.format(tag=tag)),
        HumanMessage(
            prompts.GROUND_USER.format(sources=render_sources(numbered, tag), sentences=listed)
        ),
    ]
    try:
        checker = model.with_structured_output(prompts.Grounding)
        reply = await checker.ainvoke(messages, config=UNSTREAMED)
    except Exception as exc:  # unreadable reply, timeout: the answer stands unchecked
        log.warning("grounding check failed (%s); answer kept unchecked", brief(exc))
        return answer, 0, f"grounding check failed ({type(exc).__name__})"
    verdicts = reply.supported if isinstance(reply, prompts.Grounding) else []
    if len(verdicts) != len(sentences):
        return answer, 0, "grounding check unreadable (one verdict per sentence expected)"
    kept = [text for text, ok in zip(sentences, verdicts, strict=True) if ok]
    return " ".join(kept), len(sentences) - len(kept), f"{len(kept)}/{len(sentences)} grounded"


async def verified(
    state: State,
    ctx: Context,
    draft: Draft,
    numbered: list[tuple[Citation, list[Strip]]],
    asked: Sequence[Constraint],
) -> dict[str, Any]:
    """The draft answered, partly answered or declined."""
    answer, detail, dropped = draft["text"], draft["detail"], 0
    if draft["by_model"] and not draft["fallback"]:
        if ctx.generation.checks_claims:
            answer, dropped, grounding = await grounded(answer, numbered, ctx)
            detail += f"; {grounding}"
            if not answer:
                return declined(state, "ungrounded", "", f"{detail}: nothing the sources state")
        answer, moved = repointed(answer, numbered)
        detail += f"; {moved} citation(s) moved to the source that states it" if moved else ""
        answer, marks = marked(answer, numbered)
        detail += f"; {counted(marks, 'sentence')} marked with their source" if marks else ""
        answer, pages = true_pages(answer, numbered)
        detail += f"; {counted(pages, 'page')} written after a mark corrected" if pages else ""
    citations = cited(answer, numbered)
    if not asked:
        return answered(answer, citations, detail, partial=dropped > 0)
    # the evidence: what the answer quotes, or the strips of the sources it cites
    if draft["by_model"]:
        evidence = [s["text"] for c, strips in numbered if c in citations for s in strips]
    else:
        evidence = [answer]
    # a name is met by what the source is, too: a page titled "Super Bowl LVIII", the
    # guide of a product that never repeats the product's name on its pages
    context = [*(s["text"] for s in state.get("kept_strips") or []), *identity(numbered)]
    result = check(asked, evidence, context=context)
    if result.holds:
        return answered(answer, citations, detail, partial=dropped > 0)
    # what decides: the evidence speaks of another year, quarter or version, or the
    # question asks about something no corpus crag searched ever names; a name or a year
    # the sources know but these passages do not state is weak evidence only
    deciding = [
        *(c for c in result.unmet if result.instead.get(c.value)),
        *await asyncio.to_thread(
            unknown,
            ctx,
            [c for c in result.unmet if not result.instead.get(c.value)],
            [d["text"] for d in documents_seen(state)],
        ),
    ]
    unmet = [c.value for c in result.unmet]
    found = near_miss(result)
    lacks = f"evidence lacks {', '.join(unmet)}"
    if not deciding:
        return answered(answer, citations, f"weak evidence: {lacks}", unmet)
    if part_answered(state, evidence, context):
        return answered(f"{found} {answer}", citations, f"parts answered: {lacks}", unmet)
    if ctx.generation.near_miss_answers:
        return answered(f"{found} {answer}", citations, f"near miss: {lacks}", unmet)
    return declined(state, "constraints unmet", f"({found})", f"declined: {lacks}", unmet)


def composite_of(
    citations: Sequence[Citation], numbered: list[tuple[Citation, list[Strip]]], docs: list[Passage]
) -> float:
    """The mean composite confidence of the sources an answer cites (each source by its
    most confident cited chunk): the explanation beside the calibrated `confidence`."""
    by_id = {d["id"]: d for d in docs}
    values = [
        max(
            by_id[s["doc_id"]].get("confidence", by_id[s["doc_id"]].get("score", 0.0))
            for s in strips
        )
        for c, strips in numbered
        if c in citations and strips
    ]
    return round(sum(values) / len(values), 4) if values else 0.0


def with_conflicts(
    update: dict[str, Any], state: State, numbered: list[tuple[Citation, list[Strip]]]
) -> dict[str, Any]:
    """The answer, its sources' composite confidence, and a sentence for each conflict
    between sources that refinement settled: which source crag preferred, and why."""
    docs = documents_seen(state)
    update["composite"] = composite_of(update["citations"], numbered, docs)
    conflicts = state.get("conflicts") or []
    if not conflicts:
        return update

    listed = {c["n"] for c in update["citations"]}

    def number_of(doc_id: str) -> int | None:  # only a source the answer lists has a number
        return next(
            (
                c["n"]
                for c, strips in numbered
                if c["n"] in listed and any(s["doc_id"] == doc_id for s in strips)
            ),
            None,
        )

    said = " ".join(disagreement(c, number_of) for c in conflicts)
    return {**update, "answer": f"{update['answer']} {said}".strip()}


def confidence_of(state: State, update: dict[str, Any]) -> float:
    """The probability that this outcome (the answer, or the decline) is right."""
    return probability(
        signals(
            answered=update["answered"],
            kept_strips=len(state.get("kept_strips") or []),
            web_scores=[d.get("score", 0.0) for d in state.get("web_docs") or []],
            unmet_terms=bool(state.get("missing_terms") or update.get("unsupported")),
            decline_reason=update.get("decline_reason"),
        )
    )


def nothing_found(state: State, ctx: Context) -> str:
    """Why nothing reached the context, as the user reads it: the external source
    failed, or the closest passage found, scoring under the `lower` a source needs (the
    library's only where it names what the question asks about), so a reader knows
    where to look and how near it came."""
    if failed := state.get("web_error"):
        return f"(The external source failed: {failed})"
    grades = state.get("grades")
    unknown = grades["unknown"] if grades else []
    library = [] if unknown else list(state.get("docs") or [])
    seen = [d for d in [*library, *(state.get("web_docs") or [])] if "score" in d]
    said = f"The library never mentions {', '.join(unknown)}." if unknown else ""
    best = max(seen, key=lambda d: d["score"], default=None)
    if best is not None and best["score"] < ctx.grading.lower:
        said += (
            f"{' ' if said else ''}The closest passage found, {label(citation_of(best, 1))}, "
            f"scores {math.floor(best['score'] * 100 + 1e-9) / 100:.2f}; a source needs "
            f"{ctx.grading.lower:.2f}."
        )
    return f"({said})" if said else ""


async def outcome(state: State, ctx: Context) -> dict[str, Any]:
    """The draft verified, or crag's decline when there is none."""
    draft = state.get("draft")
    if draft is None:
        why = nothing_found(state, ctx)
        return declined(state, "no evidence", why, "no supporting source: declined")
    if draft["by_model"] and not draft["text"]:
        return declined(state, "model found none", "", draft["detail"])
    numbered = number_sources(state.get("kept_strips") or [], documents_seen(state))
    asked = asked_of(state) if ctx.generation.verify else []
    update = await verified(state, ctx, draft, numbered, asked)
    if not update["answered"]:
        return update
    update = with_conflicts(update, state, numbered)
    update["answer"], update["citations"] = renumbered(update["answer"], update["citations"])
    return update


@recorded
async def verify(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    update = await outcome(state, ctx)
    update["confidence"] = confidence_of(state, update)
    # a confident, verified answer is kept for the same question (the tenant's cache)
    library = state.get("library_version")
    if await asyncio.to_thread(cache.store, ctx, state["question"], {**state, **update}, library):
        step = update["path"][0]
        update["path"] = [{**step, "detail": f"{step['detail']}; cached"}]
    # the conversation keeps the reply, and the standalone question it answered
    about = {"question": state["question"]}
    return {**update, "messages": [AIMessage(update["answer"], response_metadata=about)]}
