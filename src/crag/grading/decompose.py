"""Query decomposition: a multi-part or comparison question as 2-4 sub-questions.

Each sub-question is retrieved and graded on its own, so the verdict can say which
part the library covers ("batch norm vs layer norm": a library that explains one
side answers half of it), and only the uncovered parts go to the external source.

Without a language model, the parts are read from the usual English forms of a
comparison ("X vs Y", "difference between X and Y", "how does X differ from /
compare with / relate to Y", "X and Y each/both") and of a multi-part question (two
questions in one, "What is X and how does Y work?"). With one, the chat model splits
the question (one call, structured output), and the rules are its fallback.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from dataclasses import dataclass

from langchain_core.messages import HumanMessage, SystemMessage

from crag import prompts
from crag.context import Context
from crag.grading.constraints import Constraint, when
from crag.models.chat import EXTRACTIVE, UNSTREAMED, make_chat_model
from crag.text import STOPWORDS, content_words, normalize, terms, without_clitic

log = logging.getLogger(__name__)

MAX_PARTS = 4
MAX_NAME_WORDS = 3

# A side is a short noun phrase: a few words, no clause punctuation (the dot of a
# version, "2.4", is none).
_DOT = r"(?<=\d)\.(?=\d)"
_SIDE = rf"(?:[^:?,;.!()]|{_DOT}){{1,120}}?"
_WORD = rf"(?:[\w\-'’]|{_DOT})+"
_WORDS = rf"{_WORD}(?:[ \t]{_WORD}){{0,4}}"  # up to five words, read back from "vs"
_END = r"(?=[:?,;!(]|\.(?!\d)|$)"
# The forms of a comparison; `a` and `b` are the two things compared.
_COMPARISONS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"(?P<a>{_WORDS})\s+(?:vs\.?|versus)\s+(?P<b>{_SIDE}){_END}",
        rf"\bdifferences?\s+between\s+(?P<a>{_SIDE})\s+and\s+(?P<b>{_SIDE}){_END}",
        rf"\b(?:do|does|did|is|are)\s+(?P<a>{_SIDE})\s+(?:differ|different)\s+from\s+"
        rf"(?P<b>{_SIDE}){_END}",
        rf"\b(?:do|does)\s+(?P<a>{_SIDE})\s+(?:compare|relate)\s+(?:with|to)\s+"
        rf"(?P<b>{_SIDE}){_END}",
        rf"\bcompare\s+(?P<a>{_SIDE})\s+with\s+(?P<b>{_SIDE}){_END}",
        rf"\bcompare\s+(?P<a>{_SIDE})\s+(?:to|and)\s+(?P<b>{_SIDE}){_END}",
        rf"(?P<a>{_WORD}(?:[ \t]{_WORD}){{0,3}})\s+and\s+(?P<b>{_WORD}(?:[ \t]{_WORD}){{0,3}}?)"
        r"\s+(?:(?:are|is|do|does|were|can)\s+)?(?:each|both)\b",
    )
]
# Where a comparison may be asked: the patterns run only in a window around these
# words, so a long text costs linear time.
_ANCHOR = re.compile(
    r"\b(?:vs|versus|between|differ|different|compare|relate|each|both)\b", re.IGNORECASE
)
_WINDOW = 200
_MAX_ANCHORS = 20
# Words that open a question or link a side, never part of what is compared.
_LEADING = re.compile(
    r"^(?:(?:what|how|which|why|when|where|who|do|does|did|is|are|can|the|a|an|our|their|"
    r"its|of|for|in|on|between|compare|and)\s+)+",
    re.IGNORECASE,
)
# The vocabulary of comparing, left out of the context a part carries.
_COMPARING = frozenset(
    "vs versus difference differences differ differs different compare compared comparison "
    "relate relates related relation each both similar similarity same between".split()
)
_ASKING = frozenset("what how which why when where who whom whose another main".split())
# "..., and how does Y work?": a second question joined to the first.
_SECOND_QUESTION = re.compile(
    r"(?:,\s*|\s+)(?:and|also)\s+(?=(?:what|how|why|when|where|which|who|whom|whose|does|do|"
    r"did|is|are|can|should)\b)",
    re.IGNORECASE,
)


# A side read backwards from "vs" or "and ... both" starts after the last of these.
_OPENS_SIDE = re.compile(r"\b(?:of|for|in|on|between|compare|with|do|does|what|how)\s+", re.I)


# A long side ends where its qualifiers start: "TF-IDF features [as a way to ...]".
_QUALIFIER = re.compile(r"\s(?:as|for|used|when|that|which|to|on|at|by|with|from|in)\s.*$", re.I)
MAX_SIDE_WORDS = 8


def _side(raw: str, *, read_backwards: bool) -> str:
    if read_backwards:
        raw = _OPENS_SIDE.split(raw)[-1]
    side = _LEADING.sub("", raw.strip()).strip(" '\"’")
    if len(side.split()) > MAX_SIDE_WORDS:
        side = _QUALIFIER.sub("", side)
    return side if side and len(side.split()) <= MAX_SIDE_WORDS else ""


def comparison(question: str) -> tuple[list[str], tuple[int, int]] | None:
    """The things a comparison question compares, and where the comparison is."""
    windows = [
        (max(0, a.start() - _WINDOW), question[max(0, a.start() - _WINDOW) : a.end() + _WINDOW])
        for a in itertools.islice(_ANCHOR.finditer(question), _MAX_ANCHORS)
    ]
    for n, pattern in enumerate(_COMPARISONS):
        backwards = n in (0, len(_COMPARISONS) - 1)  # "X vs Y", "X and Y ... both"
        for offset, window in windows:
            match = pattern.search(window)
            if not match:
                continue
            sides = [
                _side(match["a"], read_backwards=backwards),
                _side(match["b"], read_backwards=False),
            ]
            if all(sides) and sides[0].lower() != sides[1].lower():
                return sides, (offset + match.start(), offset + match.end())
    return None


def _context_words(text: str) -> list[str]:
    """The words of the question outside the comparison that say what is asked about
    each side ("pricing and features of ..."), less those of comparing."""
    bare = (without_clitic(w) for w in terms(text))
    found = [w for w in bare if len(w) > 2 and w.lower() not in STOPWORDS | _COMPARING | _ASKING]
    return list(dict.fromkeys(found))


# What makes a question lean on the one before: it opens by continuing it ("and",
# "what about"), or points back at something it does not name ("it", "those").
_CONTINUES = re.compile(r"^\s*(and|or|but|also|so|then|what about|how about)\b", re.IGNORECASE)
_POINTS_BACK = re.compile(
    r"\b(it|its|they|them|their|this|that|these|those|he|she|his|her|the same|"
    r"the former|the latter|there)\b",
    re.IGNORECASE,
)
#: A question with fewer content words than this is too short to stand alone.
MIN_STANDALONE_WORDS = 3


#: Uses of those words that point at nothing: "is there a limit" (there with a form of
#: "be"), "is it possible to" (it before a judgement and what is judged: "how is it
#: better than" points back), and "the option that controls"
#: (`_relative`).
_BE = r"(?:is|are|was|were|be|been|'s|isn't|aren't|wasn't|weren't)"
_POINTS_AT_NOTHING = re.compile(
    rf"\b{_BE}\s+there\b|\bthere\s+{_BE}\b"
    rf"|\b(?:{_BE}\s+it|it\s+{_BE})\s+(?:\w+\s+)?(?:possible|necessary|safe|true|required|"
    r"recommended|advisable|better|best|worth|ok|okay|allowed|normal|common|enough)"
    r"\s+(?:to|that|if|for|when)\b",
    re.IGNORECASE,
)
_THAT = re.compile(r"\b(\w+)\s+that\s+(\w+)", re.IGNORECASE)
_AUXILIARIES = frozenset(
    "is are was were has have had can could will would should may might must does do did".split()
)


def _relative(match: re.Match[str]) -> str:
    """`that` as "which": after a noun, before a verb in -s or -ed or an auxiliary ("the
    option that controls"), or after a plural noun ("the settings that matter")."""
    before, after = match[1].lower(), match[2].lower()
    if before in STOPWORDS or before in _AUXILIARIES:
        return match[0]
    verb = after in _AUXILIARIES or after.endswith(("s", "ed"))
    return f"{match[1]} {match[2]}" if verb or before.endswith("s") else match[0]


def points_back(question: str) -> bool:
    """Whether a question continues another or names something only by pointing at it."""
    if _CONTINUES.search(question):
        return True
    plain = _THAT.sub(_relative, _POINTS_AT_NOTHING.sub(" ", question))
    return bool(_POINTS_BACK.search(plain))


def is_follow_up(question: str) -> bool:
    """Whether a question leans on the one before it (in a conversation, or in a
    question of several sentences)."""
    return points_back(question) or len(content_words(question)) < MIN_STANDALONE_WORDS


def carried(question: str, previous: str) -> str:
    """A question that leans on `previous`, with the key terms of `previous` it lacks."""
    have = set(content_words(question))
    extra = [w for w in dict.fromkeys(content_words(previous)) if w not in have]
    return f"{question} ({' '.join(extra)})" if extra else question


def _alike(a: str, b: str) -> bool:
    """Two names of one kind ("L1"/"L2", "GPT"/"BERT"): a shared head noun is implied."""
    shape = [(any(c.isdigit() for c in w), w.isupper()) for w in (a, b)]
    return shape[0] == shape[1] and any(shape[0])


def rule_parts(question: str) -> list[str]:
    """2-4 sub-questions read from the question's form; [] for a single question."""
    text = normalize(question).strip()
    found = comparison(text)
    if found:
        sides, _ = found
        a, b = sides
        if len(a.split()) == 1 and len(b.split()) > 1 and _alike(a, b.split()[0]):
            sides[0] = f"{a} {b.split()[-1]}"  # "L2 and L1 regularization": both regularizations
        rest = re.sub(r"\([^()]{0,80}\)", " ", text)  # an aside, e.g. an abbreviation
        for side in (a, b):
            rest = rest.replace(side, " ", 1)
        shared = " ".join(
            w for w in _context_words(rest) if not any(w.lower() in s.lower() for s in sides)
        )
        return [f"{side}: {shared}" if shared else side for side in sides][:MAX_PARTS]
    # two questions in one: "What is X? How does Y work?", "What is X and how is Y ...?"
    pieces = [p.strip() for p in re.split(r"(?<=\?)\s+", text) if p.strip()]
    if len(pieces) == 1:
        pieces = [p.strip(" ,") for p in _SECOND_QUESTION.split(text, maxsplit=MAX_PARTS - 1)]
    # A piece that leans on the one before ("How does it work?") or asks again about the
    # same thing ("... dropout? Is dropout a regulariser?") goes on with it, unless it
    # asks about another year, date or version, or asks something new of it (two words
    # of its own: "..., and which setting changes it?"): then it is a part, with the
    # terms it leans on, graded alone.
    # Each part's words and constraints grow with it, so no part is read again.
    parts: list[str] = []
    topics: list[set[str]] = []
    asked: list[set[Constraint]] = []
    for piece in pieces:
        topic = {w.lower() for w in _context_words(piece)}
        said = set(when(piece))
        if not parts or not (is_follow_up(piece) or topic & topics[-1]):
            parts.append(piece)
            topics.append(topic)
            asked.append(said)
        elif said - asked[-1] or len(topic - topics[-1]) >= 2:
            part = carried(piece, parts[-1])
            parts.append(part)
            topics.append({w.lower() for w in _context_words(part)})
            asked.append(set(when(part)))
        else:
            parts[-1] = f"{parts[-1]} {piece}"
            topics[-1] |= topic
            asked[-1] |= said
    pieces = parts
    return pieces[:MAX_PARTS] if len(pieces) >= 2 else []


def subjects(parts: list[str]) -> list[str]:
    """What each part is about, as a phrase a document that explains it must name: the
    run of words around what sets the part apart from the others ("layer
    normalization" of "What is layer normalization?" beside "... batch normalization?");
    "" when that run is longer than a name, or when the part compares things itself."""
    words = [[w.lower() for w in terms(p.split(": ")[0])] for p in parts]
    found = []
    for i, own in enumerate(words):
        if comparison(normalize(parts[i])) is not None:
            # a part that compares things itself ("the main difference between Adam and
            # SGD", beside "What is Adam?") is about both sides, not one
            found.append("")
            continue
        others = {w for j, ws in enumerate(words) if j != i for w in ws}
        runs: list[list[str]] = [[]]
        for word in own:
            if word in STOPWORDS or word in _ASKING or word in _COMPARING:
                runs.append([])
            else:
                runs[-1].append(word)
        apart = [r for r in runs if any(w not in others for w in r)]
        # a name is a few words; a longer run is a clause, not what the part is about
        found.append(" ".join(apart[0]) if apart and len(apart[0]) <= MAX_NAME_WORDS else "")
    return found


def _parsed(raw: str) -> list[str]:
    """The sub-questions of the model's JSON reply; [] if it gave none usable."""
    match = re.search(r"\{.*\}", raw, re.DOTALL)
    try:
        parts = json.loads(match.group(0))["parts"] if match else []
    except (ValueError, KeyError, TypeError):
        return []
    if not isinstance(parts, list):
        return []
    clean = [" ".join(str(p).split())[:300] for p in parts if isinstance(p, str) and p.strip()]
    return clean[:MAX_PARTS] if len(clean) >= 2 else []


@dataclass(frozen=True)
class Split:
    """A question's parts ([] for a single question), who split it, and whether it
    compares things (then each part is about a thing a document must name)."""

    parts: list[str]
    how: str = "rules"
    compares: bool = False

    @property
    def subjects(self) -> list[str]:
        return subjects(self.parts) if self.compares else ["" for _ in self.parts]


async def decompose(question: str, ctx: Context) -> Split:
    """The question's parts, and how they were found.

    The model is asked only when the question's form suggests parts: a simple
    question costs no call, and a model that splits everything cannot slow them down.
    """
    parts = rule_parts(question)
    compares = comparison(normalize(question)) is not None
    if not parts or ctx.models.chat_model == EXTRACTIVE:
        return Split(parts, "rules", compares)
    model = make_chat_model(ctx.models.chat_model, ctx, max_tokens=160)
    try:
        reply = await model.ainvoke(
            [
                SystemMessage(prompts.DECOMPOSE_SYSTEM),
                HumanMessage(prompts.DECOMPOSE_USER.format(question=question)),
            ],
            config=UNSTREAMED,
        )
        by_model = _parsed(str(reply.content))
    except Exception as exc:  # decomposition is an optimisation: never fail the run on it
        log.warning("decomposition by the model failed (%s); using the rules", exc)
        by_model = []
    if not by_model:
        return Split(parts, "rules", compares)
    # each part is retrieved and graded alone: one that points back ("What does it cost
    # after ...?") carries the terms of the part before it, as the rules' parts do
    standalone = by_model[:1]
    for part in by_model[1:]:
        standalone.append(carried(part, standalone[-1]) if points_back(part) else part)
    return Split(standalone, "model", compares)
