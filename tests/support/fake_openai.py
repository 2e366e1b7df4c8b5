"""A tiny OpenAI-compatible server on loopback, so the real OpenAI clients are tested offline.

Serves `POST /v1/chat/completions` (with logprobs when asked) and
`POST /v1/embeddings` (float or base64 encoding, as the openai SDK requests),
checks the bearer key, and records every request for assertions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

EMB_DIM = 8


def fake_vector(text: str) -> list[float]:
    """Deterministic unit vector derived from the text's hash."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(EMB_DIM)
    return [float(x) for x in vec / np.linalg.norm(vec)]


def _token(tok: str, logprob: float) -> dict[str, Any]:
    return {"token": tok, "bytes": list(tok.encode()), "logprob": logprob}


@dataclass
class FakeOpenAI:
    api_key: str = "test-key"
    #: (path, JSON body, headers with lower-case names) of every request
    requests: list[tuple[str, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    reply: str = "Zorbo is the capital."
    #: asked for JSON (response_format), reply {"found": found, "answer": reply}, as a
    #: server that honours the schema would; False sends `reply` as it is (bad JSON)
    json_replies: bool = True
    found: bool = True
    #: why the reply ends: "length" for one cut at the token limit
    finish_reason: str = "stop"
    #: the grounding check's verdicts per answer sentence (default: all supported)
    grounding: list[bool] | None = None
    p_yes: float = 0.8
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: dict[str, Any]) -> None:
                """The reply as server-sent chunks, a few characters each, as a server
                streams when asked to (`stream: true`)."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                (choice,) = reply["choices"]
                text = choice["message"]["content"]
                pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
                deltas = [{"role": "assistant", "content": ""}]
                deltas += [{"content": piece} for piece in pieces]
                for i, delta in enumerate(deltas):
                    last = i == len(deltas) - 1
                    chunk = {
                        "id": reply["id"],
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": reply["model"],
                        "choices": [
                            {
                                "index": 0,
                                "delta": delta,
                                "finish_reason": choice["finish_reason"] if last else None,
                            }
                        ],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(
                    (self.path, body, {k.lower(): v for k, v in self.headers.items()})
                )
                if self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    self._send(401, {"error": {"message": "bad key", "type": "auth"}})
                elif self.path == "/v1/chat/completions" and body.get("stream"):
                    self._stream(fake.chat(body))
                elif self.path == "/v1/chat/completions":
                    self._send(200, fake.chat(body))
                elif self.path == "/v1/embeddings":
                    self._send(200, fake.embeddings(body))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        content = self.reply
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == "Grounding" and self.json_replies:
            asked = body["messages"][-1]["content"].split("Answer sentences:")[-1]
            count = len(re.findall(r"(?m)^\d+\. ", asked))
            content = json.dumps({"supported": self.grounding or [True] * count})
        elif schema and self.json_replies:
            content = json.dumps({"found": self.found, "answer": self.reply if self.found else ""})
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": self.finish_reason,
        }
        if body.get("logprobs"):
            n = int(body.get("top_logprobs") or 0)
            top = [_token("yes", math.log(self.p_yes)), _token("no", math.log(1 - self.p_yes))]
            first = "yes" if self.p_yes >= 0.5 else "no"
            choice["message"]["content"] = first
            choice["logprobs"] = {
                "content": [
                    {**_token(first, max(t["logprob"] for t in top)), "top_logprobs": top[:n]}
                ],
                "refusal": None,
            }
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "?"),
            "choices": [choice],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        }

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body["input"]
        if isinstance(inputs, str):
            inputs = [inputs]
        data = []
        for i, text in enumerate(inputs):
            vec = fake_vector(str(text))
            emb: Any = vec
            if body.get("encoding_format") == "base64":
                emb = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", "?"),
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
