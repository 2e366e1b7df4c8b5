"""Plain-text helpers shared by refinement, rewriting and grading: no models here."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

STOPWORDS = frozenset(
    """a an the and or but if then else of in on at to for from by with without about as
    into onto over under between among through during before after above below up down out
    off again further once here there is are was were be been being am do does did doing
    have has had having can could should would may might must will shall i me my we our
    ours you your yours he him his she her hers it its they them their this that these
    those what which who whom whose when where why how all any both each few more most
    other some such no nor not only own same so than too very just also s t don now one
    ones much many get got use used using make made us let like well way please tell
    explain describe give name list mean means meaning difference differences versus vs
    known called myself yourself himself herself itself ourselves themselves""".split()
)

# Sentence ends: ., ! or ? followed by space and a capital/digit/quote, or a blank line.
# Abbreviations and decimals ("e.g. the", "3.5") do not end a sentence.
_ABBREV = "".join(
    rf"(?<!\b{re.escape(a)})" for a in ("e.g.", "i.e.", "vs.", "etc.", "Fig.", "Eq.", "No.", "al.")
)
_SENTENCE_END = re.compile(_ABBREV + r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-\+\.']*[A-Za-z0-9\+]|[A-Za-z0-9]")


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage, whitespace-normalised; fragments stay attached."""
    parts = [" ".join(p.split()) for p in _SENTENCE_END.split(text)]
    sentences: list[str] = []
    for part in parts:
        if not part:
            continue
        if sentences and len(part) < 12:
            sentences[-1] = f"{sentences[-1]} {part}"
        else:
            sentences.append(part)
    return sentences


# Sentences that address the model instead of informing the reader: prompt injection.
_DIRECTIVE = re.compile(
    r"\b(ignore|disregard|forget|override)\b.{0,40}\b(instructions?|prompts?|rules|"
    r"guidelines|directions)\b"
    r"|\b(ignore|disregard)\s+(all\s+|everything\s+)?(the\s+)?(above|previous|prior)\s*[.,;:!]"
    r"|\b(you are now|act as an?|pretend to be|new instructions?|system prompt|jailbreak)\b"
    r"|\b(reply|respond|answer|end|start|finish|begin)\b.{0,40}\bwith the (word|phrase|text)\b"
    r"|\b(note|message|instructions?|command)s? (to|for) (the )?(assistant|ai|model|llm|chatbot)\b"
    r"|\b(assistant|chatbot|language model|llm|ai model)s?\b.{0,40}\b(must|should|shall|will)\b",
    re.IGNORECASE,
)


def is_directive(sentence: str) -> bool:
    """True for a sentence that gives orders to an AI (a prompt-injection attempt)."""
    return bool(_DIRECTIVE.search(sentence))


def strips_of(text: str, sentences_per_strip: int) -> list[str]:
    """Decompose a passage into strips of n consecutive sentences (CRAG refinement).

    Sentences that give orders to an AI are dropped here, before any model sees them:
    small local models follow such orders even inside clearly delimited data.
    """
    sentences = [s for s in split_sentences(text) if not is_directive(s)]
    n = max(1, sentences_per_strip)
    return [" ".join(sentences[i : i + n]) for i in range(0, len(sentences), n)]


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (stopwords and 1-letter tokens dropped)."""
    words = [w.lower().strip(".'") for w in _WORD.findall(text)]
    return [w for w in words if len(w) > 1 and w not in STOPWORDS]


def key_terms(question: str) -> list[str]:
    """Words of the question that carry its topic: what a library must know to answer."""
    terms = []
    for word in _WORD.findall(question):
        bare = re.sub(r"['’]s$", "", word).strip(".'’")
        if len(bare) > 2 and bare.lower() not in STOPWORDS:
            terms.append(bare)
    return list(dict.fromkeys(terms))


@functools.cache
def _common_words() -> frozenset[str]:
    """Whole words of the embedding model's 30k-word BERT vocabulary: everyday English."""
    path = Path(__file__).parent / "data" / "minilm-tokenizer.json"
    vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    return frozenset(w for w in vocab if w.isalpha())


def is_specific(term: str) -> bool:
    """A term that names something (AdaBoost, TF-IDF, nginx), not an everyday word.

    The coverage check only asks the library about such terms: a small library may
    lack "according" or "customers" without lacking the question's topic.
    """
    if re.search(r"[-\d]", term) or re.search(r"[a-z][A-Z]", term):
        return True
    return term.lower() not in _common_words()


def keyword_query(question: str, max_terms: int = 8) -> str:
    """A deterministic search query: the question's content words, first seen first."""
    terms = list(dict.fromkeys(content_words(question)))
    return " ".join(terms[:max_terms]) or question.strip()


# "X vs Y", "difference between X and Y", "how does X differ from / compare with Y",
# "compare X with Y": the two things a comparison asks about.
_SIDES = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"(?P<a>[\w\-' ]+?)\s+(?:vs\.?|versus)\s+(?P<b>[^:?,;]+)",
        r"differences?\s+between\s+(?P<a>.+?)\s+and\s+(?P<b>[^:?,;]+)",
        r"\b(?:do|does|did|is|are)\s+(?P<a>.+?)\s+(?:differ|different)\s+from\s+(?P<b>[^:?,;]+)",
        r"\b(?:do|does)\s+(?P<a>.+?)\s+compare\s+(?:with|to)\s+(?P<b>[^:?,;]+)",
        r"\bcompare\s+(?P<a>.+?)\s+with\s+(?P<b>[^:?,;]+)",
        r"\bcompare\s+(?P<a>.+?)\s+(?:to|and)\s+(?P<b>[^:?,;]+)",
    )
]
_LEADING = re.compile(r"^(?:the|a|an|our|their|its)\s+", re.IGNORECASE)
# A side ends where its qualifiers start: "early stopping [for neural networks]".
_SIDE_END = re.compile(
    r"\s*(?:[,:;?!()]|\s(?:as|for|used|of|in|when|that|which|to|on|at|by|and|or|with|from"
    r"|is|are|do|does)\s).*$",
    re.IGNORECASE,
)


def comparison_sides(question: str) -> list[str]:
    """The things a comparison question compares, as short phrases; [] otherwise."""
    for pattern in _SIDES:
        match = pattern.search(question)
        if not match:
            continue
        sides = []
        for raw in (match["a"], match["b"]):
            side = _LEADING.sub("", raw.strip())
            side = _SIDE_END.sub("", f" {side} ").strip().rstrip(".")
            if side and len(side.split()) <= 5:
                sides.append(side)
        return sides
    return []
