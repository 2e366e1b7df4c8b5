"""The feature evaluator (`grader=features`, the lab's): a few general signals and a
logistic model.

Embedding similarity alone rates "same topic" like "answers it" (AUC 0.62 on the
dev pairs). Two cheap signals separate them far better:

- answer type: a factoid question (who / when / what year / how many ...) is only
  answered by a passage holding a span of that type (a name, date, year, number)
  that the question itself does not contain, near the question's own words;
- consensus: independent sources that answer a question tend to name the same
  answer, so a candidate span shared by other retrieved passages is evidence (a
  shared month and day most of all). A name that restates the question ("Oscars"
  for "Academy Awards", close to it in embedding space) is shared by every passage
  on the topic, so it is not taken for an answer;
- lift: for an open question, the passage that explains the topic stands above the
  others retrieved with it, which only touch it.

All passages of one question are scored together (consensus needs the batch), from
one embedding call for the passages and one for the candidate names. The model is a
logistic regression over these features, so its score is a probability in [0, 1]
and the verdict thresholds keep their meaning.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.dates import YEAR
from crag.grading.graders import QuestionSimilarity
from crag.grading.outcome import LogisticModel
from crag.grading.question_form import question_type
from crag.text import MONTHS, bare_word, clauses, normalize, stem, words
from crag.text import STOPWORDS as STOP

FEATURES = ("cos", "cos_open", "consensus", "ans_near", "factoid", "date_consensus", "lift_open")

_NUM = re.compile(r"\d+(\.\d+)?|\d{1,3}(,\d{3})+")
_DAY = re.compile(r"\d{1,2}(st|nd|rd|th)?")
_MONTH_DAY = re.compile(r"[a-z]{3} \d+")
# MiniLM cosine of a name with the question above which the name restates the question
TOPICAL_NAME_COS = 0.5
_KINDS = {
    "person": {"cap"},
    "place": {"cap"},
    "entity": {"cap"},
    "year": {"year"},
    "date": {"date", "year"},
    "num": {"num"},
}


@dataclass
class _Batch:
    """Counts over the texts graded together: which words are names (capitalised
    mid-sentence more often than not), without any corpus-wide statistics."""

    cap: Counter[str] = field(default_factory=Counter)
    low: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, texts: Sequence[str]) -> _Batch:
        batch = cls()
        for text in texts:
            for sentence in clauses(text):
                for w in words(sentence)[1:]:
                    if w[0].isupper():
                        batch.cap[w.lower()] += 1
                    elif w[0].islower():
                        batch.low[w.lower()] += 1
        return batch

    def is_name(self, word: str) -> bool:
        low = word.lower()
        if low in STOP or low in MONTHS or not word[0].isupper():
            return False
        return self.cap[low] + 1 > 2 * self.low[low]


def _day(word: str) -> int:
    """12th -> 12, so "Nov. 12", "November 12th" and "12 November" are one candidate."""
    return int(word.rstrip("stndrh"))


def _candidates(sentence: str, asked: set[str], kinds: set[str], batch: _Batch) -> set[str]:
    """Spans of the expected answer kind that the question does not already contain."""
    found: set[str] = set()
    tokens = words(sentence)
    for i, w in enumerate(tokens):
        low = w.lower()
        if low in asked or stem(w) in asked:
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if ("year" in kinds and YEAR.fullmatch(w)) or ("num" in kinds and _NUM.fullmatch(w)):
            found.add(w)
        elif "date" in kinds and low in MONTHS and _DAY.fullmatch(nxt):
            found.add(f"{low[:3]} {_day(nxt)}")
        elif "date" in kinds and _DAY.fullmatch(w) and nxt.lower() in MONTHS and nxt != "may":
            found.add(f"{nxt.lower()[:3]} {_day(w)}")
        elif "cap" in kinds and w[0].isupper() and batch.is_name(w):
            found.add(bare_word(w))  # Facebook's -> facebook
    return found


def extract_features(
    question: str,
    passages: Sequence[str],
    cosines: Sequence[float],
    name_similarity: Callable[[Sequence[str]], np.ndarray] | None = None,
    *,
    library: bool = False,
) -> np.ndarray:
    """One row of FEATURES per passage; all passages of one question at once.

    `name_similarity` (the question's cosine with each candidate name) drops names
    that restate the question ("Oscars" for "Academy Awards"): they are its topic,
    shared by every passage, not its answer.

    Passages of a `library` are read as for an open question. The factoid signals
    (an answer-typed span that other passages confirm) were learned from search
    results, where independent pages repeat a fact; a library states a fact once, so
    read that way every factoid it answers in one place would look unanswered ("How
    much does the Business plan cost per year?": 0.45 for the page that says it).
    """
    qtype = "other" if library else question_type(question)
    kinds = _KINDS.get(qtype, set())
    factoid = 1.0 if kinds else 0.0
    qwords = words(question)
    asked = {w.lower() for w in qwords} | {stem(w) for w in qwords}
    content = list(dict.fromkeys(stem(w) for w in qwords if w.lower() not in STOP))
    batch = _Batch.of([question, *passages])
    # per passage, per sentence: (candidate spans, share of the question's words)
    found_in: list[list[tuple[set[str], float]]] = []
    for passage in passages:
        sentences = []
        for sentence in clauses(passage):
            here = _candidates(sentence, asked, kinds, batch) if kinds else set()
            if here:
                stems = {stem(w) for w in words(sentence)}
                overlap = sum(c in stems for c in content) / len(content) if content else 0.0
                sentences.append((here, overlap))
        found_in.append(sentences)
    topical = _topical({c for s in found_in for here, _ in s for c in here}, name_similarity)
    spans = [{c for here, _ in s for c in here - topical} for s in found_in]
    near = [max((o for here, o in s if here - topical), default=0.0) for s in found_in]
    shared = Counter(c for found in spans for c in found)
    others = max(len(passages) - 1, 1)
    # lift: how far a passage stands above the others retrieved with it. For an open
    # question ("what is X?") the passage that explains X beats those that only touch
    # X; unlike a z-score it stays small when all are alike (nothing answers).
    lift = (np.asarray(cosines, dtype=np.float64) - float(np.mean(cosines))) * (1.0 - factoid)
    rows = []
    for cos, found, ans_near, lift_open in zip(cosines, spans, near, lift, strict=True):
        consensus = max((shared[c] - 1 for c in found), default=0) / others
        # a shared month and day is far rarer by chance than a shared year or name
        dates = max((shared[c] - 1 for c in found if _MONTH_DAY.fullmatch(c)), default=0)
        rows.append(
            [cos, cos * (1.0 - factoid), consensus, ans_near, factoid, dates / others, lift_open]
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(passages), len(FEATURES))


def _topical(
    candidates: set[str], similarity: Callable[[Sequence[str]], np.ndarray] | None
) -> set[str]:
    names = sorted(c for c in candidates if c[0].isalpha() and not _MONTH_DAY.fullmatch(c))
    if similarity is None or not names:
        return set()
    return {n for n, cos in zip(names, similarity(names), strict=True) if cos >= TOPICAL_NAME_COS}


@dataclass
class FeatureModel(LogisticModel):
    """The logistic model over the evaluator's `FEATURES`."""

    features: tuple[str, ...] = FEATURES


# Fitted on the d2l dev library's labelled pairs (news snippets and technical books);
# `crag train-grader` refits these on a user's own labels.
DEFAULT_MODEL = FeatureModel(weights=[1.19, 2.26, 5.21, 0.92, -1.37, 2.05, 2.58], bias=-1.52)


class FeatureGrader:
    """The evaluator above, over any LangChain embeddings."""

    name = "features"

    def __init__(
        self, embeddings: Embeddings, model: FeatureModel | None = None, *, library: bool = False
    ) -> None:
        self.embeddings = embeddings
        self.model = model or DEFAULT_MODEL
        self.library = library  # grading library chunks, not search results

    def features(self, question: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros((0, len(FEATURES)))
        similarity = QuestionSimilarity(self.embeddings, question)
        cosines = list(similarity(passages))  # embedded as written (the store's vectors)
        return extract_features(
            normalize(question),
            [normalize(p) for p in passages],
            cosines,
            similarity,
            library=self.library,
        )

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        return [float(s) for s in self.model.predict(self.features(question, passages))]

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        return await asyncio.to_thread(self.score, question, passages)
