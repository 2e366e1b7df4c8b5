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

.PHONY: setup demo test lint bench eval clean

$(BIN)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --upgrade >/dev/null
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/python -m uv pip install --quiet --python $(BIN)/python -e ".[local,lab,dev]"
	@touch $@

setup: $(BIN)/.installed

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
test: lint
	CRAG_TEST_REQUIRE_ALL=1 $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

bench: setup
	$(BIN)/python benchmarks/bench_ingest.py
	$(BIN)/python benchmarks/bench_crag.py

# The dev evaluation set lives next to the repository, in ../shared/eval.
EVAL ?= ../shared/eval
EVAL_HOME ?= .crag-eval
eval: setup
	$(BIN)/crag ingest $(EVAL)/books --home $(EVAL_HOME)
	$(BIN)/crag ingest $(EVAL)/external --home $(EVAL_HOME) --collection external
	$(BIN)/crag eval $(EVAL)/questions.jsonl --pairs $(EVAL)/grader_pairs.jsonl \
		--home $(EVAL_HOME) --graders similarity,features

clean:
	rm -rf .crag .crag-demo .crag-eval .langgraph_api .pytest_cache .mypy_cache .ruff_cache
