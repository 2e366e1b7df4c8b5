"""A question is read once: `read` gives one value that every step reads."""

from __future__ import annotations

from crag.grading.constraints import constraints, subjects, when
from crag.grading.coverage import key_terms
from crag.grading.decompose import rule_parts
from crag.grading.question_form import read, slot, structured, time_constraint, time_sensitive

QUESTION = "How much did the Team plan cost in 2023, and what does batch norm vs layer norm do?"


def test_the_same_text_gives_the_same_reading_made_on_first_use() -> None:
    reading = read(QUESTION)
    assert read(QUESTION) is reading
    assert "constraints" not in vars(reading)  # nothing read before it is asked for
    first = reading.constraints
    assert vars(reading)["constraints"] is first and reading.constraints is first


def test_the_reading_holds_what_each_reader_of_the_question_read_before() -> None:
    reading = read(QUESTION)
    assert list(reading.parts) == rule_parts(QUESTION)
    assert list(reading.key_terms) == key_terms(QUESTION)
    assert list(reading.constraints) == constraints(QUESTION)
    assert list(reading.when) == when(QUESTION) and reading.when
    assert [c.value for c in reading.when] == ["2023"]
    assert list(reading.subjects) == subjects(QUESTION) and reading.subjects
    assert reading.slot == slot(QUESTION)
    assert reading.time_sensitive == time_sensitive(QUESTION) == "names the year 2023"
    assert reading.time_constraint == time_constraint(QUESTION)
    assert reading.structured is structured(QUESTION) is True


def test_a_version_at_a_sentences_end_is_read() -> None:
    from crag.grading.constraints import stated

    assert stated("This guide is for Lumen Server 2.4.", "version") == {"2.4"}
    assert stated("Lumen 2.4 limits requests.", "version") == {"2.4"}
    assert stated("Read lumen-2.4.txt for the rest.", "version") == set()  # a file name
