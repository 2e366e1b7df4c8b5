"""Model clients whose requests leave the machine without secrets or personal data.

With `redact_queries` on, text sent to an `openai:` chat model or embeddings on another
machine (not loopback) goes through `crag.redact.masked` first: the question, the
follow-up history and the sources of a prompt alike. What was masked is noted for the
run's state (`redacted`, kinds only). A server on loopback gets the text as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI

from crag.redact import masked


def masked_messages(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages with their text masked (text parts of multi-part content too)."""
    out = []
    for message in messages:
        content = message.content
        if isinstance(content, str):
            content = masked(content)
        else:
            content = [
                {**part, "text": masked(str(part["text"]))}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
        out.append(message.model_copy(update={"content": content}))
    return out


class MaskedChatOpenAI(ChatOpenAI):
    """ChatOpenAI that masks every message before it is sent."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return super()._generate(masked_messages(messages), *args, **kwargs)

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        return await super()._agenerate(masked_messages(messages), *args, **kwargs)

    def _stream(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        return super()._stream(masked_messages(messages), *args, **kwargs)

    def _astream(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        return super()._astream(masked_messages(messages), *args, **kwargs)


class MaskedEmbeddings(Embeddings):
    """Embeddings that mask every text before it is sent (chunks at ingest, questions)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents([masked(t) for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(masked(text))
