"""The coverage check finds what a library names, however it is typeset, and only that.

Books are typeset (β, 3×3, Gauss–Newton, ligatures); people type questions in ASCII
(beta, 3x3, Gauss-Newton). Terms sampled from an ingested library's own text and
written the ways people write them must never be reported missing; invented terms
must be.
"""

from __future__ import annotations

import random
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
from fakes import FakeEmbeddings

from crag.context import Context
from crag.grading.coverage import is_specific, key_terms, specific_terms
from crag.ingest.indexer import ingest_path
from crag.retrieval.library import sourced_texts
from crag.retrieval.library_index import library_index, missing_terms

BOOKS = ("02_multilayer_perceptrons.pdf", "07_mathematics_appendix.pdf")
# A token of the raw text: letters (any script), digits and the marks inside terms.
_RAW_TERM = re.compile(r"[^\W_](?:[\w×\-–—−.'’]*[^\W_])?")


@pytest.fixture(scope="module")
def library(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Context:
    folder = tmp_path_factory.mktemp("two_books")
    for name in BOOKS:
        shutil.copy(books_dir / name, folder / name)
    ctx = Context(home=tmp_path_factory.mktemp("coverage_home"))
    assert ingest_path(ctx, folder, embeddings=FakeEmbeddings()).exit_code == 0
    return ctx


def _ascii(term: str) -> str:
    """As a person types it: Greek letters by name, × as x, any dash as "-"."""
    out = []
    for ch in unicodedata.normalize("NFKC", term):
        name = unicodedata.name(ch, "")
        if name.startswith("GREEK") and " LETTER " in name:
            out.append(name.rsplit(" ", 1)[-1].lower().replace("lamda", "lambda"))
        elif ch in "×✕":
            out.append("x")
        elif ch in "–—−‐‑":
            out.append("-")
        elif ch in "’":
            out.append("'")
        else:
            out.append(ch)
    return "".join(out)


def _variants(term: str, rng: random.Random) -> list[str]:
    typed = _ascii(term)
    forms = [term, typed, typed.lower(), typed.upper(), typed.capitalize()]
    if "-" in typed:
        forms += [typed.replace("-", " "), typed.replace("-", "")]
    if typed.isalpha() and len(typed) > 3:
        forms.append(typed + "s")
    return [rng.choice(forms), typed]


def test_terms_of_the_library_are_never_reported_missing(library: Context) -> None:
    rng = random.Random(0)
    sourced, _ = sourced_texts(library, "books")
    raw_terms = sorted({t for _, text in sourced for t in _RAW_TERM.findall(text) if len(t) > 2})
    typeset = [t for t in raw_terms if not t.isascii()]
    assert len(typeset) > 50  # the books are typeset: Greek letters, ×, en dashes
    sample = typeset + rng.sample([t for t in raw_terms if t.isascii()], 1200)
    asked = [v for term in sample for v in _variants(term, rng)]
    assert len(sample) >= 1000
    terms = sorted({k for v in asked for k in key_terms(f"What is {v}?")})
    assert missing_terms(library, "books", terms) == []


def test_invented_terms_are_reported_missing(library: Context) -> None:
    rng = random.Random(1)
    invented = [
        "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(rng.randint(6, 10)))
        for _ in range(200)
    ]
    invented += ["Zorblax-Quindle", "TransFlorbulator", "hyper-vexnet", "qux3000"]
    assert missing_terms(library, "books", invented) == invented


def test_comparison_mentions_count_typeset_spellings(library: Context) -> None:
    index = library_index(library, "books")
    counts = {p: index.most_mentions(p) for p in ["multilayer perceptron", "Zorblax"]}
    assert counts["multilayer perceptron"] >= 2
    assert counts["Zorblax"] == 0


def test_ordinary_hyphenated_english_is_not_a_specific_term() -> None:
    for everyday in ("trade-off", "well-known", "real-world", "state-of-the-art", "long-term"):
        assert not is_specific(everyday), everyday
    for named in ("TF-IDF", "AdaBoost", "ResNet-50", "nginx", "word2vec", "Elastic-Net"):
        assert is_specific(named), named


def test_a_name_made_of_everyday_words_is_specific_where_it_is_capitalised() -> None:
    assert specific_terms("What is the monthly price of the Nebula Ultra plan?") == [
        "Nebula",
        "Ultra",
    ]
    assert specific_terms("Which team won Super Bowl LVIII?") == ["Super", "Bowl", "LVIII"]
    # a sentence's first word is capitalised whatever it is; lower case is vocabulary
    assert specific_terms("Prices of the team plan: what are they?") == []
    assert specific_terms("What is the monthly price of the nebula plan?") == []
    # typed in capitals or Title Case, a capital marks no name: everyday words stay so
    assert specific_terms("WHAT IS THE MONTHLY PRICE OF THE TEAM PLAN?") == []
    assert specific_terms("What Is The Monthly Price Of The Team Plan?") == []
    assert specific_terms("Explain Nebula.") == ["Nebula"]
    # a name's possessive is the name
    assert specific_terms("What is the Nebula Ultra's monthly price?") == ["Nebula", "Ultra"]


def test_a_capitalised_name_the_library_never_mentions_is_missing(library: Context) -> None:
    question = "How is the Nebula Ultra network trained? What does a Perceptron compute?"
    assert missing_terms(library, "books", specific_terms(question)) == ["Nebula", "Ultra"]


def test_a_misspelt_everyday_word_names_nothing() -> None:
    # one typing slip from an everyday word: a letter dropped, swapped, changed, added
    for slip in ("enviroment", "recieve", "seperate", "algorithmn"):
        assert specific_terms(f"how do i {slip} this for my project") == [], slip
    # names stay names: capitalised, with digits, short, or no slip from a word
    assert specific_terms("How do I train XGBoost on word2vec features with nginx?") == [
        "XGBoost",
        "word2vec",
        "nginx",
    ]


def test_a_descriptive_compound_is_checked_by_the_thing_it_names(library: Context) -> None:
    question = "Will my CPU-heavy or GPU-accelerated code run faster? Is Elastic-Net better?"
    assert specific_terms(question) == ["CPU", "GPU", "Elastic-Net"]
    # the books never write "CPU-heavy"; they do name the CPU and the GPU
    assert missing_terms(library, "books", ["CPU-heavy", "CPU", "GPU"]) == ["CPU-heavy"]
