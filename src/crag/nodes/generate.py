"""generate: a draft answer from the refined context only, with [n] citations.

The chat model (or, with none, the best kept strips quoted) writes the draft; the
`verify` step decides whether it stands. With no refined context left there is no
draft, and no model runs: crag will say so instead of guessing.

What an answer cites: the kept strips grouped into numbered sources (file + page, or
URL), those sources as the model reads them, and the citations an answer gives, each
moved to the source that states its claim where the model cited one that does not.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import prompts
from crag.context import Context
from crag.directives import without_directives
from crag.grading.constraints import Constraint, check, named
from crag.grading.question_form import read
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.nodes.trail import context_of, note, recorded
from crag.state import Citation, Draft, Passage, State, Strip, documents_seen
from crag.text import (
    brief,
    content_words,
    counted,
    sentence_ends,
    sentence_key,
    split_sentences,
    stem,
    stems,
)

log = logging.getLogger(__name__)

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
            # a document's own reference marks ("Acar et al. [2]") would read as crag's
            picked.append((score, at, n, unmarked(" ".join(new))))
    return " ".join(f"{text} [{n}]" for _, _, n, text in sorted(picked, key=lambda t: t[1]))


# a sentence's end, with the citations that follow it ("... errors. [1], [2]")
_SENTENCE_DONE = re.compile(r"[.!?](?:[\s,]*\[\d+\])*(?=\s|$)")


def finished_sentences(raw: str, sources: int) -> str:
    """The answer of a reply whose JSON cannot be read, as far as its sentences were
    finished: a small model that starts to loop (citing [6] [7] ..., or writing a
    sentence again and again, until the token limit) has usually written its answer
    first. The answer stops where a sentence comes again, and citations of sources that
    do not exist are dropped; "" when no sentence was finished."""
    text = tidied(prompts.partial_answer(raw), sources)
    kept: list[str] = []
    seen: set[str] = set()
    start = 0
    for end in _SENTENCE_DONE.finditer(text):
        sentence, start = text[start : end.end()].strip(" ,"), end.end()
        key = sentence_key(CITE.sub("", sentence))
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

    def fallback(why: str, detail: str, problem: str, raw: str = "") -> tuple[str, str]:
        """The reply's finished sentences, else the best passages; `problem` is logged, as
        a warning only when nothing of the reply is kept (a reply cut at the token limit
        usually keeps its answer)."""
        text = finished_sentences(raw, len(numbered))
        (log.info if text else log.warning)("%s", problem)
        if text:
            return (
                text,
                f"{counted(len(numbered), 'source')}; the reply's finished sentences ({detail})",
            )
        return f"({why}; best passages shown.) " + extractive_answer(numbered), FALLBACK + detail

    unreadable = "The language model's reply could not be read"
    try:
        reply = await model.with_structured_output(prompts.Reply, include_raw=True).ainvoke(
            messages
        )
    except ValueError as exc:  # a client that parses the JSON itself (pydantic) and raises
        problem = f"chat model reply is not the JSON asked for: {brief(exc)}"
        return fallback(unreadable, "unreadable reply", problem)
    except Exception as exc:  # timeout, HTTP error, context overflow: still answer
        name = type(exc).__name__
        # an OpenAI client raises on a reply cut at the token limit, and keeps the reply
        cut = getattr(getattr(exc, "completion", None), "choices", None) or [None]
        raw = str(getattr(getattr(cut[0], "message", None), "content", "") or "")
        problem = (
            f"chat model failed ({name}: {brief(exc)}); "
            "answering with what it wrote or the best passages"
        )
        return fallback(
            f"The language model failed: {name}", f"model failed ({name})", problem, raw
        )
    parsed = reply.get("parsed") if isinstance(reply, dict) else None
    if not isinstance(parsed, prompts.Reply):
        message = reply.get("raw") if isinstance(reply, dict) else None
        content = str(getattr(message, "content", "") or "")
        problem = f"chat model reply is not the JSON asked for: {brief(content)!r}"
        return fallback(unreadable, "unreadable reply", problem, content)
    answer = tidied(parsed.answer, len(numbered)).strip()
    if not parsed.found or not answer:
        return None, "model found no answer"
    return answer, counted(len(numbered), "source")


def asked_of(state: State) -> list[Constraint]:
    """What the evidence must meet: the question's years, versions, names and subjects,
    and the thing a one-part question asks about that the library never writes, however
    it is typed ("catboost" as much as "CatBoost")."""
    grades = state.get("grades")
    reading = read(state["question"])
    asked = [*reading.constraints, *reading.subjects]
    never = [named(t) for t in (grades["unknown"] if grades else [])]
    return list(dict.fromkeys([*asked, *never]))


@recorded
async def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    kept = state.get("kept_strips") or []
    if not kept:
        return {"draft": None, **note("no supporting source: nothing to answer from")}
    numbered = number_sources(kept, documents_seen(state))
    if ctx.models.chat_model == EXTRACTIVE:
        asked = asked_of(state) if ctx.generation.verify else []
        text, detail, by_model = extractive_answer(numbered, asked=asked), "extractive", False
    else:
        drafted, detail = await draft(state["question"], numbered, ctx)
        text, by_model = drafted or "", True
    made = Draft(text=text, detail=detail, by_model=by_model, fallback=detail.startswith(FALLBACK))
    return {"draft": made, **note(detail)}


_NOT_AN_INDEX = r"(?<![\w\])`])"  # x[2], argv[1]: an index, not a mark
CITE = re.compile(_NOT_AN_INDEX + r"\[(\d+)\]")
_SPACED_CITE = re.compile(r"\s*" + CITE.pattern)  # a mark and the space before it
_MARK = re.compile(r"\[\d+\]")
_RUN_OF_MARKS = re.compile(_NOT_AN_INDEX + r"(?:\[\d+\]){2,}")


def tidied(answer: str, sources: int) -> str:
    """A model's citation marks as crag reads them: one apart ("[1][2]" is "[1] [2]"),
    and none for a source it was not shown (a [9] of five)."""
    answer = _RUN_OF_MARKS.sub(lambda m: " ".join(_MARK.findall(m[0])), answer)
    return _SPACED_CITE.sub(lambda m: m[0] if 1 <= int(m[1]) <= sources else "", answer)


def unmarked(answer: str) -> str:
    """The answer without its citation marks: its words as the model wrote them, before
    verify moved, added or renumbered marks."""
    return _SPACED_CITE.sub("", answer)


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
            groups[key] = (citation_of(doc, len(groups) + 1), [])
        groups[key][1].append(strip)
    return list(groups.values())


def citation_of(doc: Passage, n: int) -> Citation:
    """Source `n`: where a reader finds the passage (file + page, or URL)."""
    citation: Citation = {"n": n, "origin": doc["origin"], "source": doc["source"]}
    for field in ("page", "url", "title", "query"):
        if doc.get(field):
            citation[field] = doc[field]  # type: ignore[literal-required,unused-ignore]
    return citation


def label(citation: Citation) -> str:
    if citation.get("query"):
        return f"{citation['source']} (SQL: {citation['query']})"
    if citation.get("url"):
        return f"{citation.get('title') or citation['source']} ({citation['url']})"
    if citation.get("page"):
        return f"{citation['source']}, page {citation['page']}"
    return citation["source"]


def shown_label(citation: Citation) -> str:
    """A source's label as the chat model reads it above the source's text."""
    return without_directives(label(citation))


def true_pages(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> tuple[str, int]:
    """The answer with the page it writes after a mark ("[1] guide.pdf, page 4") made the
    page of the source the mark cites: a small model copies the header each source has
    in the prompt, with a page of its own making (a section number read as a page).
    Returns the answer and how many pages were corrected."""
    by_n = {c["n"]: c for c, _ in numbered if c.get("page")}
    files = sorted({without_directives(c["source"]) for c in by_n.values()}, key=len, reverse=True)
    if not files:
        return answer, 0
    named = "|".join(re.escape(f) for f in files)
    echo = re.compile(rf"{CITE.pattern}\s*({named}),\s*page\s+(\w+(?:[.\-]\w+)*)")
    fixed = 0

    def page_of_mark(m: re.Match[str]) -> str:
        nonlocal fixed
        source = by_n.get(int(m[1]))
        if source is None or without_directives(source["source"]) != m[2]:
            return m[0]  # a mark of another source: what it names is left as written
        fixed += m[3] != str(source["page"])
        return f"[{m[1]}] {shown_label(source)}"

    return echo.sub(page_of_mark, answer), fixed


def render_sources(numbered: list[tuple[Citation, list[Strip]]], tag: str) -> str:
    blocks = [
        prompts.SOURCE_BLOCK.format(
            tag=tag,
            n=c["n"],
            label=shown_label(c),
            origin=c["origin"],
            text=" ... ".join(unmarked(s["text"]) for s in strips),
        )
        for c, strips in numbered
    ]
    return "\n\n".join(blocks)


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w]|\.\d)")


def _states(text: str, numbers: list[str]) -> bool:
    return all(re.search(rf"(?<![\w.]){re.escape(x)}(?![\w]|\.\d)", text) for x in numbers)


#: The share of a claim's words a source must hold to state it (with all its figures).
STATES_CLAIM = 0.5


def _support(claim: str, text: str) -> float:
    """How much of a claim a source states: none unless it holds every figure the claim
    gives, else the share of the claim's words (stemmed) it holds."""
    numbers = [x for x in _NUMBER.findall(claim) if len(x) > 1]
    if not _states(text, numbers):
        return 0.0
    words = {stem(w) for w in content_words(claim)}
    return len(words & stems(text)) / len(words) if words else 1.0


def repointed(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> tuple[str, int]:
    """The answer with a citation moved where the cited source does not state the claim
    (the text since the previous mark, when it gives figures) and exactly one other
    source states it best, sentence and figures: a model often cites a document's first
    page for a figure on its second. A cited source that states the claim stays cited,
    even where another page repeats the figures. Returns the answer and how many moved."""
    texts = {c["n"]: " ".join(s["text"] for s in strips) for c, strips in numbered}
    pieces, last, moved = [], 0, 0
    for mark in CITE.finditer(answer):
        claim, n = answer[last : mark.start()], int(mark.group(1))
        if n in texts and any(len(x) > 1 for x in _NUMBER.findall(claim)):
            support = {k: _support(claim, text) for k, text in texts.items()}
            best = max(support.values())
            winners = [k for k, v in support.items() if v == best]
            if support[n] < STATES_CLAIM <= best and len(winners) == 1:
                n, moved = winners[0], moved + 1
        pieces.append(f"{claim}[{n}]")
        last = mark.end()
    return "".join(pieces) + answer[last:], moved


def marked(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> tuple[str, int]:
    """An answer that cites no source, each sentence marked with the source that states
    it best, if one does (ties: each of them): a small model may leave out the marks,
    and an answer citing nothing is listed with every source it was shown. Returns the
    answer and how many sentences were marked."""
    if CITE.search(answer):
        return answer, 0
    texts = {c["n"]: " ".join(s["text"] for s in strips) for c, strips in numbered}
    pieces, start, count = [], 0, 0
    for end in sentence_ends(answer):
        sentence = answer[start:end]
        support = {n: _support(sentence, text) for n, text in texts.items()}
        best = max(support.values(), default=0.0)
        if best >= STATES_CLAIM and content_words(sentence):  # not "2." or "That is all."
            marks = " ".join(f"[{n}]" for n, v in support.items() if v == best)
            cut = len(sentence.rstrip(".!?"))
            sentence, count = f"{sentence[:cut]} {marks}{sentence[cut:]}", count + 1
        pieces.append(sentence)
        start = end
    return "".join(pieces) + answer[start:], count


def renumbered(answer: str, citations: list[Citation]) -> tuple[str, list[Citation]]:
    """The sources an answer lists numbered 1, 2, ... in the order its marks first name
    them (those it does not mark after, as they were), and its marks to match: a reader
    shown only [2], or [3] before [2], looks for what came before."""
    first: dict[int, int] = {}
    for mark in CITE.finditer(answer):
        first.setdefault(int(mark.group(1)), mark.start())
    order = sorted(citations, key=lambda c: (first.get(c["n"], len(answer)), c["n"]))
    new = {c["n"]: i for i, c in enumerate(order, 1)}
    if all(old == n for old, n in new.items()):
        return answer, citations
    text = CITE.sub(lambda m: f"[{new.get(int(m.group(1)), m.group(1))}]", answer)
    return text, [{**c, "n": new[c["n"]]} for c in order]


def cited(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> list[Citation]:
    """The citations the answer refers to; all sources if it cites none."""
    used = {int(m) for m in CITE.findall(answer)}
    citations = [c for c, _ in numbered]
    return [c for c in citations if c["n"] in used] or citations
