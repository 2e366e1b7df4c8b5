"""llama.cpp's OpenAI-compatible server (from xllamacpp) with crag's local model, on
loopback: `python llama_server.py PORT API_KEY`. It serves chat and embeddings until
killed; tests point `openai:` models at it as a user would at any such server."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import xllamacpp as xlc

from crag.models.model_files import ensure_local_gguf


def main(port: int, api_key: str) -> None:
    params = xlc.CommonParams()
    params.model.path = str(ensure_local_gguf(Path("~/.cache/crag").expanduser()))
    params.n_ctx = 4096
    params.n_parallel = 1
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    params.sampling.temp = 0.0
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.api_keys = [api_key]
    params.embedding = True  # /v1/embeddings too (mean-pooled, as OpenAI's are)
    params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    params.ui = False
    server = xlc.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
