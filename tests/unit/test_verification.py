"""Verification: an answer's evidence must meet the question's constraints.

A passage about the right thing under the wrong constraint (another year, another
version, a neighbouring model) is declined, and the same passage under the right
constraint is answered. Whether crag answered is state, not words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from answering import answer_of
from langgraph.runtime import Runtime

from crag.context import Context
from crag.nodes.generate import finished_sentences, marked, renumbered, repointed, true_pages
from crag.nodes.web_search import of_the_question, with_constraints
from crag.state import Citation, Passage, State, Strip

CASES = [  # question, passage under another constraint, passage under the asked one
    (
        "Who was awarded the 2023 Nobel Prize in Literature?",
        "The 2022 Nobel Prize in Literature was awarded to Annie Ernaux.",
        "The 2023 Nobel Prize in Literature was awarded to Jon Fosse.",
    ),
    (
        "What changed in scikit-learn 1.5?",
        "Release highlights for scikit-learn 1.2: the set_output API was added.",
        "Release highlights for scikit-learn 1.5: tuned thresholds for classifiers.",
    ),
    (
        "How many parameters does GPT-5 have?",
        "GPT-3 has 175 billion parameters, a hundred times more than GPT-2.",
        "GPT-5 has an undisclosed number of parameters, its maker says.",
    ),
]


@pytest.fixture(autouse=True)
def library_never_names(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The library's vocabulary as its coverage index would answer, with no store: the
    terms a test adds to the returned set are ones the library never names."""
    never: set[str] = set()

    def missing(ctx: Context, collection: str, wanted: Sequence[str]) -> list[str]:
        return [w for w in wanted if w in never]

    monkeypatch.setattr("crag.nodes.verify.missing_terms", missing)
    monkeypatch.setattr("crag.nodes.verify.library_texts", lambda ctx, collection: [])
    return never


def answer(
    question: str,
    passage: str,
    parts: Sequence[str] = (),
    covered: bool = True,
    source: str = "news",
    **knobs: Any,
) -> dict[str, Any]:
    doc: Passage = {"id": "d1", "text": passage, "origin": "external", "source": source}
    strip: Strip = {"doc_id": "d1", "position": 0, "text": passage, "score": 0.9}
    state: State = {"question": question, "web_docs": [doc], "kept_strips": [strip]}
    state["parts"] = [{"text": p, "score": 0.9, "covered": covered} for p in parts]
    ctx = Context(home=Path("/nonexistent-crag-home"), chat_model="extractive", **knobs)
    return asyncio.run(answer_of(state, runtime=Runtime(context=ctx)))


@pytest.mark.parametrize(("question", "other", "asked"), CASES)
def test_the_wrong_constraint_is_declined_and_the_right_one_answered(
    question: str, other: str, asked: str
) -> None:
    wrong = answer(question, other)
    assert wrong["answered"] is False and wrong["support"] == "none"
    assert wrong["citations"] == [] and wrong["unsupported"]
    assert wrong["answer"].startswith("I could not find this")
    right = answer(question, asked)
    assert right["answered"] is True and right["support"] == "supported"
    assert right["answer"].startswith(asked) and right["citations"]


def test_the_decline_names_what_the_sources_speak_of() -> None:
    question, other, _ = CASES[0]
    assert "speak of 2022, not 2023" in answer(question, other)["answer"]
    _, neighbour, _ = CASES[2]
    # another numbered variant of the name is another thing, as another version is
    assert (
        "speak of gpt 3, gpt 2, not gpt 5"
        in answer("How many parameters does GPT-5 have?", neighbour)["answer"]
    )
    near = answer(question, other, near_miss_answers=True)
    assert near["answered"] is True and near["support"] == "partial"
    assert near["unsupported"] == ["2023"]
    assert near["answer"].startswith("The sources found speak of 2022, not 2023. The 2022")


def test_a_question_of_two_parts_is_answered_for_the_part_its_evidence_names(
    library_never_names: set[str],
) -> None:
    library_never_names.add("tf idf")
    question = "How do word2vec embeddings differ from TF-IDF weighted features?"
    passage = "word2vec learns dense word vectors from the words around each word."
    alone = answer(question, passage)  # one question: the evidence lacks a thing asked
    assert alone["answered"] is False
    parts = ["word2vec embeddings", "TF-IDF weighted features"]
    both = answer(question, passage, parts)
    assert both["answered"] is True and both["support"] == "partial"
    assert both["unsupported"] == ["tf idf"]
    assert both["answer"].startswith("The sources found do not mention tf idf. word2vec")
    # a part's year or version is a fact's constraint: missing, the part is unanswered
    versioned = "How do word2vec 2.0 embeddings differ from TF-IDF weighted features?"
    versioned_parts = ["word2vec 2.0 embeddings", "TF-IDF weighted features"]
    assert answer(versioned, passage, versioned_parts)["answered"] is False


def test_the_part_the_evidence_answers_stands_and_the_other_years_are_said() -> None:
    question = "What did the plan cost in the 2024 policy, and after the 2025 change?"
    passage = "The 2024 policy lists the plan at USD 6 per user per month."
    parts = [
        "What did the plan cost in the 2024 policy?",
        "What did it cost after the 2025 change?",
    ]
    result = answer(question, passage, parts)
    assert result["answered"] is True and result["support"] == "partial"
    assert result["unsupported"] == ["2025"]
    assert result["answer"].startswith("The sources found speak of 2024, not 2025. The 2024")
    # a part with nothing to check stands only where the library covers it
    plain = ["What did the plan cost?", "What did it cost after the 2025 change?"]
    assert answer(question, passage, plain)["answered"] is True
    assert answer(question, passage, plain, covered=False)["answered"] is False


def test_verification_can_be_switched_off() -> None:
    question, other, _ = CASES[0]
    assert answer(question, other, verify=False)["answered"] is True


def test_a_question_without_constraints_is_answered_from_its_evidence() -> None:
    result = answer("What does dropout do?", "Dropout zeroes random units during training.")
    assert result["answered"] is True and result["unsupported"] == []


def test_the_web_query_keeps_the_question_constraints() -> None:
    question = "Who was awarded the 2023 Nobel Prize in Literature?"
    assert with_constraints("nobel prize literature", question).split()[-1] == "2023"
    kept = "scikit-learn 1.5 changes"
    assert with_constraints(kept, "What changed in scikit-learn 1.5?") == kept


@pytest.mark.parametrize(
    ("reply", "question", "query"),
    [
        # the model's guess at the answer is no query of the question
        ("magnus carlsen 2021", "Who won the Masters golf tournament in 2021?", ""),
        ("coldstartproblem", "What is the cold start problem?", ""),  # words glued into one
        ("cold start problem", "What is the cold start problem?", "cold start problem"),
        ("normal_equation", "What is the normal equation?", "normal equation"),
        # a synonym beside the question's words is a rewrite; an identifier it names stays
        ("batch normalization", "Why use batch norm?", "batch normalization"),
        ("listen_port default", "What is listen_port's default?", "listen_port default"),
        # the question's words in other forms: unhyphenated, another suffix
        (
            "tfidf text classification",
            "Is TF-IDF useful to classify text?",
            "tfidf text classification",
        ),
        (
            "prices normal distribution",
            "Are prices distributed normally?",
            "prices normal distribution",
        ),
    ],
)
def test_the_model_query_must_be_made_of_the_question_words(
    reply: str, question: str, query: str
) -> None:
    assert of_the_question(reply, question) == query


def test_a_model_query_may_name_what_the_library_lacks_in_its_normal_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    import crag.nodes.web_search as rewriting

    model = FakeListChatModel(responses=["beta parameter adam optimizer"])
    monkeypatch.setattr(rewriting, "make_chat_model", lambda *a, **k: model)
    ctx = Context(home=Path("/nonexistent"), chat_model="local", redact_queries=False)
    state: State = {"question": "What does β control in Adam?", "missing_terms": ["beta"]}
    update = asyncio.run(rewriting.rewrite(state, runtime=Runtime(context=ctx)))
    assert update["web_query"] == "beta parameter adam optimizer"


def test_a_query_holds_no_word_that_stands_in_for_a_masked_secret() -> None:
    import crag.nodes.web_search as rewriting

    ctx = Context(home=Path("/nonexistent"), chat_model="extractive")
    state: State = {"question": "What does beta control in Adam? Reply to jane.doe@example.com"}
    update = asyncio.run(rewriting.rewrite(state, runtime=Runtime(context=ctx)))
    assert update["redacted"] == ["email"] and "email" not in update["web_query"].split()
    assert {"beta", "adam"} <= set(update["web_query"].split())


def test_a_reply_cut_off_in_a_loop_keeps_its_finished_sentences() -> None:
    looped = '{"answer": "Raise proxy_read_timeout [2]. It keeps it open. [1] [2] [3] [4] [9'
    assert (
        finished_sentences(looped, sources=3)
        == "Raise proxy_read_timeout [2]. It keeps it open. [1] [2] [3]"
    )
    # a sentence written again starts the loop; a citation given again at once is one
    again = '{"answer": "It drops units. [1], [2] [2] [2] It is off at test time. It drops units.'
    assert (
        finished_sentences(again, sources=3) == "It drops units. [1], [2] It is off at test time."
    )
    # an unfinished sentence, a decimal point, or no answer at all: nothing to keep
    assert finished_sentences('{"answer": "The limit is 3.5 per', sources=3) == ""
    assert finished_sentences("The limit is 120.", sources=3) == ""  # not the JSON asked for


def _source(n: int, page: str, text: str) -> tuple[Citation, list[Strip]]:
    citation: Citation = {"n": n, "origin": "library", "source": "guide.pdf", "page": page}
    return citation, [{"doc_id": f"d{n}", "position": n, "text": text, "score": 1.0}]


def test_a_figure_cited_to_the_wrong_page_is_cited_to_the_page_that_states_it() -> None:
    numbered = [
        _source(1, "1", "Lumen Server exposes an HTTPS API to its clients."),
        _source(2, "2", "It listens on TCP port 7420, set by the listen_port key."),
    ]
    answer, moved = repointed("The API listens on port 7420 [1]. It speaks HTTPS [1].", numbered)
    assert (answer, moved) == ("The API listens on port 7420 [2]. It speaks HTTPS [1].", 1)
    # a figure no source states, or one that two sources state, keeps its citation
    assert repointed("Port 9999 [1].", numbered) == ("Port 9999 [1].", 0)
    both = [*numbered, _source(3, "3", "Port 7420 again.")]
    assert repointed("Port 7420 [1].", both) == ("Port 7420 [1].", 0)
    # the answer's layout is kept
    assert (
        repointed("Ports:\n- 7420 [1]\n- HTTPS [1]", numbered)[0]
        == "Ports:\n- 7420 [2]\n- HTTPS [1]"
    )


def test_an_answer_citing_nothing_is_marked_with_the_sources_that_state_it() -> None:
    def source(n: int, name: str, text: str) -> tuple[Citation, list[Strip]]:
        strip: Strip = {"doc_id": name, "position": 0, "text": text, "score": 0.9}
        return {"n": n, "origin": "library", "source": name}, [strip]

    numbered = [
        source(1, "pricing_update.md", "From February 2025 the Team plan costs USD 8 a month."),
        source(2, "billing.pdf", "The Team plan costs USD 6 per user per month."),
        source(3, "install.pdf", "The server listens on port 7420."),
    ]
    answer = "The Team plan costs USD 6 per user per month. Prices may change again!"
    assert marked(answer, numbered) == (
        "The Team plan costs USD 6 per user per month [2]. Prices may change again!",
        1,
    )
    both = "The Team plan costs USD 8 a month from February 2025"  # no end mark
    assert marked(both, numbered) == (f"{both} [1]", 1)
    laid_out = "Before: the Team plan costs USD 6 per user per month.\n\nIt may change."
    assert marked(laid_out, numbered) == (
        "Before: the Team plan costs USD 6 per user per month [2].\n\nIt may change.",
        1,
    )
    cited_already = "The Team plan costs USD 6 [1]. It costs USD 8 from February 2025."
    assert marked(cited_already, numbered) == (cited_already, 0)  # the model's marks stand
    assert marked("Nothing here is stated.", numbered) == ("Nothing here is stated.", 0)
    steps = "To pay:\n1. The Team plan costs USD 6 per user per month... That is all!?"
    assert marked(steps, numbered) == (  # no mark for "1." or "That is all"
        "To pay:\n1. The Team plan costs USD 6 per user per month [2]... That is all!?",
        1,
    )
    spaced = "The Team plan costs USD 6 per user per month.  \n\nIt may change."
    assert marked(spaced, numbered)[0].startswith(
        "The Team plan costs USD 6 per user per month [2]."
    )


def test_the_sources_an_answer_lists_are_numbered_from_one() -> None:
    """An answer citing sources 2 and 4 of the context lists them as [1] and [2]."""
    two: Citation = {"n": 2, "origin": "library", "source": "guide.pdf", "page": "4"}
    four: Citation = {"n": 4, "origin": "web", "source": "forum", "url": "https://x.org"}
    text, listed = renumbered("Port 7420 [2]. Not 8080 [4]; see [2].", [two, four])
    assert text == "Port 7420 [1]. Not 8080 [2]; see [1]."
    assert [(c["n"], c["source"]) for c in listed] == [(1, "guide.pdf"), (2, "forum")]
    assert renumbered("A [1].", [{**two, "n": 1}]) == ("A [1].", [{**two, "n": 1}])
    # an index is not a citation: argv[2] stays as written
    assert renumbered("Read sys.argv[2] [2].", [two])[0] == "Read sys.argv[2] [1]."
    # numbered in the order the answer first names them; an unnamed one comes last
    one: Citation = {"n": 1, "origin": "library", "source": "intro.pdf", "page": "1"}
    text, listed = renumbered("Not 8080 [4]. Port 7420 [2].", [one, two, four])
    assert text == "Not 8080 [1]. Port 7420 [2]."
    assert [(c["n"], c["source"]) for c in listed] == [
        (1, "forum"),
        (2, "guide.pdf"),
        (3, "intro.pdf"),
    ]


def test_a_citation_moves_only_to_a_page_that_states_the_sentence_not_just_its_figures() -> None:
    claim = "By default the HTTPS API listens on TCP port 7420, set by the listen_port key"
    guide = _source(2, "2", f"{claim} in the [server] section.")
    trouble = _source(3, "3", "Error 7420: address in use. Check listen_port.")
    intro = _source(1, "1", "Lumen Server exposes an HTTPS API to its clients.")
    # the cited page states the claim: it stays, though another page repeats the figure
    assert repointed(f"{claim} [2].", [intro, guide, trouble]) == (f"{claim} [2].", 0)
    # a page that only repeats the figure is no better than the cited one
    assert repointed(f"{claim} [1].", [intro, trouble]) == (f"{claim} [1].", 0)
    # among two pages with the figure, the one stating the sentence takes the citation
    assert repointed(f"{claim} [1].", [intro, guide, trouble]) == (f"{claim} [2].", 1)


def test_the_query_keeps_what_the_library_lacks_but_not_a_masked_secrets_words() -> None:
    from crag.nodes.web_search import rewrite

    ctx = Context(home=Path("/nonexistent"), chat_model="extractive")
    state: State = {
        "question": "What does β control in Adam? Reply to jane.doe@example.com",
        "missing_terms": ["beta", "jane.doe"],  # coverage reports terms in normal form
    }
    update = asyncio.run(rewrite(state, runtime=Runtime(context=ctx)))
    assert "beta" in update["web_query"] and "jane" not in update["web_query"]
    assert update["redacted"] == ["email"]


def test_a_product_named_by_its_documentation_page_is_answered() -> None:
    # the page never writes the product's name; the guide it belongs to does
    got = answer(
        "In Lumen, which key in the config file sets the HTTPS port?",
        "The listen_port key of the [server] section sets the HTTPS port; it defaults to 7420.",
        source="lumen_installation_guide.pdf",
    )
    assert got["answered"] is True and got["support"] == "supported"


def test_a_numbered_variant_of_a_name_the_library_writes_plainly_is_answered() -> None:
    got = answer(
        "What problem do the residual connections of ResNet-50 solve?",
        "ResNet adds residual connections, so that very deep networks can still be trained.",
    )
    assert got["answered"] is True and got["support"] == "supported"
    # notation typed in ASCII meets its symbol, the subscript glued or apart
    typed = answer("What does beta1 control in Adam?", "In Adam, β_1 sets the momentum decay.")
    assert typed["answered"] is True


def test_another_quarter_is_declined_saying_what_was_found() -> None:
    got = answer(
        "What was the revenue in Q3 2024?", "In the second quarter of 2024 revenue was $3M."
    )
    assert got["answered"] is False and got["decline_reason"] == "constraints unmet"
    assert "speak of q2, not q3" in got["answer"]
    right = answer(
        "What was the revenue in Q3 2024?", "Revenue in the third quarter of 2024 was $4M."
    )
    assert right["answered"] is True
    # the quarter and the year asked must be one period: a Q3 of another year and a
    # figure of another quarter of this year do not add up to it
    mixed = answer(
        "What was the revenue in Q3 2024?",
        "Revenue in Q1 2024 was $3M. It had been $2M in Q3 2023.",
    )
    assert mixed["answered"] is False and mixed["decline_reason"] == "constraints unmet"


def test_a_name_the_sources_know_but_the_passage_does_not_state_is_weak_evidence(
    library_never_names: set[str],
) -> None:
    question = "My dataclass raises ValueError when a field defaults to a list. How do I fix it?"
    passage = "Mutable defaults such as lists must be given with field(default_factory=list)."
    got = answer(question, passage)
    # the library names ValueError elsewhere: answered, and the answer says it is partial
    assert got["answered"] is True and got["support"] == "partial"
    assert got["unsupported"] == ["valueerror"]
    library_never_names.add("valueerror")  # named nowhere: the question is about it
    got = answer(question, passage)
    assert got["answered"] is False and got["decline_reason"] == "constraints unmet"
    assert "do not mention valueerror" in got["answer"]


def test_arithmetic_and_sentence_openers_are_not_constraints() -> None:
    from crag.grading.constraints import constraints

    assert constraints("Why is 0.1 + 0.2 not exactly 0.3 in Python?") == []
    assert constraints("Whats the default recursion limit, and can I'm raise it?") == []
    assert [c.value for c in constraints("Is ResNet-50 deeper than AdaBoost?")] == [
        "resnet 50",
        "adaboost",
    ]
    got = answer(
        "Why is 0.1 + 0.2 not exactly 0.3 in Python?",
        "Binary floating point cannot represent 0.1 exactly, so the sum is not 0.3.",
    )
    assert got["answered"] is True and got["support"] == "supported"


def test_the_price_of_another_plan_is_declined_saying_what_was_found() -> None:
    # every name is one the library knows: only what the passage is about differs
    got = answer(
        "How much does the Lumen Team plan cost per user per month?",
        "The Lumen Business plan costs USD 12 per user per month, billed yearly.",
    )
    assert got["answered"] is False and "Business" in got["answer"]
    assert got["decline_reason"] == "constraints unmet"
    # the same figure, where the passage is about the plan asked about, is the answer
    same = answer(
        "How much does the Lumen Team plan cost per user per month?",
        "The Lumen Team plan costs USD 8 per user per month; the Business plan costs 12.",
    )
    assert same["answered"] is True and "USD 8" in same["answer"]
    # a word of the question in another role still names another plan in the evidence
    other = answer(
        "How much does the Pro plan cost for Enterprise customers?",
        "The Enterprise plan costs USD 99 per seat.",
    )
    assert other["answered"] is False and "Enterprise plan" in other["answer"]


@pytest.mark.parametrize(
    ("question", "passage"),
    [
        # a passage that names no other of the kind is weak evidence, not another thing
        ("What does the Lumen Team plan cost?", "Every plan costs USD 8 per user."),
        # a spelling of the name asked (a typo in the question), not another one
        (
            "When was Xenoblade Chronicles Definite Edition released?",
            "It came out in 2020 as Xenoblade Chronicles: Definitive Edition.",
        ),
        # "Edition released": a capitalised word before a verb picks nothing
        (
            "When was the Deluxe Edition released?",
            "It was Originally released in 2019 as the Deluxe set.",
        ),
        # the question names HTTPS itself: its port is no other port than the one asked
        (
            "Which TCP port does the Lumen server's HTTPS API listen on by default?",
            "The base URL uses the HTTPS port of the server: https://your-host:7420/api/v2/.",
        ),
    ],
)
def test_only_another_of_the_kind_asked_contradicts(question: str, passage: str) -> None:
    assert answer(question, passage)["answered"] is True


def test_what_the_library_never_writes_must_be_named_however_it_is_typed(
    library_never_names: set[str],
) -> None:
    """A one-part question about a thing the library never writes ("catboost", typed in
    lower case, as no name) is not answered by a passage about something else."""
    library_never_names.add("catboost")
    question = "how does catboost encode categorical features?"
    grades: Any = {"unknown": ["catboost"]}
    other = "HistGradientBoosting has native support for categorical features."
    doc: Passage = {"id": "d1", "text": other, "origin": "external", "source": "guide.md"}
    state: State = {"question": question, "web_docs": [doc], "grades": grades}
    state["kept_strips"] = [{"doc_id": "d1", "position": 0, "text": other, "score": 0.9}]
    ctx = Context(home=Path("/nonexistent-crag-home"), chat_model="extractive")
    got = asyncio.run(answer_of(state, runtime=Runtime(context=ctx)))
    assert got["answered"] is False and got["decline_reason"] == "constraints unmet"
    assert "do not mention catboost" in got["answer"]
    named = "CatBoost encodes categorical features with ordered target statistics."
    state["web_docs"] = [{**doc, "text": named}]
    state["kept_strips"] = [{"doc_id": "d1", "position": 0, "text": named, "score": 0.9}]
    assert asyncio.run(answer_of(state, runtime=Runtime(context=ctx)))["answered"] is True


def test_the_product_a_source_is_about_is_named_by_the_source() -> None:
    # the billing guide never repeats "Lumen": its file name does
    question = "How long do I have to ask for a full refund of an annual Lumen subscription?"
    passage = "Full refunds of Annual subscriptions are given within 30 days of purchase."
    assert answer(question, passage, source="lumen_billing_refunds.pdf")["answered"] is True


def test_a_decline_for_want_of_evidence_names_the_closest_passage() -> None:
    """Nothing kept: the decline names the nearest passage and its score. A library
    passage is no near miss where the library never names what is asked about."""
    book: Passage = {"id": "b1", "text": "x", "origin": "library", "source": "book.pdf"}
    library: Passage = {**book, "page": "8", "score": 0.81}
    web: Passage = {"id": "w1", "text": "y", "origin": "external", "source": "guide.md"}
    web["score"] = 0.52
    ctx = Context(home=Path("/nonexistent-crag-home"), chat_model="extractive")

    def decline(**state: Any) -> str:
        full: State = {"question": "How do I use pytest fixtures?", "kept_strips": [], **state}
        update = asyncio.run(answer_of(full, runtime=Runtime(context=ctx)))
        assert update["answered"] is False and update["decline_reason"] == "no evidence"
        return str(update["answer"])

    near = decline(docs=[{**library, "score": 0.55}], web_docs=[web])
    closest = "The closest passage found, book.pdf, page 8, scores 0.55; a source needs 0.60."
    assert near.endswith(f"({closest})")
    unknown = decline(docs=[library], web_docs=[web], grades={"unknown": ["pytest"]})
    assert "The library never mentions pytest. The closest passage found, guide.md," in unknown
    assert "book.pdf" not in unknown
    assert decline(web_error="timeout").endswith("(The external source failed: timeout)")


class RawReply:
    """A chat model whose structured reply could not be parsed: only the raw text."""

    def __init__(self, content: str) -> None:
        self.content = content

    def with_structured_output(self, schema: Any, include_raw: bool = False) -> RawReply:
        return self

    async def ainvoke(self, messages: Any) -> dict[str, Any]:
        from langchain_core.messages import AIMessage

        return {"raw": AIMessage(self.content), "parsed": None}


@pytest.mark.parametrize(
    ("reply", "level", "start"),
    [
        ('{"answer": "The port is 7420 [1]. It is set by listen_po', "INFO", "The port is 7420"),
        ("the port is", "WARNING", "(The language model's reply could not be read"),
    ],
)
def test_a_cut_reply_that_still_answers_is_no_warning(
    reply: str,
    level: str,
    start: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A small model cut at max_answer_tokens keeps its finished sentences: the user's
    terminal gets no warning for that; a reply with nothing to keep gets one."""
    from crag.nodes import generate

    monkeypatch.setattr(generate, "make_chat_model", lambda *a, **k: RawReply(reply))
    citation: Citation = {"n": 1, "origin": "library", "source": "guide.pdf", "page": "2"}
    strip: Strip = {"doc_id": "d", "position": 0, "text": "The port is 7420.", "score": 0.9}
    ctx = Context(home=Path("/nonexistent-crag-home"), chat_model="local")
    with caplog.at_level("INFO", logger="crag.nodes.generate"):
        text, _ = asyncio.run(generate.draft("Which port?", [(citation, [strip])], ctx))
    assert text is not None and text.startswith(start)
    said = [r.levelname for r in caplog.records if "not the JSON asked for" in r.getMessage()]
    assert said == [level]


def test_the_page_a_model_writes_after_a_mark_is_the_cited_sources() -> None:
    """The header above each source in the prompt is "[n] label"; a small model copies
    it, with a page of its own making (a section number read as a page)."""

    def source(n: int, name: str, page: str = "") -> tuple[Citation, list[Strip]]:
        citation: Citation = {"n": n, "origin": "library", "source": name}
        if page:
            citation["page"] = page
        return citation, [{"doc_id": f"{name}{page}", "position": 0, "text": "x", "score": 0.9}]

    numbered = [source(1, "guide.pdf", "2"), source(2, "guide.pdf", "3"), source(3, "notes.md")]
    written = (
        "Port 7420 [1] guide.pdf, page 4, where it says so. See [2] guide.pdf, page 4.1 "
        "Network Ports and [2] guide.pdf, page 2-3. Here [1] guide.pdf, page 2 it is. "
        "Not [1] other.pdf, page 9, nor [3] guide.pdf, page 5, nor x[1] guide.pdf, page 7."
    )
    assert true_pages(written, numbered) == (
        "Port 7420 [1] guide.pdf, page 2, where it says so. See [2] guide.pdf, page 3 "
        "Network Ports and [2] guide.pdf, page 3. Here [1] guide.pdf, page 2 it is. "
        "Not [1] other.pdf, page 9, nor [3] guide.pdf, page 5, nor x[1] guide.pdf, page 7.",
        3,
    )
    assert true_pages("Port 7420 [3].", numbered[2:]) == ("Port 7420 [3].", 0)  # no pages


@pytest.mark.parametrize(
    ("written", "final", "shown"),
    [
        (
            "Port 7420 [2]. Set by listen_port [4].",
            "Port 7420 [1]. Set by listen_port [2].",
            "(sources as listed below: [2] is [1], [4] is [2])",
        ),
        (
            "Port 7420 [2].",
            "Port 7420 [2]. Note: the sources disagree.",
            "crag> Port 7420 [2]. Note: the sources disagree.",
        ),
        (
            "Port 7420 is the default. It is set by listen_port. Both are documented.",
            "Port 7420 is the default [1]. It is set by listen_port. Both are documented [1] [3].",
            "(sources: sentence 1 [1]; sentence 3 [1] [3])",
        ),
    ],
)
def test_crag_chat_says_how_streamed_marks_read_against_the_sources_listed(
    written: str,
    final: str,
    shown: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The model's words stream with the context's numbers; the sources are listed as the
    answer numbers them. A renumbering alone, or marks added to an answer the model left
    unmarked, is said in a line, not the answer again."""
    import io

    import crag.api
    from crag.cli import chat
    from crag.cli.main import main

    def streamed(line: str, *, on_token: Any, **_: Any) -> dict[str, Any]:
        on_token(written)
        return {}

    cited = [{"n": 1, "origin": "library", "source": "guide.pdf", "page": "2"}]
    monkeypatch.setattr(crag.api, "ask", streamed)
    monkeypatch.setattr(crag.api, "summary", lambda state: {"answer": final, "citations": cited})
    monkeypatch.setattr(chat, "check_before_asking", lambda ctx: None)
    monkeypatch.setattr("sys.stdin", io.StringIO("Which port?\n"))
    assert main(["chat", "--chat-model", "local", "--home", "/nonexistent-crag-home"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"crag> {written}\n") and "[1] guide.pdf, page 2" in out
    assert out.splitlines()[1] == shown  # the words once more only where they changed
