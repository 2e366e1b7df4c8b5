"""`crag gen-questions` end to end on a small corpus, with a scripted chat model: rows
with their labels, and a second run that resumes instead of asking again."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from crag.cli.main import main
from crag_lab import corpora
from crag_lab.cli import gen_questions
from crag_lab.construct import read_rows

PAGE = (
    "The frobnicate command rebuilds the cache of a project. It reads the settings file\n"
    "first and then every module in turn. By default frobnicate keeps seven old caches\n"
    "on disk. The --prune option removes caches older than a week. Each run writes a\n"
    "log line with the time it took."
)
REPLY = (
    "Q: How many old caches does frobnicate keep on disk by default?\nA: seven\n\n"
    "Q: Which option of frobnicate removes caches older than a week?\nA: --prune\n\n"
    "Q: What does the passage describe?\nA: a command"
)


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    folder = tmp_path / "docs"  # documents ask about, then edited by a test
    folder.mkdir()
    for i in range(3):
        (folder / f"page{i}.txt").write_text(f"{PAGE}\n\n{PAGE.replace('seven', str(i))}")
    corpus = corpora.Corpus(
        "tiny", "tiny-doc", lambda: sorted(folder.glob("*.txt")), Path.read_text, "test"
    )
    monkeypatch.setitem(corpora.CORPORA, "tiny", corpus)
    asked: list[Any] = []

    def model(args: argparse.Namespace, ctx: Any) -> FakeListChatModel:
        args.settings = {"prompt": gen_questions.PROMPT_VERSION}
        asked.append(args)
        return FakeListChatModel(responses=[REPLY] * 50)

    monkeypatch.setattr(gen_questions, "_model", model)
    return asked


def test_rows_are_labelled_by_construction_and_a_rerun_resumes(
    tiny: list[Any], tmp_path: Path
) -> None:
    out = tmp_path / "data"
    argv = ["gen-questions", "--out", str(out), "--corpora", "tiny", "--slots", "1"]
    assert main([*argv, "--target", "3"]) == 0
    rows, _ = read_rows(out / "questions.jsonl.gz")
    attempts, _ = read_rows(out / "attempts.jsonl.gz")
    assert len(rows) >= 3 and len(attempts) == len({r["chunk_id"] for r in attempts})
    for row in rows:
        assert row["settings"] == {"prompt": gen_questions.PROMPT_VERSION}
        assert row["answer"] in row["sentence"] and row["answer"] not in row["negative"]
        assert row["sentence"] in row["chunk"]
        # spaced alike: the positive and the deletion negative differ only by the answer
        assert row["chunk"].replace(row["sentence"], "").split() == row["negative"].split()
    assert {r["answer"] for r in rows} >= {"--prune"}
    assert all("names the passage" in a["refused"] for a in attempts)
    # met: the second run neither loads a model nor writes
    size = (out / "questions.jsonl.gz").stat().st_size
    assert main([*argv, "--target", "3"]) == 0
    assert len(tiny) == 1 and (out / "questions.jsonl.gz").stat().st_size == size
    # raised: only chunks not yet tried are asked about
    assert main([*argv, "--target", "100"]) == 0
    again, _ = read_rows(out / "attempts.jsonl.gz")
    ids = [a["chunk_id"] for a in again]
    assert len(ids) == len(set(ids)) > len(attempts)
    # rebuilt from the kept replies, without the model: the same rows
    before = read_rows(out / "questions.jsonl.gz")[0]
    (out / "questions.jsonl.gz").unlink()
    assert main([*argv, "--rebuild"]) == 0
    assert read_rows(out / "questions.jsonl.gz")[0] == before
    assert len(tiny) == 2  # the two runs that asked; the rebuild loaded no model
    # a document changed since: its attempts go, so that its chunks are asked again
    page = tmp_path / "docs" / "page0.txt"
    page.write_text(page.read_text().replace("seven", "nine"))
    assert main([*argv, "--rebuild"]) == 0
    left = [a["chunk_id"] for a in read_rows(out / "attempts.jsonl.gz")[0]]
    assert left and not [i for i in left if "page0" in i]
    assert len(left) == len(ids) - sum("page0" in i for i in ids)


def test_a_sample_shows_rows_to_check_by_reading(
    tiny: list[Any], tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "data"
    argv = ["gen-questions", "--out", str(out), "--corpora", "tiny", "--slots", "1"]
    assert main([*argv, "--target", "4"]) == 0
    capsys.readouterr()
    assert main([*argv, "--sample", "3", "--seed", "1"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("\nQ: ") + shown.startswith("Q: ") == 3
    assert shown.count("the answer as written is in the negative: no") == 3
    assert main([*argv, "--sample", "3", "--seed", "1"]) == 0
    assert capsys.readouterr().out == shown  # the same rows for the same seed
    # a member half written by a run still going is read past, and left as it is
    store = out / "questions.jsonl.gz"
    with store.open("ab") as f:
        f.write(b"\x1f\x8b half a member")
    size = store.stat().st_size
    assert main([*argv, "--sample", "3", "--seed", "1"]) == 0
    assert capsys.readouterr().out == shown and store.stat().st_size == size


def test_a_rebuild_with_nothing_tried_changes_nothing(tiny: list[Any], tmp_path: Path) -> None:
    out = tmp_path / "empty"
    assert main(["gen-questions", "--out", str(out), "--corpora", "tiny", "--rebuild"]) == 1
    assert not (out / "questions.jsonl.gz").exists()


def test_an_unknown_corpus_is_one_line(capsys: Any) -> None:
    assert main(["gen-questions", "--corpora", "bogus", "--sample", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown corpora bogus: use git" in err


def test_a_missing_package_is_named(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    empty = corpora.Corpus("gone", "gone-doc", list, Path.read_text, "test")
    monkeypatch.setitem(corpora.CORPORA, "gone", empty)
    assert main(["gen-questions", "--corpora", "gone"]) != 0
    assert "apt-get install gone-doc" in capsys.readouterr().err
