"""Composite confidence: relevance, and how complete, recent and authoritative a source is.

CRAG's verdict rests on relevance alone, and stays so. But two relevant sources are not
worth the same: one covers the whole question and the other a word of it, one was
written last month and the other three years ago, one is the vendor's documentation and
the other a forum post. Each signal is a number in [0, 1]; their weighted sum (weights
in `Context`, normalised to sum 1) orders documents and strips, picks the better of two
near-duplicate strips and settles conflicts between sources.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from fnmatch import fnmatch
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crag.context import Context
from crag.dates import read_date
from crag.grading.coverage import key_terms
from crag.grading.question_form import read
from crag.method_knobs import AUTHORITY_OF_KIND, SIGNALS
from crag.source_kind import detect_kind
from crag.text import stems

if TYPE_CHECKING:
    from crag.state import Passage

#: The signal of a document nothing is known about: neither favoured nor buried.
NEUTRAL = 0.5


# --- completeness -----------------------------------------------------------------------------


def completeness(parts: Sequence[str], text: str) -> float:
    """The share of the question a text covers. `parts` are the question's key terms
    (`key_terms`) or its sub-questions: a term is covered when the text names it, a
    sub-question by the share of its own key terms the text names. No parts: neutral."""
    if not parts:
        return NEUTRAL
    have = stems(text)
    shares = []
    for part in parts:
        found = [bool(term) and term <= have for term in _term_stems(part)]
        shares.append(sum(found) / len(found) if found else 0.0)
    return sum(shares) / len(shares)


@functools.lru_cache(maxsize=1024)
def _term_stems(part: str) -> tuple[frozenset[str], ...]:
    """The stems of each key term of a part (the same for every passage rated)."""
    terms = key_terms(part) if len(part.split()) > 1 else [part]
    return tuple(frozenset(stems(t)) for t in terms)


# --- recency ----------------------------------------------------------------------------------


def recency(when: date | None, today: date, half_life_days: float) -> float:
    """1 for a document of today (or a date ahead), halving every half-life; an undated
    document is neutral, as old as one half-life."""
    if when is None:
        return NEUTRAL
    age = max(0, (today - when).days)
    return float(0.5 ** (age / half_life_days))


def dated(passage: Passage) -> tuple[date | None, str]:
    """When a document was written and where that was read: a search result's own date
    first (it is the page's), then the date found at ingest."""
    if (published := passage.get("published")) and (when := read_date(published)):
        return when, "published"
    if (iso := passage.get("date")) and (when := read_date(iso)):
        return when, passage.get("dated_by", "text")
    return None, ""


# --- authority --------------------------------------------------------------------------------


def _matches(key: str, source: str, url: str) -> bool:
    """Whether an override names this source: a URL prefix, a glob, a file, a folder
    (with or without its trailing /), or a web host with its subdomains."""
    if "://" in key:
        return bool(url) and url.startswith(key)
    if any(ch in key for ch in "*?["):
        return fnmatch(source, key) or (bool(url) and fnmatch(url, key))
    folder = key.rstrip("/")
    if source == key or (folder and source.startswith(folder + "/")):
        return True
    host = (urlsplit(url).hostname or "").lower() if url else ""
    return bool(host) and (host == key.lower() or host.endswith("." + key.lower()))


def authority(passage: Passage, overrides: Mapping[str, float | str]) -> tuple[float, str]:
    """A source's authority and kind. The user's override for the most specific pattern
    naming the source wins (a number, or a kind); else its kind's value: the kind read
    at ingest, from its web address, or its origin (library / web)."""
    source, url = passage.get("source", ""), passage.get("url", "")
    kind = (
        passage.get("kind")
        or (detect_kind(url=url) if url else None)
        or ("library" if passage.get("origin") == "library" else "web")
    )
    table = dict(AUTHORITY_OF_KIND)
    for key, value in overrides.items():
        if key in AUTHORITY_OF_KIND:
            table[key] = AUTHORITY_OF_KIND[value] if isinstance(value, str) else value
    named = [k for k in overrides if k not in AUTHORITY_OF_KIND and _matches(k, source, url)]
    if named:
        value = overrides[max(named, key=len)]
        if isinstance(value, str):
            kind = value
        else:
            return float(value), kind
    return table.get(kind, table["web"]), kind


# --- the composite ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Weights:
    relevance: float
    completeness: float
    recency: float
    authority: float

    def of(self, signals: Mapping[str, float]) -> float:
        """The weighted mean of the signals (weights normalised to sum 1)."""
        pairs = [(getattr(self, name), signals.get(name, NEUTRAL)) for name in SIGNALS]
        total = sum(w for w, _ in pairs)
        return sum(w * s for w, s in pairs) / total if total else NEUTRAL


def weights_for(ctx: Context, question: str) -> tuple[Weights, str | None]:
    """The run's weights for this question, and why recency weighs more when it does."""
    timely = read(question).time_sensitive
    boost = (
        timely is not None and ctx.confidence.timely_recency_weight > ctx.confidence.weight_recency
    )
    weights = Weights(
        relevance=ctx.confidence.weight_relevance,
        completeness=ctx.confidence.weight_completeness,
        recency=ctx.confidence.timely_recency_weight if boost else ctx.confidence.weight_recency,
        authority=ctx.confidence.weight_authority,
    )
    return weights, timely


def signals_of(passage: Passage, relevance: float | None = None) -> dict[str, float]:
    """The four signals of a rated passage (`relevance` instead of its own: a strip's)."""
    return {
        "relevance": passage.get("score", 0.0) if relevance is None else relevance,
        "completeness": passage.get("completeness", NEUTRAL),
        "recency": passage.get("recency", NEUTRAL),
        "authority": passage.get("authority", NEUTRAL),
    }


def rate(
    passages: Sequence[Passage],
    question: str,
    ctx: Context,
    weights: Weights,
    *,
    parts: Sequence[str] | None = None,
    today: date | None = None,
) -> list[Passage]:
    """The passages with their signals and composite confidence. `parts`: what
    completeness measures (default: the question's key terms)."""
    today = today or date.today()
    wanted = list(parts) if parts is not None else list(read(question).key_terms)
    rated: list[Passage] = []
    for p in passages:
        when, how = dated(p)
        value, kind = authority(p, ctx.confidence.authority)
        out: Passage = {
            **p,
            "kind": kind,
            "completeness": round(completeness(wanted, p["text"]), 4),
            "recency": round(recency(when, today, ctx.confidence.recency_half_life_days), 4),
            "authority": round(value, 4),
        }
        if when is not None:
            out["date"], out["dated_by"] = when.isoformat(), how  # type: ignore[typeddict-item]
        out["confidence"] = round(weights.of(signals_of(out)), 4)
        rated.append(out)
    return rated


def why_preferred(winner: Passage, loser: Passage, weights: Weights) -> str:
    """The signal that most sets the winner above the loser, in words."""
    a, b = signals_of(winner), signals_of(loser)
    gains = {name: getattr(weights, name) * (a[name] - b[name]) for name in SIGNALS}
    best = max(gains, key=lambda name: gains[name])
    if gains[best] <= 0:
        return "it comes first in the source priority"
    if best == "recency":
        theirs = loser.get("date") or "undated"
        return f"it is newer ({winner.get('date') or 'undated'}, the other {theirs})"
    if best == "authority":
        return (
            f"it is more authoritative ({winner.get('kind', '?')}, "
            f"the other {loser.get('kind', '?')})"
        )
    if best == "completeness":
        return "it covers more of the question"
    return "it is more relevant to the question"
