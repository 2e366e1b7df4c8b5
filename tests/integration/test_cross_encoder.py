"""`grader=cross-encoder:<model>`: a hub-style cross-encoder, built and saved here (a tiny
BERT with random weights), loaded through sentence-transformers and scoring pairs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from requires import require_module

from crag.api import ask, summary
from crag.context import Context
from crag.errors import ProviderError
from crag.grading.registry import make_grader, make_strip_grader

HUB = "make test (pip install torch==2.13.0 sentence-transformers)"
torch = require_module("torch", HUB)
transformers = require_module("transformers", HUB)
require_module("sentence_transformers", HUB)

QUESTION = "Which TCP port does the Lumen server's HTTPS API listen on by default?"
PASSAGES = ["Lumen listens on port 7420 by default.", "Refunds take 30 days.", "The API key."]
WORDS = (
    "which tcp port does the lumen server's https api listen on by default refunds take 30 "
    "days key 7420"
).split()


def build(folder: Path, labels: int, bias: float = 0.0) -> Path:
    """A tiny cross-encoder saved as the hub has them: config, weights, tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    transformers.BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True).save_pretrained(
        folder
    )
    torch.manual_seed(labels)
    config = transformers.BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=labels,
    )
    model = transformers.BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.bias.fill_(bias)
    model.save_pretrained(folder)
    return folder


def expected(folder: Path, passages: list[str]) -> list[float]:
    """The model's own reading of each pair, without sentence-transformers."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(
            **tok([QUESTION] * len(passages), passages, return_tensors="pt", padding=True)
        ).logits
    if logits.shape[1] == 1:
        return torch.sigmoid(logits[:, 0]).tolist()
    return torch.softmax(logits, dim=1)[:, -1].tolist()


@pytest.mark.parametrize("labels", [1, 2])
def test_each_pair_gets_the_models_probability(tmp_path: Path, labels: int) -> None:
    folder = build(tmp_path / f"ce{labels}", labels)
    ctx = Context(home=tmp_path / "home", grader=f"cross-encoder:{folder}")
    grader = make_grader(ctx, library=True)
    assert grader.name == "cross-encoder"
    scores = asyncio.run(grader.ascore(QUESTION, PASSAGES))
    assert scores == pytest.approx(expected(folder, PASSAGES), abs=1e-5)
    assert len(set(scores)) == len(PASSAGES)  # each pair read, in order
    # refinement's strips are scored by the same model
    strips = asyncio.run(make_strip_grader(ctx).ascore(QUESTION, PASSAGES[:1]))
    assert strips == pytest.approx(scores[:1], abs=1e-5)
    assert asyncio.run(grader.ascore(QUESTION, [])) == []


def test_the_verdict_follows_the_models_scores(sample_home: Path, tmp_path: Path) -> None:
    sure = build(tmp_path / "sure", 1, bias=6.0)
    never = build(tmp_path / "never", 1, bias=-6.0)

    def run(model: Path) -> dict:
        ctx = Context(
            home=sample_home,
            grader=f"cross-encoder:{model}",
            chat_model="extractive",
            external="none",
            cache=False,
        )
        return summary(ask(QUESTION, context=ctx))

    yes, no = run(sure), run(never)
    assert yes["grader"].startswith("cross-encoder") and min(yes["scores"]) > 0.9
    assert yes["verdict"] == "correct" and yes["answered"]
    assert max(no["scores"]) < 0.1 and no["verdict"] == "incorrect" and not no["answered"]


def test_a_missing_model_or_a_model_on_another_grader_is_one_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(ProviderError, match=r"needs a model: cross-encoder:<"):
        make_grader(Context(home=home, grader="cross-encoder"), library=True)
    with pytest.raises(ProviderError, match=r"cannot load cross-encoder '.*nowhere'"):
        make_grader(
            Context(home=home, grader=f"cross-encoder:{tmp_path / 'nowhere'}"), library=True
        )
    with pytest.raises(ProviderError, match=r"only cross-encoder take a :<model>"):
        make_grader(Context(home=home, grader="similarity:x"), library=True)
