"""Models: chat models and embeddings, local (llama.cpp, ONNX) or OpenAI.

The local model's slots are handed out first come, first served by graph run
(`ARRIVALS`, `Slots`): the model decodes `n` calls together; the rest wait in line, and
a run that came first keeps its place for all of its calls.
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import logging
import os
import sys
import threading
import time
import weakref
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
    from several threads run side by side, one stream each."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self._local = threading.local()

    @property
    def precision(self) -> str:
        """What its arithmetic runs in ("bf16")."""
        return str(self._compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())

    def get_inputs(self) -> list[_Input]:
        return [_Input(port.get_any_name()) for port in self._compiled.inputs]

    def run(self, _outputs: None, feeds: dict[str, Any]) -> list[Any]:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        return [request.infer(feeds)[self._compiled.output(0)]]  # a copy, not a view


#: How OpenVINO compiles crag's models: bfloat16, without int8 activations (they move
#: scores enough to flip decisions; bfloat16 alone does not, docs/evaluation.md).
OPENVINO_SETTINGS = {"INFERENCE_PRECISION_HINT": "bf16", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}


def openvino_session(path: Path, streams: int) -> OpenVINOSession | None:
    """The ONNX model at `path` compiled by OpenVINO in bfloat16, for `streams` requests
    side by side (at most one per core); None where OpenVINO is not installed, the CPU
    has no bfloat16 instructions (float32 on OpenVINO is no faster than onnxruntime) or
    OpenVINO cannot run the model: the caller falls back to onnxruntime."""
    ov = _import_openvino()
    if ov is None:
        return None
    try:
        core = ov.Core()
        if "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
            return None
        threads = {"NUM_STREAMS": str(streams), "INFERENCE_NUM_THREADS": str(streams)}
        compiled = core.compile_model(str(path), "CPU", {**OPENVINO_SETTINGS, **threads})
    except Exception as exc:  # OpenVINO raises RuntimeError and its own types
        log.warning("OpenVINO cannot run %s (%s); onnxruntime runs it", path.name, exc)
        return None
    return OpenVINOSession(compiled)


#: Loaded by `import openvino` for model conversion, which crag never does; loading it
#: reports the import to Intel's analytics unless the user has opted out.
_CONVERTER = "openvino.tools.ovc"
_IMPORT_LOCK = threading.Lock()


def _import_openvino() -> Any | None:
    """The openvino package with its converter left unloaded (it sends nothing then),
    or None where OpenVINO is not installed or does not load. In this process
    `openvino.convert_model` is then missing; `openvino.tools.ovc` can still be
    imported by name."""
    with _IMPORT_LOCK:  # another thread's import must not see the converter blocked
        blocked = "openvino" not in sys.modules and _CONVERTER not in sys.modules
        if blocked:
            sys.modules[_CONVERTER] = None  # type: ignore[assignment]  # openvino skips it
        try:
            return importlib.import_module("openvino")  # loaded with a model, not with crag
        except ModuleNotFoundError as exc:
            if exc.name != "openvino":
                log.warning("OpenVINO does not load (%s); onnxruntime runs the embedder", exc)
            return None
        except Exception as exc:  # installed but broken (a missing shared library, say)
            log.warning("OpenVINO does not load (%s); onnxruntime runs the embedder", exc)
            return None
        finally:
            if blocked and sys.modules.get(_CONVERTER, ...) is None:
                sys.modules.pop(_CONVERTER, None)


class Slots:
    """A model's free slots, handed out first come, first served by run: a freed slot goes
    to the waiting call of the run that came first (the run whose first call asked
    earliest), then to the call that asked first. A run's later calls (verify after
    generate, a grade after a rewrite) so go before the first calls of runs that came
    after it, and runs finish in the order they came instead of all together."""

    def __init__(self, n: int = 1) -> None:
        self._free = n
        self._lock = threading.Lock()
        self._waiting: list[tuple[float, int, threading.Event]] = []  # a heap
        self._asked = itertools.count()

    def acquire(self, timeout: float | None = None, *, came: float | None = None) -> bool:
        """Take a slot; False if none came free within `timeout` seconds. `came`: when
        the caller's run came (time.monotonic()); the call itself, if not given."""
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return True
            turn = threading.Event()
            entry = (time.monotonic() if came is None else came, next(self._asked), turn)
            heapq.heappush(self._waiting, entry)
        if turn.wait(timeout):
            return True
        with self._lock:
            if turn.is_set():  # handed over just as the wait ran out
                return True
            self._waiting.remove(entry)
            heapq.heapify(self._waiting)
            return False

    def release(self) -> None:
        with self._lock:
            if self._waiting:  # the slot passes straight to the first come
                heapq.heappop(self._waiting)[2].set()
            else:
                self._free += 1


class _Arrivals:
    """When each graph run first asked the model, keyed by the run's context object
    (LangGraph hands one object to every node of a run, another to the next run)."""

    def __init__(self) -> None:
        self._came: dict[int, float] = {}
        # Re-entrant: the garbage collector may run a dead run's `_forget` inside `came`.
        self._lock = threading.RLock()

    def came(self) -> float | None:
        """The current run's arrival; None outside a graph run."""
        try:
            from langgraph.runtime import get_runtime

            run = get_runtime().context
        except (ImportError, RuntimeError):
            return None
        if run is None:
            return None
        key = id(run)
        with self._lock:
            if key not in self._came:
                self._came[key] = time.monotonic()
                weakref.finalize(run, self._forget, key)
            return self._came[key]

    def _forget(self, key: int) -> None:
        with self._lock:
            self._came.pop(key, None)


ARRIVALS = _Arrivals()
