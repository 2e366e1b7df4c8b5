"""LangChain messages and output formats in the OpenAI chat shape that llama.cpp's
server calls take and return, so the local model reads and answers like ChatOpenAI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.utils.function_calling import convert_to_json_schema
from pydantic import BaseModel


def content_text(content: str | list[Any]) -> str:
    """A message's text: its string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as OpenAI chat messages (text only)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        text = content_text(m.content)
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": text})
        elif isinstance(m, HumanMessage):
            out.append({"role": "user", "content": text})
        elif isinstance(m, AIMessage):
            out.append({"role": "assistant", "content": text})
        elif isinstance(m, ToolMessage):
            out.append({"role": "tool", "content": text, "tool_call_id": m.tool_call_id})
        elif isinstance(m, ChatMessage):
            out.append({"role": m.role, "content": text})
        else:
            raise ValueError(f"unsupported message type for llama.cpp: {type(m).__name__}")
    return out


def _schema_of(schema: Any) -> dict[str, Any]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if isinstance(schema, dict) and ("properties" in schema or "type" in schema):
        return schema
    return convert_to_json_schema(schema)


def normalize_response_format(fmt: Any) -> dict[str, Any]:
    """Accept OpenAI `response_format` dicts, a bare JSON schema, or a Pydantic class."""
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema", "text"):
        return fmt
    schema = _schema_of(fmt)
    return {
        "type": "json_schema",
        "json_schema": {"name": str(schema.get("title", "output")), "schema": schema},
    }


def openai_logprobs(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    """llama.cpp's logprobs in exactly ChatOpenAI's shape (drops llama.cpp's token ids)."""
    if not raw:
        return None

    def entry(t: dict[str, Any]) -> dict[str, Any]:
        return {"token": t.get("token", ""), "bytes": t.get("bytes"), "logprob": t["logprob"]}

    content = [
        {**entry(t), "top_logprobs": [entry(x) for x in t.get("top_logprobs", [])]}
        for t in raw.get("content") or []
    ]
    return {"content": content, "refusal": None}


# Per-call options passed through to llama.cpp's OpenAI-style endpoint.
PASSTHROUGH = {
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "logprobs",
    "top_logprobs",
    "n_probs",
    "grammar",
    "json_schema",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "logit_bias",
    "cache_prompt",
}
