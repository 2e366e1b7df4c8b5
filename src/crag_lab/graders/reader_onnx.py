"""The reader: a cross-encoder that reads a question and a passage together and says
whether the passage states the answer, as an int8 ONNX model on onnxruntime.

A bi-encoder embeds each text alone, so it can only say the two are on one topic; the
reader sees both at once. Its file holds the network (`crag train-reader` writes it) and
a JSON file beside it holds the calibration that turns a logit into a probability.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag.errors import ProviderError
from crag.models import cpu_session
from crag.models.minilm import TOKENIZER_PATH

#: Word pieces per pair, special tokens included; the passage is cut, never the question.
MAX_LENGTH = 256


def pair_tokenizer(max_length: int = MAX_LENGTH) -> Any:
    """MiniLM's word pieces for (question, passage) pairs: [CLS] q [SEP] p [SEP]."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length, strategy="only_second")
    return tokenizer


def calibration_path(model: Path) -> Path:
    return model.with_suffix(".json")


class ReaderModel:
    """Scores (question, passage) pairs as probabilities; loads on first use."""

    def __init__(self, path: Path, *, threads: int = 0, max_batch_tokens: int = 2048) -> None:
        self.path = Path(path)
        self.threads = threads
        self.max_batch_tokens = max_batch_tokens
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self.scale, self.shift = 1.0, 0.0

    def load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            if not self.path.is_file():
                raise ProviderError(f"reader model not found: {self.path}")
            meta = calibration_path(self.path)
            if meta.is_file():
                calib = json.loads(meta.read_text(encoding="utf-8")).get("calibration", {})
                self.scale = float(calib.get("scale", 1.0))
                self.shift = float(calib.get("shift", 0.0))
            self._tokenizer = pair_tokenizer()
            self._session = cpu_session(self.path, self.threads)

    def logits(self, question: str, passages: Sequence[str]) -> np.ndarray:
        """The network's raw score for each (question, passage)."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        self.load()
        encoded = self._tokenizer.encode_batch([(question, p) for p in passages])
        order = sorted(range(len(passages)), key=lambda i: len(encoded[i].ids))
        out = np.zeros(len(passages), dtype=np.float32)
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and (end - start + 1) * len(encoded[order[end]].ids) <= self.max_batch_tokens
            ):
                end += 1
            chosen = order[start:end]
            width = len(encoded[chosen[-1]].ids)
            ids = np.zeros((len(chosen), width), dtype=np.int64)
            mask, types = np.zeros_like(ids), np.zeros_like(ids)
            for row, i in enumerate(chosen):
                e = encoded[i]
                n = len(e.ids)
                ids[row, :n], mask[row, :n], types[row, :n] = e.ids, 1, e.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            out[chosen] = self._session.run(None, feeds)[0].reshape(-1)
            start = end
        return out

    def probabilities(self, question: str, passages: Sequence[str]) -> np.ndarray:
        """Calibrated P(the passage states the answer)."""
        z = self.scale * self.logits(question, passages) + self.shift
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


def platt(logits: Sequence[float], labels: Sequence[bool], steps: int = 200) -> tuple[float, float]:
    """Fit P = sigmoid(scale * logit + shift) by Newton's method on the log-loss."""
    x = np.asarray(logits, dtype=float)
    y = np.asarray(labels, dtype=float)
    a, b = 1.0, 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(a * x + b)))
        w = np.maximum(p * (1 - p), 1e-9)
        g = np.array([((p - y) * x).sum(), (p - y).sum()])
        h = np.array([[(w * x * x).sum(), (w * x).sum()], [(w * x).sum(), w.sum()]])
        step = np.linalg.solve(h + 1e-6 * np.eye(2), g)
        a, b = a - step[0], b - step[1]
        if math.hypot(*step) < 1e-8:
            break
    return float(a), float(b)
