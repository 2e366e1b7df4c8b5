"""Models: chat models and embeddings, local (llama.cpp, ONNX) or OpenAI."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def cpu_count() -> int:
    """Cores this process may use (its affinity, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_session(path: Path, threads: int = 0, *, arena: bool = False) -> Any:
    """An onnxruntime session on the CPU, as crag's local models run: `threads` cores
    (0: all this process may use), one operator at a time. `arena` keeps freed buffers
    for reuse: faster where batch shapes stay small, costly in memory where they vary."""
    import onnxruntime as ort  # loaded with a model, not with crag

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or cpu_count()
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    opts.enable_cpu_mem_arena = arena
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
