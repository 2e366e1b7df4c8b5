"""Plain-text helpers shared by refinement, rewriting and grading: no models here."""

from __future__ import annotations

import re

STOPWORDS = frozenset(
    """a an and are as at be been being but by can could did do does doing for from had
    has have having how i if in into is it its me more most my no nor not of on or our
    out over own same she should so some such than that the their them then there these
    they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours about above after again against all
    also am any because before below between both down during each few further here him
    his her hers himself herself itself just myself once only other ourselves themselves
    yourself yourselves s t don now use used using give explain describe tell define
    difference between vs versus known called mean means""".split()
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


def strips_of(text: str, sentences_per_strip: int) -> list[str]:
    """Decompose a passage into strips of n consecutive sentences (CRAG refinement)."""
    sentences = split_sentences(text)
    n = max(1, sentences_per_strip)
    return [" ".join(sentences[i : i + n]) for i in range(0, len(sentences), n)]


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (stopwords and 1-letter tokens dropped)."""
    words = [w.lower().strip(".'") for w in _WORD.findall(text)]
    return [w for w in words if len(w) > 1 and w not in STOPWORDS]


def keyword_query(question: str, max_terms: int = 8) -> str:
    """A deterministic search query: the question's content words, first seen first."""
    terms = list(dict.fromkeys(content_words(question)))
    return " ".join(terms[:max_terms]) or question.strip()
