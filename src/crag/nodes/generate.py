"""generate: answer from the refined context only, with [n] citations, then verify.

With no refined context left, crag says so instead of guessing, and no model runs.
Verification checks the evidence the answer rests on against the question's
constraints (years, dates, versions, names): a passage about 2022 does not answer a
question about 2023, so crag declines and says what it found instead. Whether crag
answered is state (`answered`, `support`), never read back from the answer's words.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import cache, prompts
from crag.context import Context
from crag.directives import without_directives
from crag.errors import StoreError
from crag.grading.conflicts import disagreement
from crag.grading.constraints import Check, Constraint, check, constraints
from crag.grading.coverage import library_texts, missing_terms, sentence_key
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.nodes.trail import context_of, note, recorded
from crag.state import Citation, DeclineReason, Passage, State, Strip, documents_seen
from crag.text import brief, split_sentences

log = logging.getLogger(__name__)

_CITE = re.compile(r"\[(\d+)\]")


def number_sources(kept: list[Strip], docs: list[Passage]) -> list[tuple[Citation, list[Strip]]]:
    """Group kept strips by what a reader would cite (file + page, or URL), numbered
    [1], [2], ... in reading order, so two chunks of one page share one number."""
    by_id = {d["id"]: d for d in docs}
    groups: dict[tuple[str, ...], tuple[Citation, list[Strip]]] = {}
    for strip in kept:
        doc = by_id[strip["doc_id"]]
        where = doc.get("page") or doc.get("url") or doc.get("query") or ""
        key = (doc["origin"], doc["source"], where)
        if key not in groups:
            citation: Citation = {
                "n": len(groups) + 1,
                "origin": doc["origin"],
                "source": doc["source"],
            }
            for field in ("page", "url", "title", "query"):
                if doc.get(field):
                    citation[field] = doc[field]  # type: ignore[literal-required,unused-ignore]
            groups[key] = (citation, [])
        groups[key][1].append(strip)
    return list(groups.values())


def label(citation: Citation) -> str:
    if citation.get("query"):
        return f"{citation['source']} (SQL: {citation['query']})"
    if citation.get("url"):
        return f"{citation.get('title') or citation['source']} ({citation['url']})"
    if citation.get("page"):
        return f"{citation['source']}, page {citation['page']}"
    return citation["source"]


def render_sources(numbered: list[tuple[Citation, list[Strip]]], tag: str) -> str:
    blocks = [
        prompts.SOURCE_BLOCK.format(
            tag=tag,
            n=c["n"],
            label=without_directives(label(c)),
            origin=c["origin"],
            text=" ... ".join(s["text"] for s in strips),
        )
        for c, strips in numbered
    ]
    return "\n\n".join(blocks)


#: Opens the note of an answer made of the best passages because the model's failed.
FALLBACK = "extractive fallback: "

_Pick = tuple[float, int, int, str]  # score, position, citation number, text


def extractive_answer(
    numbered: list[tuple[Citation, list[Strip]]],
    limit: int = 3,
    asked: Sequence[Constraint] = (),
) -> str:
    """No LLM: the most confident kept strips, each with its citation.

    Each source's best strip comes first, so a partial answer shows both halves; then
    the strips that meet more of the question's years, dates and versions (of `asked`),
    whichever their source: the changelog of version 3 before the rest of the handbook
    of version 2.
    """
    by_origin: dict[str, list[_Pick]] = {}
    for c, strips in numbered:
        for s in strips:
            by_origin.setdefault(c["origin"], []).append(
                (s.get("confidence", s["score"]), s["position"], c["n"], s["text"])
            )
    # years, dates and versions must be in the strips quoted; names only somewhere in
    # the context (`check`), and a name all sources repeat (the product) ranks nothing
    dated = [c for c in asked if c.kind != "name"]
    met = {t[3]: len(check(dated, [t[3]]).met) for picks in by_origin.values() for t in picks}

    def rank(pick: _Pick) -> tuple[int, float]:
        return -met[pick[3]], -pick[0]

    queues = [sorted(items, key=rank) for items in by_origin.values()]
    firsts = sorted((queue.pop(0) for queue in queues if queue), key=rank)
    rest = sorted([*firsts[limit:], *(t for queue in queues for t in queue)], key=rank)
    # a sentence is quoted once: search snippets and overlapping strips repeat them
    said: set[str] = set()
    picked: list[_Pick] = []
    for score, at, n, text in [*firsts[:limit], *rest]:
        if len(picked) == limit:
            break
        if new := [x for x in split_sentences(text) if sentence_key(x) not in said]:
            said.update(sentence_key(x) for x in new)
            picked.append((score, at, n, " ".join(new)))
    return " ".join(f"{text} [{n}]" for _, _, n, text in sorted(picked, key=lambda t: t[1]))


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w]|\.\d)")


def _states(text: str, numbers: list[str]) -> bool:
    return all(re.search(rf"(?<![\w.]){re.escape(x)}(?![\w]|\.\d)", text) for x in numbers)


def repointed(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> tuple[str, int]:
    """The answer with a citation moved to the source that states the numbers of its
    claim (the text since the previous mark), where the cited source does not and
    exactly one other does: a model often cites a document's first page for a figure
    on its second. Returns the answer and how many citations moved."""
    texts = {c["n"]: " ".join(s["text"] for s in strips) for c, strips in numbered}
    pieces, last, moved = [], 0, 0
    for mark in _CITE.finditer(answer):
        claim, n = answer[last : mark.start()], int(mark.group(1))
        numbers = [x for x in _NUMBER.findall(claim) if len(x) > 1]
        if numbers and n in texts and not _states(texts[n], numbers):
            others = [k for k in texts if k != n and _states(texts[k], numbers)]
            if len(others) == 1:
                n, moved = others[0], moved + 1
        pieces.append(f"{claim}[{n}]")
        last = mark.end()
    return "".join(pieces) + answer[last:], moved


def cited(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> list[Citation]:
    """The citations the answer refers to; all sources if it cites none."""
    used = {int(m) for m in _CITE.findall(answer)}
    citations = [c for c, _ in numbered]
    return [c for c in citations if c["n"] in used] or citations


def declined(
    why: DeclineReason, reason: str, detail: str, unsupported: Sequence[str] = ()
) -> dict[str, Any]:
    """crag's refusal: no answer, no citations, and why (`why` as a code the lab counts,
    `reason` as the user reads it)."""
    return {
        "answer": f"{prompts.NOT_FOUND} {reason}".strip(),
        "citations": [],
        "answered": False,
        "decline_reason": why,
        "support": "none",
        "unsupported": list(unsupported),
        "confidence": 0.0,
        **note(detail),
    }


def confidence_of(
    citations: Sequence[Citation], numbered: list[tuple[Citation, list[Strip]]], docs: list[Passage]
) -> float:
    """The answer's confidence: the mean composite confidence of the sources it cites
    (each source by its most confident cited chunk)."""
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
    """The answer, its confidence, and a sentence for each conflict between sources that
    refinement settled: which source crag preferred, and why."""
    docs = documents_seen(state)
    update["confidence"] = confidence_of(update["citations"], numbered, docs)
    conflicts = state.get("conflicts") or []
    if not conflicts:
        return update

    def number_of(doc_id: str) -> int | None:
        return next(
            (c["n"] for c, strips in numbered if any(s["doc_id"] == doc_id for s in strips)), None
        )

    said = " ".join(disagreement(c, number_of) for c in conflicts)
    return {**update, "answer": f"{update['answer']} {said}".strip()}


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
        asked = constraints(part["text"])
        if (asked or part["covered"]) and check(asked, evidence, context=context).holds:
            return True
    return False


# a sentence's end, with the citations that follow it ("... errors. [1], [2]")
_SENTENCE_DONE = re.compile(r"[.!?](?:[\s,]*\[\d+\])*(?=\s|$)")


def finished_sentences(raw: str, sources: int) -> str:
    """The answer of a reply whose JSON cannot be read, as far as its sentences were
    finished: a small model that starts to loop (citing [6] [7] ..., or writing a
    sentence again and again, until the token limit) has usually written its answer
    first. The answer stops where a sentence comes again, and citations of sources that
    do not exist are dropped; "" when no sentence was finished."""
    text = prompts.partial_answer(raw)
    text = _CITE.sub(lambda m: m[0] if 1 <= int(m[1]) <= sources else "", text)
    kept: list[str] = []
    seen: set[str] = set()
    start = 0
    for end in _SENTENCE_DONE.finditer(text):
        sentence, start = text[start : end.end()].strip(" ,"), end.end()
        key = sentence_key(_CITE.sub("", sentence))
        if key in seen:  # written again: the loop has begun
            break
        seen.add(key)
        kept.append(sentence)
    # a citation given again at once ("[4] [4] [4]") is given once
    return re.sub(r"(\[\d+\])(?:[\s,]*\1(?!\d))+", r"\1", " ".join(" ".join(kept).split()))


async def draft(
    question: str, numbered: list[tuple[Citation, list[Strip]]], ctx: Context
) -> tuple[str | None, str]:
    """The chat model's answer (None when it finds none in the sources), and a note.

    A reply that is not the JSON asked for, or a model that fails, gives the reply's
    finished sentences if it wrote some (a reply cut at the token limit), else the best
    passages, said so in the answer: the run still answers from its sources.
    """
    model = make_chat_model(ctx.models.chat_model, ctx, max_tokens=ctx.models.max_answer_tokens)
    tag = prompts.data_tag()
    messages = [
        SystemMessage(prompts.ANSWER_SYSTEM.format(tag=tag)),
        HumanMessage(
            prompts.ANSWER_USER.format(sources=render_sources(numbered, tag), question=question)
        ),
    ]

    def fallback(why: str, detail: str, raw: str = "") -> tuple[str, str]:
        if text := finished_sentences(raw, len(numbered)):
            return text, f"{len(numbered)} sources; the reply's finished sentences ({detail})"
        return f"({why}; best passages shown.) " + extractive_answer(numbered), FALLBACK + detail

    try:
        reply = await model.with_structured_output(prompts.Reply, include_raw=True).ainvoke(
            messages
        )
    except ValueError as exc:  # a client that parses the JSON itself (pydantic) and raises
        log.warning("chat model reply is not the JSON asked for: %s", brief(exc))
        return fallback("The language model's reply could not be read", "unreadable reply")
    except Exception as exc:  # timeout, HTTP error, context overflow: still answer
        name = type(exc).__name__
        log.warning(
            "chat model failed (%s: %s); answering with the best passages", name, brief(exc)
        )
        # an OpenAI client raises on a reply cut at the token limit, and keeps the reply
        cut = getattr(getattr(exc, "completion", None), "choices", None) or [None]
        raw = str(getattr(getattr(cut[0], "message", None), "content", "") or "")
        return fallback(f"The language model failed: {name}", f"model failed ({name})", raw)
    parsed = reply.get("parsed") if isinstance(reply, dict) else None
    if not isinstance(parsed, prompts.Reply):
        message = reply.get("raw") if isinstance(reply, dict) else None
        content = str(getattr(message, "content", "") or "")
        log.warning("chat model reply is not the JSON asked for: %r", brief(content))
        return fallback("The language model's reply could not be read", "unreadable reply", content)
    if not parsed.found or not parsed.answer.strip():
        return None, "model found no answer"
    return parsed.answer.strip(), f"{len(numbered)} sources"


async def grounded(
    answer: str, numbered: list[tuple[Citation, list[Strip]]], ctx: Context
) -> tuple[str, int, str]:
    """The answer without the sentences its sources do not state (one model call for
    all sentences), how many were dropped, and a note. A reply that cannot be read
    keeps the answer as it is: the check is a filter, not a gate."""
    sentences = split_sentences(answer)
    if not sentences:
        return answer, 0, "nothing to check"
    model = make_chat_model(
        ctx.models.judge_model or ctx.models.chat_model, ctx, max_tokens=16 * len(sentences)
    )
    listed = "\n".join(f"{i}. {text}" for i, text in enumerate(sentences, 1))
    tag = prompts.data_tag()
    messages = [
        SystemMessage(prompts.GROUND_SYSTEM.format(tag=tag)),
        HumanMessage(
            prompts.GROUND_USER.format(sources=render_sources(numbered, tag), sentences=listed)
        ),
    ]
    try:
        reply = await model.with_structured_output(prompts.Grounding).ainvoke(messages)
    except Exception as exc:  # unreadable reply, timeout: the answer stands unchecked
        log.warning("grounding check failed (%s); answer kept unchecked", brief(exc))
        return answer, 0, f"grounding check failed ({type(exc).__name__})"
    verdicts = reply.supported if isinstance(reply, prompts.Grounding) else []
    if len(verdicts) != len(sentences):
        return answer, 0, "grounding check unreadable (one verdict per sentence expected)"
    kept = [text for text, ok in zip(sentences, verdicts, strict=True) if ok]
    return " ".join(kept), len(sentences) - len(kept), f"{len(kept)}/{len(sentences)} grounded"


@recorded
async def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    update = await answer(state, ctx)
    # a confident, verified answer is kept for the same question (the tenant's cache)
    if await asyncio.to_thread(cache.store, ctx, state["question"], {**state, **update}):
        step = update["path"][0]
        update["path"] = [{**step, "detail": f"{step['detail']}; cached"}]
    # the conversation keeps the reply, and the standalone question it answered
    reply = AIMessage(update["answer"], response_metadata={"question": state["question"]})
    return {**update, "messages": [reply]}


async def answer(state: State, ctx: Context) -> dict[str, Any]:
    """The answer's state update: answered, declined, or a near miss said as such; an
    answer says where its sources disagreed."""
    update = await _answer(state, ctx)
    if not update["answered"]:
        return update
    numbered = number_sources(state.get("kept_strips") or [], documents_seen(state))
    return with_conflicts(update, state, numbered)


async def _answer(state: State, ctx: Context) -> dict[str, Any]:
    question = state["question"]
    kept = state.get("kept_strips") or []
    docs = documents_seen(state)
    if not kept:
        failed = state.get("web_error")
        reason = f"(The external source failed: {failed})" if failed else ""
        return declined("no evidence", reason, "no supporting source: declined")
    numbered = number_sources(kept, docs)
    asked = constraints(question) if ctx.generation.verify else []
    if ctx.models.chat_model == EXTRACTIVE:
        answer, detail, dropped = extractive_answer(numbered, asked=asked), "extractive", 0
    else:
        drafted, detail = await draft(question, numbered, ctx)
        if drafted is None:
            return declined("model found none", "", detail)
        answer, dropped = drafted, 0
        if (
            ctx.generation.verify
            and ctx.generation.verify_claims
            and not detail.startswith(FALLBACK)
        ):
            answer, dropped, grounding = await grounded(drafted, numbered, ctx)
            detail += f"; {grounding}"
            if not answer:
                return declined("ungrounded", "", f"{detail}: nothing the sources state")
    if ctx.models.chat_model != EXTRACTIVE and not detail.startswith(FALLBACK):
        answer, moved = repointed(answer, numbered)
        detail += f"; {moved} citation(s) moved to the source that states it" if moved else ""
    citations = cited(answer, numbered)
    if asked:
        # the evidence: what the answer quotes, or the strips of the sources it cites
        if ctx.models.chat_model == EXTRACTIVE:
            evidence = [answer]
        else:
            evidence = [s["text"] for c, strips in numbered if c in citations for s in strips]
        # a name is met by what the source is, too: a page titled "Super Bowl LVIII", the
        # guide of a product that never repeats the product's name on its pages
        context = [*(s["text"] for s in kept), *identity(numbered)]
        result = check(asked, evidence, context=context)
        # what decides: the evidence speaks of another year, quarter or version, or the
        # question asks about something no corpus crag searched ever names; a name or
        # a year the sources know but these passages do not state is weak evidence only
        deciding = [
            *(c for c in result.unmet if result.instead.get(c.value)),
            *await asyncio.to_thread(
                unknown,
                ctx,
                [c for c in result.unmet if not result.instead.get(c.value)],
                [d["text"] for d in docs],
            ),
        ]
        if not result.holds:
            unmet = [c.value for c in result.unmet]
            found = near_miss(result)
            lacks = f"evidence lacks {', '.join(unmet)}"
            if not deciding:
                lacks = f"weak evidence: {lacks}"
            elif part_answered(state, evidence, context):
                lacks = f"parts answered: {lacks}"
            elif ctx.generation.near_miss_answers:
                lacks = f"near miss: {lacks}"
            else:
                return declined("constraints unmet", f"({found})", f"declined: {lacks}", unmet)
            if not deciding:
                return {
                    "answer": answer,
                    "citations": citations,
                    "answered": True,
                    "decline_reason": None,
                    "support": "partial",
                    "unsupported": unmet,
                    **note(lacks),
                }
            return {
                "answer": f"{found} {answer}",
                "citations": citations,
                "answered": True,
                "decline_reason": None,
                "support": "partial",
                "unsupported": unmet,
                **note(lacks),
            }
    return {
        "answer": answer,
        "citations": citations,
        "answered": True,
        "decline_reason": None,
        "support": "partial" if dropped else "supported",
        "unsupported": [],
        **note(detail),
    }
