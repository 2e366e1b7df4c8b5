"""The reader as a torch module: MiniLM-L6's encoder read as a cross-encoder, trained
from all-MiniLM-L6-v2's weights, then exported to ONNX for crag's runtime.

torch is the lab's only need here and crag does not depend on it (`pip install torch`);
the encoder is written out (six BERT layers) so that no other library's version decides
what the exported graph holds. The head reads the mean of the pair's token states, as
the bi-encoder it starts from was trained to pool.
"""

from __future__ import annotations

import json
import math
import struct
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from crag.errors import ProviderError
from crag_lab.graders.reader_onnx import MAX_LENGTH, pair_tokenizer
from crag_lab.reader_data import Pair

HIDDEN, HEADS, LAYERS, FFN, VOCAB, POSITIONS = 384, 12, 6, 1536, 30522, 512
_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a .safetensors file (the format is a JSON header and raw arrays)."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ProviderError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        data = np.frombuffer(
            raw,
            dtype=dtype,
            count=(end - start) // np.dtype(dtype).itemsize,
            offset=8 + size + start,
        )
        out[name] = data.reshape(info["shape"])
    return out


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}
    header: dict[str, Any] = {}
    offset = 0
    for name, array in tensors.items():
        n = array.nbytes
        header[name] = {
            "dtype": names[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + n],
        }
        offset += n
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for array in tensors.values():
            f.write(np.ascontiguousarray(array).tobytes())


class _Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.out = nn.Linear(HIDDEN, HIDDEN)
        self.norm1 = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.up = nn.Linear(HIDDEN, FFN)
        self.down = nn.Linear(FFN, HIDDEN)
        self.norm2 = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def heads(layer: nn.Linear) -> torch.Tensor:
            return layer(x).view(b, t, HEADS, HIDDEN // HEADS).transpose(1, 2)

        q, k, v = heads(self.query), heads(self.key), heads(self.value)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + bias, dim=-1)
        mixed = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, HIDDEN)
        x = self.norm1(x + self.drop(self.out(mixed)))
        return self.norm2(x + self.drop(self.down(nn.functional.gelu(self.up(x)))))


class Reader(nn.Module):
    """(input_ids, attention_mask, token_type_ids) -> one logit per pair."""

    def __init__(self) -> None:
        super().__init__()
        self.words = nn.Embedding(VOCAB, HIDDEN)
        self.positions = nn.Embedding(POSITIONS, HIDDEN)
        self.types = nn.Embedding(2, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList(_Layer() for _ in range(LAYERS))
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(HIDDEN, 1)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        return self.top(
            self.bottom(input_ids, attention_mask, token_type_ids, 0), attention_mask, 0
        )

    def bottom(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor,
        layers: int,
    ) -> torch.Tensor:
        """The token states after the embeddings and the first `layers` layers."""
        at = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
        x = self.words(input_ids) + self.positions(at) + self.types(token_type_ids)
        x = self.drop(self.norm(x))
        bias = _bias(attention_mask, x.dtype)
        for layer in self.layers[:layers]:
            x = layer(x, bias)
        return x

    def top(self, x: torch.Tensor, attention_mask: torch.Tensor, start: int) -> torch.Tensor:
        """The logits from the token states after `start` layers."""
        bias = _bias(attention_mask, x.dtype)
        for layer in self.layers[start:]:
            x = layer(x, bias)
        mask = attention_mask.to(x.dtype)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)
        return self.head(self.drop(pooled)).squeeze(-1)


def _bias(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return ((1.0 - attention_mask.to(dtype)) * -1e4)[:, None, None, :]


_RENAMES = {
    "attention.self.query": "query", "attention.self.key": "key",
    "attention.self.value": "value", "attention.output.dense": "out",
    "attention.output.LayerNorm": "norm1", "intermediate.dense": "up",
    "output.dense": "down", "output.LayerNorm": "norm2",
}  # fmt: skip


def from_minilm(path: Path) -> Reader:
    """A Reader whose encoder holds all-MiniLM-L6-v2's weights (fp32 or fp16 file) and
    whose head starts at zero, so every pair starts at probability one half."""
    weights = read_safetensors(path)
    state: dict[str, torch.Tensor] = {}
    top = {
        "embeddings.word_embeddings": "words",
        "embeddings.position_embeddings": "positions",
        "embeddings.token_type_embeddings": "types",
        "embeddings.LayerNorm": "norm",
    }
    for name, array in weights.items():
        stem, _, leaf = name.rpartition(".")
        if stem in top:
            state[f"{top[stem]}.{leaf}"] = torch.from_numpy(array.astype(np.float32))
        elif stem.startswith("encoder.layer."):
            _, _, index, inner = stem.split(".", 3)
            state[f"layers.{index}.{_RENAMES[inner]}.{leaf}"] = torch.from_numpy(
                array.astype(np.float32)
            )
    model = Reader()
    state["head.weight"] = torch.zeros(1, HIDDEN)
    state["head.bias"] = torch.zeros(1)
    missing = set(model.state_dict()) - set(state)
    if missing:
        raise ProviderError(f"{path} is not all-MiniLM-L6-v2: missing {sorted(missing)[:3]}")
    model.load_state_dict(state)
    return model


def _batch(tokenizer: Any, pairs: Sequence[Pair], device: str) -> dict[str, torch.Tensor]:
    encoded = tokenizer.encode_batch([(p.question, p.text) for p in pairs])
    width = max(len(e.ids) for e in encoded)
    ids = np.zeros((len(pairs), width), dtype=np.int64)
    mask, types = np.zeros_like(ids), np.zeros_like(ids)
    for row, e in enumerate(encoded):
        n = len(e.ids)
        ids[row, :n], mask[row, :n], types[row, :n] = e.ids, 1, e.type_ids
    return {
        k: torch.from_numpy(v).to(device)
        for k, v in {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}.items()
    }


def _batches(
    items: Sequence[int], lengths: Sequence[int], batch: int, rng: np.random.Generator
) -> list[list[int]]:
    """Shuffled batches of pairs of like length: a strip padded to a passage's length
    would cost a passage's time (blocks of 50 batches are sorted by length, then cut)."""
    order = [items[i] for i in rng.permutation(len(items))]
    block = batch * 50
    batches = []
    for start in range(0, len(order), block):
        part = sorted(order[start : start + block], key=lambda i: lengths[i])
        batches += [part[j : j + batch] for j in range(0, len(part), batch)]
    return [batches[i] for i in rng.permutation(len(batches))]


def train(
    model: Reader,
    pairs: Sequence[Pair],
    *,
    epochs: int,
    lr: float,
    batch: int,
    device: str,
    frozen: int = 0,
    seed: int = 0,
    report: Callable[[str], None] = print,
) -> Reader:
    """Binary cross-entropy on every pair, AdamW with a linear warm-up and decay. With
    `frozen` > 0 the embeddings and the first `frozen` layers keep their weights, and
    their output is computed once per pair instead of once per epoch (on two cores,
    training then costs a third of full fine-tuning at frozen=4)."""
    torch.manual_seed(seed)
    tokenizer = pair_tokenizer(MAX_LENGTH)
    model.to(device)
    cached = _bottom_states(model, tokenizer, pairs, frozen, device) if frozen else {}
    model.train()
    trained = [(n, p) for n, p in model.named_parameters() if _trains(n, frozen)]
    for n, p in model.named_parameters():
        p.requires_grad_(_trains(n, frozen))
    opt = torch.optim.AdamW(
        [
            {"params": [p for n, p in trained if not n.startswith("head.")], "lr": lr},
            {"params": [p for n, p in trained if n.startswith("head.")], "lr": lr * 30},
        ],
        weight_decay=0.01,
    )
    steps = epochs * math.ceil(len(pairs) / batch)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm + 1)))
    )
    rng = np.random.default_rng(seed)
    done, started = 0, time.monotonic()
    for epoch in range(epochs):
        total = 0.0
        for chosen in _batches(range(len(pairs)), [len(p.text) for p in pairs], batch, rng):
            target = torch.tensor([float(pairs[i].label) for i in chosen], device=device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
                if frozen:
                    states, mask = _padded([cached[i] for i in chosen], device)
                    logits = model.top(states, mask, frozen)
                else:
                    logits = model(**_batch(tokenizer, [pairs[i] for i in chosen], device))
            loss = nn.functional.binary_cross_entropy_with_logits(logits.float(), target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_([p for _, p in trained], 1.0)
            opt.step()
            sched.step()
            total += loss.item() * len(chosen)
            done += 1
            if done % 50 == 0 or done == steps:
                report(f"  step {done}/{steps}, {time.monotonic() - started:.0f} s")
        report(f"  epoch {epoch + 1}/{epochs}: mean loss {total / len(pairs):.3f}")
    for p in model.parameters():
        p.requires_grad_(True)
    return model.eval()


def _trains(name: str, frozen: int) -> bool:
    if not frozen:
        return True
    return name.startswith("head.") or (
        name.startswith("layers.") and int(name.split(".")[1]) >= frozen
    )


@torch.no_grad()
def _bottom_states(
    model: Reader, tokenizer: Any, pairs: Sequence[Pair], frozen: int, device: str
) -> dict[int, torch.Tensor]:
    """Each pair's token states after the frozen layers (fp16, unpadded, on the CPU): views
    into one buffer. A tensor of its own per pair costs several times its data in a
    fragmented heap, which caps how many pairs fit in memory."""
    model.eval()
    lengths = [len(e.ids) for e in tokenizer.encode_batch([(p.question, p.text) for p in pairs])]
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    buffer = torch.empty(starts[-1], HIDDEN, dtype=torch.float16)
    order = sorted(range(len(pairs)), key=lambda i: -lengths[i])
    for start in range(0, len(order), 64):
        chosen = order[start : start + 64]
        inputs = _batch(tokenizer, [pairs[i] for i in chosen], device)
        states = model.bottom(**inputs, layers=frozen)
        for row, i in enumerate(chosen):
            buffer[starts[i] : starts[i + 1]] = states[row, : lengths[i]]
    return {i: buffer[starts[i] : starts[i + 1]] for i in range(len(pairs))}


def _padded(states: list[torch.Tensor], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in states)
    x = torch.zeros(len(states), width, HIDDEN)
    mask = torch.zeros(len(states), width, dtype=torch.long)
    for row, s in enumerate(states):
        x[row, : len(s)], mask[row, : len(s)] = s.float(), 1
    return x.to(device), mask.to(device)


@torch.no_grad()
def logits_of(model: Reader, pairs: Sequence[Pair], device: str, batch: int = 128) -> np.ndarray:
    tokenizer = pair_tokenizer(MAX_LENGTH)
    model.to(device).eval()
    out = []
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i].text))
    for start in range(0, len(order), batch):
        chosen = [pairs[i] for i in order[start : start + batch]]
        out.append(model(**_batch(tokenizer, chosen, device)).float().cpu().numpy())
    flat = np.concatenate(out) if out else np.zeros(0)
    result = np.zeros(len(pairs), dtype=np.float32)
    result[order] = flat
    return result


def export_onnx(model: Reader, path: Path, *, int8: bool = True) -> Path:
    """The model as ONNX (dynamic batch and length), quantized to int8 weights for the
    CPU unless `int8` is false. Returns the file written."""
    model = model.to("cpu").eval()
    example = {
        "input_ids": torch.ones(2, 16, dtype=torch.long),
        "attention_mask": torch.ones(2, 16, dtype=torch.long),
        "token_type_ids": torch.zeros(2, 16, dtype=torch.long),
    }
    fp32 = path.with_suffix(".fp32.onnx")
    axes = {name: {0: "batch", 1: "tokens"} for name in example}
    with warnings.catch_warnings():  # the TorchScript exporter: needs no onnxscript
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model,
            (example,),
            str(fp32),
            input_names=list(example),
            output_names=["logits"],
            dynamic_axes={**axes, "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    if not int8:
        fp32.replace(path)
        return path
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True
    )
    fp32.unlink()
    return path
