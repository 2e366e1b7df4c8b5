"""`crag train-reader` end to end on a handful of questions, from a stand-in for
all-MiniLM-L6-v2's weights: the curve, the int8 export, its calibration, and the
`reader` grader that reads the exported file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from requires import require_module

from crag.context import Context
from crag.errors import ProviderError
from crag.grading.registry import make_grader
from crag_lab.construct import Candidate, append_rows, build_row
from crag_lab.graders.reader_onnx import MAX_LENGTH, ReaderModel, pair_tokenizer
from crag_lab.reader_data import Pair

TRAIN = "make test (pip install torch==2.13.0 onnx)"
torch = require_module("torch", TRAIN)
require_module("onnx", TRAIN)

from crag_lab import reader_model  # noqa: E402  (needs torch)
from crag_lab.reader_model import from_minilm, write_safetensors  # noqa: E402

FACTS = [
    ("port", "By default nginx listens on port {} for plain HTTP traffic."),
    ("workers", "The server starts {} worker processes unless told otherwise."),
    ("timeout", "An idle connection is closed after {} seconds."),
]
QUESTIONS = {
    "port": "Which port does nginx listen on by default for HTTP?",
    "workers": "How many worker processes does the server start by default?",
    "timeout": "After how many seconds is an idle connection closed?",
}
FILLER = (
    "The listen directive sets the address and port of a server. "
    "Several listen directives may share one server block. "
    "Each server block may also name its hosts. "
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random weights in all-MiniLM-L6-v2's layout and names (fp16, as carried)."""
    rng = np.random.default_rng(0)
    shapes = {
        "embeddings.word_embeddings.weight": (30522, 384),
        "embeddings.position_embeddings.weight": (512, 384),
        "embeddings.token_type_embeddings.weight": (2, 384),
        "embeddings.LayerNorm.weight": (384,),
        "embeddings.LayerNorm.bias": (384,),
    }
    inner = {
        "attention.self.query": 384,
        "attention.self.key": 384,
        "attention.self.value": 384,
        "attention.output.dense": 384,
        "intermediate.dense": 1536,
        "output.dense": 384,
    }
    for layer in range(6):
        for name, rows in inner.items():
            cols = 1536 if name == "output.dense" else 384
            shapes[f"encoder.layer.{layer}.{name}.weight"] = (rows, cols)
            shapes[f"encoder.layer.{layer}.{name}.bias"] = (rows,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"encoder.layer.{layer}.{norm}.weight"] = (384,)
            shapes[f"encoder.layer.{layer}.{norm}.bias"] = (384,)
    tensors = {}
    for name, shape in shapes.items():
        if "LayerNorm.weight" in name:
            tensors[name] = np.ones(shape, dtype=np.float16)
        else:
            tensors[name] = (rng.normal(0, 0.05, shape)).astype(np.float16)
    path = tmp_path_factory.mktemp("base") / "minilm.safetensors"
    write_safetensors(path, tensors)
    return path


def _rows() -> list[dict]:
    rows = []
    for i in range(12):
        key, fact = FACTS[i % 3]
        text = FILLER + fact.format(80 + i) + " " + FILLER
        built = build_row(
            Candidate("t", "d", f"t:d#{i}", text, [FILLER]), QUESTIONS[key], str(80 + i)
        )
        assert isinstance(built, dict)
        rows.append(built)
    return rows


def test_a_new_reader_is_undecided_and_exports_what_it_computes(base: Path, tmp_path: Path) -> None:
    model = from_minilm(base)
    pairs = [
        Pair(QUESTIONS["port"], FILLER, False, "g", "passage"),
        Pair(QUESTIONS["port"], FACTS[0][1].format(80), True, "g", "strip"),
    ]
    assert np.all(reader_model.logits_of(model, pairs, "cpu") == 0.0)  # the head starts at 0
    torch.nn.init.normal_(model.head.weight, std=1.0)
    expected = reader_model.logits_of(model, pairs, "cpu")
    assert np.ptp(expected) > 0
    exact = reader_model.export_onnx(model, tmp_path / "fp32.onnx", int8=False)
    got = ReaderModel(exact).logits(pairs[0].question, [p.text for p in pairs])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    small = reader_model.export_onnx(model, tmp_path / "int8.onnx")
    assert small.stat().st_size < 0.35 * exact.stat().st_size
    assert np.all(
        np.isfinite(ReaderModel(small).logits(pairs[0].question, [p.text for p in pairs]))
    )


def test_frozen_layers_are_computed_once_and_read_back_as_the_model_computes_them(
    base: Path,
) -> None:
    model = from_minilm(base)
    torch.nn.init.normal_(model.head.weight, std=1.0)
    pairs = [
        Pair(QUESTIONS[k], text, y, k, "passage")
        for k, fact in FACTS
        for text, y in ((FILLER + fact.format(80), True), (FILLER[:60], False), (FILLER, False))
    ]
    tokenizer = pair_tokenizer(MAX_LENGTH)
    cached = reader_model._bottom_states(model, tokenizer, pairs, 4, "cpu")
    # the pairs differ in length, each kept unpadded: a view of its own tokens only
    lengths = {len(cached[i]) for i in range(len(pairs))}
    assert len(lengths) >= 3
    model.eval()
    with torch.no_grad():
        states, mask = reader_model._padded([cached[i] for i in range(len(pairs))], "cpu")
        from_cache = model.top(states, mask, 4).numpy()
    whole = reader_model.logits_of(model, pairs, "cpu")
    np.testing.assert_allclose(from_cache, whole, atol=2e-2)  # fp16 states between layers
    frozen_before = model.layers[0].query.weight.detach().clone()
    top_before = model.layers[5].query.weight.detach().clone()
    reader_model.train(
        model, pairs, epochs=1, lr=1e-3, batch=3, device="cpu", frozen=4, report=lambda _: None
    )
    assert torch.equal(model.layers[0].query.weight, frozen_before)
    assert not torch.equal(model.layers[5].query.weight, top_before)


def test_the_command_draws_the_curve_and_saves_a_calibrated_reader(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from crag.cli.main import main

    data, out = tmp_path / "data", tmp_path / "model"
    data.mkdir()
    append_rows(data / "questions.jsonl.gz", _rows())
    dev = tmp_path / "pairs.jsonl"
    dev.write_text(
        "".join(
            json.dumps(
                {
                    "qid": f"q{i}",
                    "question": QUESTIONS[k],
                    "passage": p,
                    "relevant": y,
                    "origin": "",
                    "notes": "",
                }
            )
            + "\n"
            for i, (k, _) in enumerate(FACTS)
            for p, y in ((FACTS[i][1].format(7), True), (FILLER, False))
        )
    )
    code = main(
        [
            "train-reader",
            "--data",
            str(data),
            "--out",
            str(out),
            "--base",
            str(base),
            "--sizes",
            "4,50",
            "--unseen",
            "3",
            "--epochs",
            "1",
            "--batch",
            "4",
            "--dev",
            f"tiny={dev}",
            "--device",
            "cpu",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "| questions | unseen | tiny AUC | tiny on-topic |" in printed
    curve = json.loads((out / "curve.json").read_text())
    # 50 is more than there is: capped at the 9 questions left to train on
    assert [p["questions"] for p in curve["curve"]] == [4, 9]
    assert all(0.0 <= p["tiny"]["auc"] <= 1.0 for p in curve["curve"])
    meta = json.loads((out / "reader.json").read_text())
    assert meta["calibration"]["fitted_on"] == "unseen"
    ctx = Context().with_overrides(grader="reader", reader_file=out / "reader.onnx")
    grader = make_grader(ctx, library=True)
    assert grader.name == "reader"
    scores = asyncio.run(grader.ascore(QUESTIONS["port"], [FILLER, FACTS[0][1].format(80)]))
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)


def test_a_missing_reader_is_a_one_line_error(tmp_path: Path) -> None:
    ctx = Context().with_overrides(grader="reader", reader_file=tmp_path / "none.onnx")
    with pytest.raises(ProviderError, match="crag train-reader"):
        make_grader(ctx, library=True)
