"""Models: chat models and embeddings, local (llama.cpp, ONNX) or OpenAI."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class _Input:
    name: str


class OpenVINOSession:
    """An OpenVINO compiled model behind onnxruntime's `run` and `get_inputs`, so a
    caller serves either. Each calling thread gets its own infer request: batches
    from `streams` threads run side by side, one stream each."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self._local = threading.local()

    @property
    def precision(self) -> str:
        """What its arithmetic runs in here ("bf16" or "f32"), as OpenVINO chose."""
        return str(self._compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())

    def get_inputs(self) -> list[_Input]:
        return [_Input(port.get_any_name()) for port in self._compiled.inputs]

    def run(self, _outputs: None, feeds: dict[str, Any]) -> list[Any]:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        return [request.infer(feeds)[self._compiled.output(0)]]


def openvino_session(path: Path, streams: int) -> OpenVINOSession | None:
    """The ONNX model at `path` compiled by OpenVINO for the CPU, `streams` requests at
    once on one core each; None where OpenVINO is not installed or cannot run it (the
    caller falls back to onnxruntime). OpenVINO computes in bfloat16 where the CPU has
    those instructions, float32 elsewhere."""
    ov = _import_openvino()
    if ov is None:
        return None
    settings = {
        "NUM_STREAMS": str(streams),
        "INFERENCE_NUM_THREADS": str(streams),
        # int8 activations move scores enough to flip decisions; bfloat16 alone does not
        "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0",
    }
    try:
        compiled = ov.Core().compile_model(str(path), "CPU", settings)
    except Exception as exc:  # OpenVINO raises RuntimeError and its own types
        log.warning("OpenVINO cannot run %s (%s); onnxruntime runs it", path.name, exc)
        return None
    return OpenVINOSession(compiled)


#: Loaded by `import openvino` for model conversion, which crag never does; loading it
#: reports the import to Intel's analytics unless the user has opted out.
_CONVERTER = "openvino.tools.ovc"


def _import_openvino() -> Any | None:
    """The openvino package with its converter left unloaded (it sends nothing then),
    or None where OpenVINO is not installed. A later `import` of the converter by the
    user's own code still works."""
    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    blocked = _CONVERTER not in sys.modules
    if blocked:
        sys.modules[_CONVERTER] = None  # type: ignore[assignment]  # openvino skips it
    try:
        return importlib.import_module("openvino")  # loaded with a model, not with crag
    except ImportError:
        return None
    except Exception as exc:  # installed but broken (a missing shared library, say)
        log.warning("OpenVINO does not load (%s); onnxruntime runs the embedder", exc)
        return None
    finally:
        if blocked and sys.modules.get(_CONVERTER) is None:
            del sys.modules[_CONVERTER]
