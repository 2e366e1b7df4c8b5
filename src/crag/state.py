"""The typed state that flows through the CRAG graph.

Documents are plain JSON-friendly dicts (not LangChain `Document`s) so that the
state reads the same in Python, in `crag ask --json` and in `langgraph dev`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from copy import copy
from typing import Annotated, Any, Literal, NotRequired, cast, get_args, get_origin, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite

# pydantic (used by langgraph-api for schemas) needs typing_extensions.TypedDict before 3.12
from typing_extensions import TypedDict

Verdict = Literal["correct", "incorrect", "ambiguous"]
Origin = Literal["library", "external"]
Support = Literal["supported", "partial", "none"]
Route = Literal["fast", "full"]


class Passage(TypedDict):
    """One retrieved or searched document, with where it came from."""

    id: str
    text: str
    origin: Origin
    source: str  # file name, or the page title of an external result
    page: NotRequired[str]  # as a reader would cite it (page label or 1-based number)
    url: NotRequired[str]
    title: NotRequired[str]
    published: NotRequired[str]  # an external result's date, as its source gave it
    query: NotRequired[str]  # the SQL statement a database row came from
    similarity: NotRequired[float]  # retrieval similarity in [0, 1]
    score: NotRequired[float]  # grader relevance score in [0, 1]: the verdict's signal
    # when the document was written (ISO date) and where crag read it: its text, its PDF
    # metadata, the search result's date, or the file's modification time
    date: NotRequired[str]
    dated_by: NotRequired[Literal["text", "pdf", "published", "file"]]
    kind: NotRequired[str]  # library, official, news, blog, web or forum
    # the other confidence signals, each in [0, 1], and their weighted sum
    completeness: NotRequired[float]  # share of the question the document covers
    recency: NotRequired[float]  # 1 today, halving every half-life; 0.5 undated
    authority: NotRequired[float]  # from its kind, or the user's override
    confidence: NotRequired[float]  # the composite: orders documents and strips


class Rating(TypedDict, total=False):
    """What refinement found of a document: its confidence signals (see `Passage`)."""

    kind: str
    completeness: float
    recency: float
    authority: float
    confidence: float
    date: str
    dated_by: Literal["text", "pdf", "published", "file"]


def rating_of(passage: Passage) -> Rating:
    """The confidence signals a rated passage carries."""
    return cast(Rating, {k: v for k, v in passage.items() if k in Rating.__optional_keys__})


def with_ratings(passages: Sequence[Passage], ratings: Mapping[str, Rating]) -> list[Passage]:
    """The passages with what refinement rated them (each as it is when it was not)."""
    return [cast(Passage, {**p, **ratings.get(p["id"], {})}) for p in passages]


def documents_seen(state: State) -> list[Passage]:
    """Every document of a run, as refinement rated it: the graded documents (what
    retrieval returned, in a graph that grades nothing), then the web results."""
    graded = state.get("docs") or state.get("retrieved") or []
    seen = [*graded, *(state.get("web_docs") or [])]
    return with_ratings(seen, state.get("ratings") or {})


class Strip(TypedDict):
    """A sentence strip of a passage, the unit of knowledge refinement."""

    doc_id: str
    position: int  # order within the refined context: (document rank, strip index)
    text: str
    score: float  # relevance to the question
    confidence: NotRequired[float]  # composite: its score with its document's other signals


class ConflictValue(TypedDict):
    doc_id: str
    source: str
    value: str


class Conflict(TypedDict):
    """Sources that give different values for the one thing the question asks."""

    values: list[ConflictValue]
    preferred: str  # the doc_id kept: the higher composite confidence
    reason: str  # why it won: newer, more authoritative, ...
    by: Literal["rule", "model"]


class Part(TypedDict):
    """A sub-question of a decomposed question, and how well the library covers it."""

    text: str
    score: float  # the best document's score for this part
    covered: bool  # some document scores at or above `upper` for it


class PartGrade(TypedDict):
    """How the documents graded for one part of a decomposed question."""

    text: str
    top: float  # the best document's score for it
    # the best score of a document that explains it (names the subject of a comparison
    # more than once, meets its years and versions); 0 if none does
    explains: float


class Grades(TypedDict):
    """A question's grading before any threshold: all the verdict reads
    (`crag.grading.verdict.decide`), so the lab can replay it at other thresholds."""

    scores: list[float]  # each graded document's (with parts: its best part's score)
    first: list[float]  # the first retrieval's scores by the cheap grader: the fast check
    simple: bool  # one part, not complex, every name known: the fast path may take it
    parts: list[PartGrade]  # [] for a question of one part
    asked: list[str]  # the question's years, dates and versions (coverage check on)
    meets: list[list[str]]  # per graded document, which of `asked` it meets
    never: list[str]  # names the library never mentions
    unknown: list[str]  # those that are what a one-part question asks about


class QuestionSplit(TypedDict):
    """A question's parts, as `split` found them."""

    parts: list[str]  # [] for a question of one part
    how: str  # rules, model, or off
    compares: bool  # a comparison: each part is about a thing a document must name


class PartTask(TypedDict):
    """One part of a question of several, sent to `grade_part` with every document
    retrieved for the question and its parts (the pool, in `docs`' order)."""

    index: int
    text: str
    subject: str  # the thing of a comparison a document must name ("" if none)
    texts: list[str]


class PartScores(TypedDict):
    """What `grade_part` found for one part: each pool document's score against it,
    and its `PartGrade`."""

    index: int
    grade: PartGrade
    scores: list[float]
    grader: str


NO_GRADES = Grades(
    scores=[], first=[], simple=False, parts=[], asked=[], meets=[], never=[], unknown=[]
)


class Citation(TypedDict):
    n: int
    origin: Origin
    source: str
    page: NotRequired[str]
    url: NotRequired[str]
    title: NotRequired[str]
    query: NotRequired[str]


class Draft(TypedDict):
    """An answer before verification, and how it was written. Its text is "" when the
    chat model found no answer in the context (no draft at all: nothing reached it)."""

    text: str
    detail: str  # the generate step's note
    by_model: bool  # a chat model wrote it (else the best strips, quoted)
    fallback: bool  # the model failed or its reply was unreadable: the best strips stand in


class Step(TypedDict):
    """One node run: the audit trail of the path taken."""

    node: str
    seconds: float
    detail: str


def _merge_path(old: list[Step], new: list[Step]) -> list[Step]:
    """A run starts at condense, so condense starts a new trail.

    Without this, a second question on the same `langgraph dev` thread would show the
    nodes of the first one too.
    """
    if new and new[0]["node"] == "condense":
        return list(new)
    return [*(old or []), *new]


def _merge_kinds(old: list[str], new: list[str]) -> list[str]:
    """The kinds of data masked so far in a run, each once: several nodes may send text
    out. A run starts afresh by overwriting them (condense sends `Overwrite([])`)."""
    return list(dict.fromkeys([*(old or []), *(new or [])]))


class InputState(TypedDict):
    """A question. On a thread, the conversation so far is in `messages`; a chat client
    may send the question as a last, unanswered human message instead (it then wins)."""

    question: NotRequired[str]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]


def clean_question(question: Any, max_chars: int) -> str:
    """The question, stripped, or a ValueError that says what is wrong with it."""
    if not isinstance(question, str):
        raise ValueError(f"the question must be text, got {type(question).__name__}")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:  # e.g. undecodable bytes passed on the command line
        raise ValueError("the question is not valid UTF-8 text") from None
    question = question.strip()
    if not question:
        raise ValueError("the question is empty")
    if len(question) > max_chars:
        raise ValueError(
            f"the question is {len(question)} characters long; the limit is {max_chars} "
            "(max_question_chars)"
        )
    return question


class State(InputState, total=False):
    """Each run's keys, grouped by the node that writes them. A cache hit replays an
    earlier run's verdict and answer keys instead (`cache_lookup`); the reducer keys
    (`messages`, `redacted`, `path`) gather what several nodes add."""

    # condense: the run's question, and whose library answers it
    tenant: str  # the `tenant` knob
    # cache_lookup
    cached: bool  # the answer came from the tenant's answer cache
    library_version: str | None  # the tenant's library as the run began (None: no cache)
    # split
    split: QuestionSplit | None
    # retrieve
    retrieved: list[Passage]  # what retrieval returned, before grading
    part_retrieved: list[Passage]  # each part's own retrieval, part by part
    # grade
    docs: list[Passage]  # the graded documents, each with its score
    scores: list[float]
    grader: str
    grades: Grades  # the verdict's inputs, before the thresholds
    route: Route  # fast: a simple question whose best chunk clearly wins; full: the rest
    parts: list[Part]  # a decomposed question's sub-questions ([] for a single question)
    # what the library cannot cover: terms it never names, or names only in passing
    missing_terms: list[str]
    verdict: Verdict
    good_docs: list[Passage]
    part_tasks: list[PartTask]  # the parts sent to grade_part, for a question of several
    # grade_part: a merged list, each part's scores as its grading ends
    part_grades: Annotated[list[PartScores], operator.add]
    # rewrite
    web_query: str
    # web_search
    web_docs: list[Passage]
    web_error: str
    searched: list[str]  # each source the web path asked, in order, and what it gave
    # kinds of secret or personal data masked in what left the machine (never the values)
    redacted: Annotated[list[str], _merge_kinds]
    # refine
    ratings: dict[str, Rating]  # each refined document's confidence signals, by id
    strips: list[Strip]
    kept_strips: list[Strip]
    conflicts: list[Conflict]  # disagreements settled in refinement
    # generate
    draft: Draft | None  # the answer before verification
    # verify: whether crag answered, and how far the evidence supports the answer
    answer: str
    citations: list[Citation]
    answered: bool
    decline_reason: str | None  # why crag declined (`verify.DeclineReason`); None: answered
    support: Support
    unsupported: list[str]  # what the question asks that the evidence does not show
    composite: float  # the composite confidence of the sources the answer cites (0: declined)
    confidence: float  # the probability that the outcome is right (`grading.outcome`)
    # every node: the audit trail of the path taken
    path: Annotated[list[Step], _merge_path]


#: What a new question on a thread keeps: the conversation, whose library it is, and the
#: trail (which `condense` restarts). Every other key of `State` is a run's result.
THREAD_KEYS = frozenset({"question", "messages", "tenant", "path"})


def _empty(hint: Any) -> Any:
    """A state value that says "not yet" for a key of this type."""
    if get_origin(hint) is Annotated:  # a key with a reducer: replaced, not merged
        return Overwrite(_empty(get_args(hint)[0]))
    if hint is Grades:
        return NO_GRADES
    base = get_origin(hint) or hint
    empties: dict[Any, Any] = {list: [], dict: {}, str: "", bool: False, float: 0.0}
    return copy(empties.get(base))  # a verdict, route or reason not yet decided: None


def fresh_run() -> dict[str, Any]:
    """Every per-run key of `State` at its empty value, read from the State itself: a
    new question on a thread inherits none of the last run's results, and a key added
    to `State` later is reset with the rest (`condense` starts each run with these)."""
    hints = get_type_hints(State, include_extras=True)
    return {key: _empty(hint) for key, hint in hints.items() if key not in THREAD_KEYS}
