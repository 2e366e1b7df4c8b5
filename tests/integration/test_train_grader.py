"""crag train-grader: fitting, honest cross-validation, pair generation, and use by the graph."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import FakeEmbeddings
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

from crag.cli.main import main
from crag.context import Context
from crag.errors import ProviderError
from crag.grading.registry import make_grader
from crag.grading.registry import trained_path as model_path
from crag_lab.dataset import Pair, load_pairs
from crag_lab.fit import cross_validate, featurize, group_folds
from crag_lab.graders.features import FEATURES, FeatureGrader, FeatureModel
from crag_lab.graders.trained import save_trained_grader
from crag_lab.pairs import generate_pairs


@pytest.fixture(scope="module")
def dev_pairs(eval_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The labelled pairs of the first 12 dev questions (a small training file)."""
    rows = [json.loads(line) for line in (eval_dir / "grader_pairs.jsonl").open()]
    keep = list(dict.fromkeys(r["qid"] for r in rows))[:12]
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["qid"] in keep))
    return path


def test_logistic_model_learns_a_separable_rule() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5))
    y = (x[:, 2] > 0).astype(float)
    model = FeatureModel.fit(x, y)
    assert ((model.predict(x) >= 0.5) == (y > 0.5)).mean() > 0.95
    assert model.weights[2] == max(model.weights)
    with pytest.raises(ValueError):
        FeatureModel.from_dict({"features": ["other"], "weights": [1.0], "bias": 0.0})


def test_folds_never_split_a_question() -> None:
    groups = [f"q{i // 3}" for i in range(30)]
    folds = group_folds(groups, k=5, seed=1)
    assert sorted(np.concatenate(folds).tolist()) == list(range(30))
    for fold in folds:
        held = {groups[i] for i in fold}
        rest = {groups[i] for i in range(30) if i not in set(fold.tolist())}
        assert not held & rest


def test_training_on_a_small_file_gives_a_usable_saved_grader(
    dev_pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ["--home", str(tmp_path)]
    assert make_grader(Context(home=tmp_path), library=True).name == "similarity"
    # on these news pairs similarity ranks below chance: the trained model beats it held
    # out, so it is saved without --force
    assert main(["train-grader", "--pairs", str(dev_pairs), *home]) == 0
    out = capsys.readouterr().out
    assert "5-fold CV by question" in out and "not saved" not in out
    assert model_path(Context(home=tmp_path)).exists()
    assert make_grader(Context(home=tmp_path), library=True).name == "trained"

    assert main(["train-grader", "--pairs", str(dev_pairs), "--force", *home]) == 0
    assert "crag tune" in capsys.readouterr().out
    saved = json.loads(model_path(Context(home=tmp_path)).read_text())
    assert saved["metadata"]["pairs"] == len(load_pairs(dev_pairs))

    # grader=auto picks the trained one; these passages are search results
    grader = make_grader(Context(home=tmp_path), library=False)
    assert grader.name == "trained"
    assert isinstance(grader, FeatureGrader)
    question = "Which country won the most medals at the 2018 Winter Olympics?"
    scores = grader.score(
        question,
        [
            "Norway won the most medals at the 2018 Winter Olympics in PyeongChang, with 39.",
            "The 2018 Winter Olympics were held in PyeongChang, South Korea, in February.",
            "Gradient descent updates the parameters against the gradient of the loss.",
        ],
    )
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores[0] > scores[1] > scores[2]


def test_cross_validation_reports_held_out_figures(dev_pairs: Path) -> None:
    from crag.models.embeddings import make_embeddings

    data = featurize(FeatureGrader(make_embeddings("local")), load_pairs(dev_pairs))
    result = cross_validate(data, k=3, seed=0)
    assert 0.5 < result["auc"] <= 1.0
    assert 0.0 <= result["accuracy"] <= 1.0
    assert len(result["scores"]) == len(data.y)


def test_pairs_generated_from_the_library_are_read_as_library_chunks() -> None:
    """As the grade node reads them: a library states a fact once (no consensus)."""
    question = "How many requests per minute may a token make?"
    pairs: list[Pair] = [
        {"qid": qid, "question": question, "passage": text, "relevant": label, "origin": ""}
        for qid in ("searched", "library")
        for text, label in (("A token may make 120 requests per minute.", True), ("No.", False))
    ]
    data = featurize(FeatureGrader(FakeEmbeddings()), pairs, library_questions={"library"})
    factoid = data.x[:, FEATURES.index("factoid")].tolist()
    assert list(zip(data.groups, factoid, strict=True)) == [
        ("searched", 1.0),
        ("searched", 1.0),
        ("library", 0.0),
        ("library", 0.0),
    ]


def test_a_model_is_saved_only_if_it_beats_similarity_held_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Labels similarity gets backwards (here the on-topic passage is the wrong one): the
    trained model wins held out, so it is saved without --force; with the labels the
    right way round similarity ranks them perfectly, and nothing is saved."""
    topics = ["dropout", "pooling", "attention", "momentum", "embeddings", "convolution"]
    rows = []
    for i, topic in enumerate(topics):
        question = f"What is {topic} in deep learning?"
        for passage, relevant in (
            (f"{topic.capitalize()} in deep learning is explained here in detail.", False),
            (f"Deep learning uses {topic}; this page describes {topic}.", False),
            (f"The museum opens at nine on weekdays, item {i}.", True),
            (f"Bread rises when yeast ferments sugar, note {i}.", True),
        ):
            rows.append(
                {"qid": f"q{i}", "question": question, "passage": passage, "relevant": relevant}
            )
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({**r, "relevant": not r["relevant"]}) + "\n" for r in rows))
    home = ["--home", str(tmp_path)]
    assert main(["train-grader", "--pairs", str(plain), "--cv", "3", *home]) == 0
    assert "ranks no better than similarity" in capsys.readouterr().out
    assert make_grader(Context(home=tmp_path), library=True).name == "similarity"
    pairs = tmp_path / "odd.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["train-grader", "--pairs", str(pairs), "--cv", "0", "--home", str(tmp_path)]) == 0
    assert "not saved: without cross-validation" in capsys.readouterr().out
    assert make_grader(Context(home=tmp_path), library=True).name == "similarity"
    assert main(["train-grader", "--pairs", str(pairs), "--cv", "3", "--home", str(tmp_path)]) == 0
    assert "saved" in capsys.readouterr().out
    assert make_grader(Context(home=tmp_path), library=True).name == "trained"


def test_cross_validation_holds_out_each_source(
    eval_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = eval_dir / "grader_pairs.jsonl"
    argv = ["train-grader", "--pairs", str(pairs), "--no-save", "--home", str(tmp_path)]
    assert main([*argv, "--questions", str(eval_dir / "questions.jsonl")]) == 0
    out = capsys.readouterr().out
    for source in ("books", "rgb", "sklearn"):
        assert f"trained, {source} held out" in out and f"similarity, {source}" in out
    # held-out scores are judged as probabilities too
    eces = [float(m) for m in re.findall(r"ECE (\d\.\d+)\)", out)]
    assert len(eces) == 4 and all(0.0 <= e <= 1.0 for e in eces)


def test_a_corrupt_trained_grader_falls_back_cleanly(tmp_path: Path) -> None:
    ctx = Context(home=tmp_path)
    assert make_grader(ctx, library=True).name == "similarity"  # nothing trained yet
    save_trained_grader(ctx, FeatureModel([1.0] * len(FEATURES), 0.0).to_dict(), {})
    assert make_grader(ctx, library=True).name == "trained"
    # a model saved over another feature set (an older crag) is not used
    older = {**FeatureModel([1.0] * len(FEATURES), 0.0).to_dict(), "features": ["cos"]}
    save_trained_grader(ctx, older, {})
    assert make_grader(ctx, library=True).name == "similarity"
    with pytest.raises(ProviderError, match="retrain it with `crag train-grader`"):
        make_grader(Context(home=tmp_path, grader="trained"), library=True)
    model_path(ctx).write_text("{ truncated")
    assert make_grader(ctx, library=True).name == "similarity"
    with pytest.raises(ProviderError, match="unusable trained grader"):
        make_grader(Context(home=tmp_path, grader="trained"), library=True)


# --- pairs generated from a library -------------------------------------------------------

CHUNKS = [
    {"id": f"c{i}", "text": f"Topic {i} passage. " + "Filler text. " * 30, "metadata": {}}
    for i in range(12)
]
for i, chunk in enumerate(CHUNKS):
    chunk["metadata"] = {"source": f"book{i % 3}.pdf", "page": str(i)}


def question_writer(calls: list[str], fail_after: int | None = None) -> Any:
    def write(messages: Any) -> AIMessage:
        if fail_after is not None and len(calls) >= fail_after:
            raise KeyboardInterrupt
        passage = messages[-1].content
        topic = passage.split("passage.")[0].split()[-2:]
        calls.append(passage)
        return AIMessage(content=f"What is said about {' '.join(topic)}?")

    return RunnableLambda(write)


def neighbours(query: str, k: int) -> list[dict[str, Any]]:
    return CHUNKS[:k]


def test_generation_is_deterministic_for_a_seed_and_resumes(tmp_path: Path) -> None:
    calls: list[str] = []
    first = generate_pairs(
        CHUNKS, question_writer(calls), neighbours, tmp_path / "a.jsonl", count=5, seed=7
    )
    assert len(calls) == 5
    positives = [p for p in first if p["relevant"]]
    assert len(positives) == 5 and len(first) == 15  # two hard negatives each
    assert all(
        p["passage"] != q["passage"]
        for p in positives
        for q in first
        if not q["relevant"] and q["qid"] == p["qid"]
    )
    again = generate_pairs(
        CHUNKS, question_writer([]), neighbours, tmp_path / "b.jsonl", count=5, seed=7
    )
    assert again == first  # same seed, same pairs
    other = generate_pairs(
        CHUNKS, question_writer([]), neighbours, tmp_path / "c.jsonl", count=5, seed=8
    )
    assert other != first

    cache = tmp_path / "interrupted.jsonl"
    with pytest.raises(KeyboardInterrupt):
        generate_pairs(
            CHUNKS, question_writer([], fail_after=2), neighbours, cache, count=5, seed=7
        )
    assert len(cache.read_text().splitlines()) == 2  # what was done is kept
    resumed_calls: list[str] = []
    resumed = generate_pairs(
        CHUNKS, question_writer(resumed_calls), neighbours, cache, count=5, seed=7
    )
    assert len(resumed_calls) == 3  # only the missing chunks are asked again
    assert resumed == first
