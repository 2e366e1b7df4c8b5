"""An LLM judge on any chat model: P(yes) from logprobs where the model gives them."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from crag import prompts
from crag.directives import without_directives
from crag.errors import ProviderError
from crag.grading.graders import NEUTRAL
from crag.models.chat import UNSTREAMED

log = logging.getLogger(__name__)


def yes_probability(message: BaseMessage) -> float | None:
    """P(yes) from the first generated token's top logprobs, or None if absent."""
    logprobs = (message.response_metadata or {}).get("logprobs") or {}
    content = logprobs.get("content") or []
    if not content:
        return None
    yes = no = 0.0
    candidates = content[0].get("top_logprobs") or [content[0]]
    for cand in candidates:
        token = str(cand.get("token", "")).strip().lower()
        p = math.exp(float(cand.get("logprob", -math.inf)))
        if token.startswith("yes"):
            yes += p
        elif token.startswith("no"):
            no += p
    if yes + no <= 0.0:
        return None
    return yes / (yes + no)


_SCORE_RE = re.compile(r'"?score"?\s*[:=]\s*(\d+(?:\.\d+)?)', re.IGNORECASE)


def parse_judgement(message: BaseMessage) -> float | None:
    """Read a judge reply: logprobs first, then a yes/no word, then a 0-10 score."""
    prob = yes_probability(message)
    if prob is not None:
        return prob
    text = message.content if isinstance(message.content, str) else str(message.content)
    word = text.strip().lower()
    if word.startswith("yes"):
        return 1.0
    if word.startswith("no"):
        return 0.0
    match = _SCORE_RE.search(text)
    if match:
        return min(max(float(match.group(1)) / 10.0, 0.0), 1.0)
    try:
        value = json.loads(text)
        if isinstance(value, dict) and "score" in value:
            return min(max(float(value["score"]) / 10.0, 0.0), 1.0)
    except (ValueError, TypeError):
        pass
    return None


class JudgeGrader:
    """An LLM judge on any chat model: P(yes) from logprobs where the model gives them."""

    name = "judge"

    def __init__(self, model: BaseChatModel, max_concurrency: int = 4) -> None:
        self.model = model.bind(logprobs=True, top_logprobs=5, max_tokens=1, temperature=0)
        self.max_concurrency = max_concurrency

    @staticmethod
    def messages(question: str, passage: str, tag: str) -> list[BaseMessage]:
        """The judge's prompt: the passage filtered like every source a model reads (an
        order in it would grade itself relevant) and delimited by the call's tag."""
        passage = without_directives(passage)
        return [
            SystemMessage(prompts.JUDGE_SYSTEM.format(tag=tag)),
            HumanMessage(prompts.JUDGE_USER.format(question=question, passage=passage, tag=tag)),
        ]

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        tag = prompts.data_tag()  # one per question: the model's prompt cache still helps
        batch: list[Any] = [self.messages(question, p, tag) for p in passages]
        replies = await self.model.abatch(
            batch,
            config={**UNSTREAMED, "max_concurrency": self.max_concurrency},
            return_exceptions=True,
        )
        read = [parse_judgement(r) if isinstance(r, AIMessage) else None for r in replies]
        if all(score is None for score in read):  # a judge that is down judges nothing
            why = next((r for r in replies if isinstance(r, BaseException)), replies[0])
            raise ProviderError(f"the LLM judge gave no usable answer ({type(why).__name__})")
        scores: list[float] = []
        for reply, score in zip(replies, read, strict=True):
            if score is None:
                log.warning("judge gave no usable answer (%r); scoring neutral", reply)
            scores.append(NEUTRAL if score is None else score)
        return scores
