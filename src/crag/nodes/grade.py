"""grade: score the retrieved chunks, route the question, and decide the CRAG verdict.

A simple question whose best chunk clearly wins takes the fast path (that chunk
alone). A question of several parts is decomposed: each part is retrieved and graded
on its own, and the verdict says how many parts the library covers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.errors import ProviderError
from crag.grading.constraints import check, when
from crag.grading.coverage import coverage_gaps, times_named
from crag.grading.decompose import Split, decompose, rule_parts
from crag.grading.registry import LLM_GRADERS, make_grader
from crag.grading.route import clear_winner, complexity
from crag.grading.verdict import decide_verdict, verdict_of_parts
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.library import hit_to_passage
from crag.retrieval.library import retrieve as library_retrieve
from crag.state import Part, Passage, State


async def scored_by(ctx: Context, question: str, texts: list[str]) -> tuple[list[float], str]:
    """The grader's scores and its name. An LLM judge that gives no usable answer at
    all (its server is down) is replaced by the built-in grader, and the name says so:
    a neutral score for every document would decline what the library answers."""
    grader = make_grader(ctx, library=True)
    try:
        return await grader.ascore(question, texts), grader.name
    except ProviderError as exc:
        if ctx.grader not in LLM_GRADERS:
            raise
        stand_in = make_grader(ctx.with_overrides(grader="auto"), library=True)
        scores = await stand_in.ascore(question, texts)
        return scores, f"{stand_in.name} ({exc})"


async def graded_parts(
    ctx: Context, split: Split, docs: list[Passage]
) -> tuple[list[Passage], list[float], list[Part], str]:
    """Each part retrieved on its own and every document graded against every part: a
    document's score is its best part's, and a part is covered when some document that
    names its subject (of a comparison) more than once scores at or above `upper` for it."""
    parts = split.parts
    seen = {d["id"] for d in docs}
    pool = list(docs)
    for part in parts:
        hits = await asyncio.to_thread(library_retrieve, ctx, ctx.collection, part, ctx.k)
        for hit in hits:
            if (passage := hit_to_passage(hit, origin="library"))["id"] not in seen:
                seen.add(passage["id"])
                pool.append(passage)
    texts = [d["text"] for d in pool]
    graded = await asyncio.gather(*(scored_by(ctx, part, texts) for part in parts))
    best = [max(column) for column in zip(*(scores for scores, _ in graded), strict=True)]
    covered: list[Part] = []
    for part, subject, (scores, _) in zip(parts, split.subjects, graded, strict=True):
        # a document that explains a thing names it more than once; one that names it
        # once only mentions it in passing (a chapter on batch norm, of layer norm)
        # and a chunk about another year or version does not cover a part about this one
        asked = when(part)
        explains = [
            s
            for s, t in zip(scores, texts, strict=True)
            if (not subject or times_named(subject, t) > 1) and check(asked, [t]).holds
        ]
        top = max(scores, default=0.0)
        covers = max(explains, default=0.0) >= ctx.upper
        covered.append({"text": part, "score": round(top, 4), "covered": covers})
    return pool, best, covered, graded[0][1]


@recorded
async def grade(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    question = state["question"]
    docs = state.get("docs") or []
    texts = [d["text"] for d in docs]
    split = await decompose(question, ctx) if ctx.decompose else Split([], "off")
    reasons = complexity(question, split.parts)
    # the fast check uses the cheap grader: a clear winner spares the LLM judge
    cheap = ctx.with_overrides(grader="auto") if ctx.grader in LLM_GRADERS else ctx
    (scores, name), never = await asyncio.gather(
        scored_by(cheap, question, texts), coverage_gaps(question, ctx)
    )
    if (
        ctx.fast_path
        and not reasons
        and not never
        and clear_winner(scores, ctx.upper, ctx.fast_gap)
    ):
        winner = max(range(len(docs)), key=lambda i: scores[i])
        scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
        detail = (
            f"correct by {name}, fast path: the best chunk scores {scores[winner]:.2f}, "
            f"at least {ctx.fast_gap:g} ahead of the next"
        )
        return {
            "docs": scored,
            "scores": [round(s, 4) for s in scores],
            "grader": name,
            "route": "fast",
            "parts": [],
            "verdict": "correct",
            "good_docs": [scored[winner]],
            "missing_terms": [],
            **note(detail),
        }
    covered: list[Part] = []
    if len(split.parts) >= 2:  # each part graded on its own: the whole question is not
        docs, scores, covered, name = await graded_parts(ctx, split, docs)
    elif cheap is not ctx:  # no clear winner: now the LLM judge grades
        scores, name = await scored_by(ctx, question, texts)
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    good = [d for d in scored if d["score"] >= ctx.lower]
    # The right topic at another year, date or version (the 2.4 guide for a question on
    # version 3) answers only part of the question: the web must fill in the rest.
    asked = when(question)
    other = []
    if ctx.coverage_check and asked and good:
        unmet = check(asked, [d["text"] for d in good]).unmet
        other = [f"{c.kind} {c.value}" if c.kind == "version" else c.value for c in unmet]
        other = [o for o in other if o not in never]
    missing = never + other
    # A name the library never writes is, in a one-part question, the thing asked
    # about; a year, version or number it never writes only constrains a thing it may
    # know (the 2.4 limits for a question on version 3), and a question of several
    # parts may have others the library answers.
    one_part = not split.parts and not rule_parts(question)
    unknown = [t for t in never if not any(ch.isdigit() for ch in t)] if one_part else []
    if covered:
        verdict = verdict_of_parts(
            [p["covered"] for p in covered], [p["score"] for p in covered], ctx.lower, missing
        )
    else:
        verdict = decide_verdict(scores, ctx.upper, ctx.lower, missing, unknown)
    detail = f"{verdict} by {name}: " + ", ".join(f"{s:.2f}" for s in scores)
    if reasons:
        detail += f"; full path ({', '.join(reasons)})"
    if covered:
        done = sum(p["covered"] for p in covered)
        detail += f"; {done} of {len(covered)} parts covered (split by {split.how})"
    if never:
        detail += f"; the library never mentions {', '.join(never)}"
        detail += ", what the question asks about" if unknown else ""
    if other:
        detail += f"; no relevant chunk speaks of {', '.join(other)}"
    return {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": name,
        "route": "full",
        "parts": covered,
        "verdict": verdict,
        "good_docs": good,
        "missing_terms": missing,
        **note(detail),
    }
