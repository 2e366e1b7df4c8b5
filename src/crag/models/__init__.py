"""Models: chat models and embeddings, local (llama.cpp, ONNX) or OpenAI."""

from __future__ import annotations

import os


def cpu_count() -> int:
    """Cores this process may use (its affinity, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
