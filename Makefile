# Two commands do everything on a fresh machine:
#   make demo   set up .venv, ingest the sample library, ask the demo questions (offline)
#   make test   lint, format check, type check and the whole test suite (offline)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

# Offline and quiet: no tracing, telemetry, analytics or version checks.
export LANGSMITH_TRACING := false
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export LANGGRAPH_NO_VERSION_CHECK := 1
export HF_HUB_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: setup demo test lint bench eval ablate clean

# Bytecode is compiled at install: where PYTHONDONTWRITEBYTECODE is set (CI, containers),
# every crag process would otherwise compile LangGraph and Chroma again (about 2 s each).
$(BIN)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --upgrade >/dev/null
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[local,lab,dev]"
	@$(BIN)/python -m compileall -q src >/dev/null
	@touch $@

setup: $(BIN)/.installed

# The suite also trains a tiny reader and scores with a tiny hub-style cross-encoder, so
# it needs torch, onnx and sentence-transformers (crag itself does not). pip takes
# torch's CPU build where one lies on the machine's disk (its find-links); elsewhere
# PyPI's build, which is several GB.
$(BIN)/.train-installed: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0" "onnx>=1.16"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "sentence-transformers>=5"
	@touch $@

demo: setup
	$(BIN)/crag demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# Every optional component must be there: a test that would skip for want of one fails
# and names its install step. Test files are shared among TEST_WORKERS processes (each
# file's tests in one of them, in order); the 15 slowest steps are printed at the end.
TEST_WORKERS ?= 2
test: lint $(BIN)/.train-installed
	CRAG_TEST_REQUIRE_ALL=1 $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

bench: setup
	$(BIN)/python benchmarks/bench_ingest.py
	$(BIN)/python benchmarks/bench_crag.py
	$(BIN)/python benchmarks/bench_startup.py

# The two dev libraries ship in the repository: eval/d2l (d2l books) and
# eval/pydocs (Python docs). `make eval` ingests both, fits each system on one
# and measures it on the other (and the reverse), without a language model.
EVAL ?= eval/d2l
EVAL_PYDOCS ?= eval/pydocs
EVAL_HOME ?= .crag-eval
EVAL_FLAGS ?= --no-llm
LIBRARIES := d2l=$(EVAL) pydocs=$(EVAL_PYDOCS)
eval: setup
	$(BIN)/crag eval $(LIBRARIES) --ingest --held-out --eval-home $(EVAL_HOME) \
		--systems crag,oracle,features,naive,tutorial $(EVAL_FLAGS)

# Each of crag's mechanisms switched off alone, held out by library.
ablate: setup
	$(BIN)/crag ablate $(LIBRARIES) --ingest --eval-home $(EVAL_HOME) $(EVAL_FLAGS)

clean:
	rm -rf .crag .crag-demo .crag-eval .langgraph_api .pytest_cache .mypy_cache .ruff_cache
