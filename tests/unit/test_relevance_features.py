"""The feature grader's signals, on hand-made passages (cosines are given, but for one
test of the local model's scale)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from crag.grading.graders import QuestionSimilarity
from crag.grading.question_form import question_type
from crag.models.embeddings import make_embeddings
from crag.text import clauses, split_date_stamps
from crag_lab.graders.features import (
    DEFAULT_MODEL,
    FEATURES,
    TOPICAL_NAME_COS,
    extract_features,
)

COL = {name: i for i, name in enumerate(FEATURES)}


def test_question_types() -> None:
    assert question_type("When does season 3 of The Crown premiere?") == "date"
    assert question_type("Who directed The Avengers?") == "person"
    assert question_type("How much did Google pay for YouTube?") == "num"
    assert question_type("What is the bias-variance trade-off?") == "other"
    # "when should/would ..." asks for the conditions of a choice, not for a date
    assert question_type("When should grid search be used?") == "other"
    assert question_type("When would you choose K-means over DBSCAN?") == "other"
    assert question_type("When was the first transformer paper published?") == "date"
    # the question's own interrogative decides: an embedded "how many" asks nothing
    assert question_type("How do we know how many trees we need?") == "other"
    assert question_type("Why does the price of a plan rise?") == "other"
    assert question_type("How many trees does a random forest need?") == "num"


def test_abbreviations_do_not_end_a_sentence() -> None:
    text = "It returns on Thursday, Nov. 12 at 9 p.m. J. Smith said so. Next!"
    assert clauses(text) == [
        "It returns on Thursday, Nov. 12 at 9 p.m.",
        "J. Smith said so.",
        "Next!",
    ]


def test_one_date_written_three_ways_is_one_shared_answer() -> None:
    question = "When does season 3 of The Crown premiere?"
    passages = [
        "The third season premieres on Sunday, Nov. 17 on Netflix.",
        "Season 3 of The Crown premiered on 17 November 2019.",
        "Netflix will release the season on November 17th.",
        "Filming of the season began in July 2018 in London.",
    ]
    x = extract_features(question, passages, [0.6] * 4)
    assert list(x[:3, COL["date_consensus"]]) == [2 / 3] * 3
    assert list(x[:, COL["lift_open"]]) == [0.0] * 4  # a factoid question: no lift
    assert x[3, COL["date_consensus"]] == 0.0
    # in "17 may arrive" may is a verb, not the month of "May 17"
    texts = ["Episode 17 may arrive late.", "It premieres on May 17."]
    modal = extract_features(question, texts, [0.6, 0.6])
    assert modal[:, COL["date_consensus"]].tolist() == [0.0, 0.0]
    scores = DEFAULT_MODEL.predict(x)
    assert min(scores[:3]) > scores[3]


def test_possessive_and_plain_names_agree() -> None:
    question = "Who acquired Instagram?"
    passages = [
        "Facebook's $1 billion acquisition of Instagram changed Big Tech.",
        "Instagram was bought by Facebook in 2012.",
        "Instagram launched in October 2010 as an iPhone app.",
    ]
    x = extract_features(question, passages, [0.7, 0.7, 0.7])
    assert x[0, COL["consensus"]] == x[1, COL["consensus"]] == 0.5
    assert x[2, COL["consensus"]] == 0.0


def test_scores_are_probabilities_and_open_questions_use_similarity() -> None:
    question = "What is the bias-variance trade-off?"
    x = extract_features(question, ["a", "b"], [0.8, 0.2])
    assert x[:, COL["factoid"]].tolist() == [0.0, 0.0]
    assert np.allclose(x[:, COL["lift_open"]], [0.3, -0.3])  # above / below the batch mean
    scores = DEFAULT_MODEL.predict(x)
    assert np.all((scores >= 0) & (scores <= 1)) and scores[0] > scores[1]


def test_a_library_page_that_states_a_figure_once_is_read_as_for_an_open_question() -> None:
    """Search results that agree on a figure confirm it; a library states it once, so
    its chunks are scored without the factoid signals, which would call it unanswered."""
    question = "How much does the Business plan cost per user per year?"
    passages = [
        "The Business plan costs USD 11 per user per month, or USD 110 per user per year.",
        "Registered schools receive a 40 percent discount on the Team and Business plans.",
        "Payment is taken by credit card or SEPA direct debit.",
    ]
    cosines = [0.62, 0.45, 0.30]
    searched = extract_features(question, passages, cosines)
    library = extract_features(question, passages, cosines, library=True)
    assert searched[:, COL["factoid"]].tolist() == [1.0] * 3
    assert library[:, COL["factoid"]].tolist() == [0.0] * 3
    assert library[:, COL["consensus"]].tolist() == [0.0] * 3
    open_reading = extract_features("What is the Business plan?", passages, cosines)
    assert np.allclose(library, open_reading)  # the same signals as an open question
    searched_scores = DEFAULT_MODEL.predict(searched)
    library_scores = DEFAULT_MODEL.predict(library)
    assert searched_scores[0] < 0.5 < library_scores[0]  # unanswered as a search result
    assert library_scores.argmax() == 0


def test_a_name_that_restates_the_question_is_its_topic_not_its_answer() -> None:
    question = "Which movie won Best Picture at the 90th Academy Awards?"
    passages = [
        "The Shape of Water won at the Oscars on Sunday.",
        "The Shape of Water took the top prize at the Oscars.",
        "Jimmy Kimmel hosted the Oscars again this year.",
        "Kimmel joked about the Oscars envelope mix-up.",
    ]
    asked: list[str] = []

    def similarity(names: Sequence[str]) -> np.ndarray:
        asked.extend(names)
        return np.array([0.63 if n == "oscars" else 0.2 for n in names])

    plain = extract_features(question, passages, [0.6] * 4)
    topical = extract_features(question, passages, [0.6] * 4, similarity)
    # every passage names the Oscars, so without the check all share an "answer"
    assert plain[:, COL["consensus"]].tolist() == [1.0] * 4
    # with it, only the shared spans that are not the topic count
    assert topical[:, COL["consensus"]].tolist() == [1 / 3, 1 / 3, 1 / 3, 1 / 3]
    assert "oscars" in asked and not any(n[0].isdigit() for n in asked)


def test_the_local_model_places_a_restating_name_above_the_threshold() -> None:
    """TOPICAL_NAME_COS is a MiniLM cosine: the topic word must clear it, the answer not."""
    similarity = QuestionSimilarity(
        make_embeddings("local"), "Which movie won Best Picture at the 90th Academy Awards?"
    )
    oscars, answer = similarity(["oscars", "shape"])
    assert oscars >= TOPICAL_NAME_COS > answer


def test_a_snippet_date_is_metadata_not_text() -> None:
    """Every result of one day would otherwise seem to agree on a date."""
    snippet = (
        "Feb 25, 2018 ... Norway won.\n\nSep 15, 2017 ... The Games open.\nOn Feb 9, 2018 ... x"
    )
    text, dates = split_date_stamps(snippet)
    assert dates == ["Feb 25, 2018", "Sep 15, 2017"]
    assert text == "Norway won.\n\nThe Games open.\nOn Feb 9, 2018 ... x"
    assert split_date_stamps("Plain text.") == ("Plain text.", [])
