"""`crag train-grader`: fit crag's retrieval evaluator to your library and labels.

Training data: labelled pairs files (`--pairs`, the format of grader_pairs.jsonl),
pairs generated from the ingested library by the chat model (`--generate N`), or both.
The fitted model is saved in CRAG_HOME/grader/grader.json with its training metadata;
`crag ask` then grades with it (grader `auto` or `trained`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crag.cli.options import add_context_flags, context_from_args, positive_int
from crag.context import Context
from crag.errors import ProviderError
from crag_lab.dataset import Pair, load_pairs, load_questions
from crag_lab.progress import Bar

NAME = "train-grader"
HELP = "train crag's retrieval evaluator on labelled pairs"


def folds(raw: str) -> int:
    """An argparse type: 0 (no cross-validation) or at least 2 folds."""
    value = positive_int(0)(raw)
    if value == 1:
        raise argparse.ArgumentTypeError("use 0 (no cross-validation) or at least 2 folds")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pairs", type=Path, action="append", default=[], help="labelled pairs (JSONL)"
    )
    parser.add_argument(
        "--generate",
        type=positive_int(0),
        default=0,
        metavar="N",
        help="generate N questions from the library",
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed for --generate")
    parser.add_argument(
        "--negatives", type=positive_int(0), default=2, help="hard negatives per question"
    )
    parser.add_argument("--cv", type=folds, default=5, help="cross-validation folds (0: none)")
    parser.add_argument(
        "--questions",
        type=Path,
        default=None,
        help="the pairs' questions (questions.jsonl): also cross-validate holding out each "
        "source of questions in turn",
    )
    parser.add_argument(
        "--test-pairs", type=Path, default=None, help="labelled pairs to test the model on"
    )
    parser.add_argument("--no-save", action="store_true", help="measure only; save nothing")
    parser.add_argument(
        "--force",
        action="store_true",
        help="save the model even if it does not beat similarity (the default) held out",
    )
    add_context_flags(parser)


def _bar(label: str) -> Callable[[int, int], None]:
    """A progress callback (done, total) drawn as the lab's progress bar."""
    bar: Bar | None = None

    def show(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = Bar(total, label)
        bar.advance(n=done - bar.done)
        if done >= total:
            bar.close()

    return show


def _generated(ctx: Context, args: argparse.Namespace) -> list[Pair]:
    from crag.models.chat import EXTRACTIVE, make_chat_model
    from crag.retrieval.library import retrieve
    from crag_lab.pairs import generate_pairs, library_chunks

    if ctx.models.chat_model == EXTRACTIVE:
        raise ProviderError("--generate needs a chat model to write questions (not extractive)")
    chunks = library_chunks(ctx, ctx.store.collection)
    cache = ctx.store.grader_dir / f"generated-{ctx.store.collection}-seed{args.seed}.jsonl"
    print(f"generating from {len(chunks)} chunks (cache: {cache})", file=sys.stderr)
    return generate_pairs(
        chunks,
        make_chat_model(ctx.models.chat_model, ctx, max_tokens=64),
        lambda query, k: retrieve(ctx, ctx.store.collection, query, k),
        cache,
        count=args.generate,
        negatives=args.negatives,
        seed=args.seed,
        progress=_bar("questions"),
    )


def _line(name: str, auc: float | None, acc: float | None, rate: float | None) -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    rate_text = "-" if rate is None else f"{rate:.0f}"
    return f"  {name:<42} {f(auc):>6} {f(acc):>8} {rate_text:>8}"


def run(args: argparse.Namespace) -> int:
    from crag.models.embeddings import embeddings_for
    from crag_lab import fit
    from crag_lab.graders.features import FEATURES, FeatureGrader
    from crag_lab.graders.trained import save_trained_grader
    from crag_lab.metrics import best_accuracy, roc_auc
    from crag_lab.protocol import loso_auc, question_source

    ctx = context_from_args(args)
    pairs = [pair for path in args.pairs for pair in load_pairs(path)]
    generated = _generated(ctx, args) if args.generate else []
    pairs += generated
    if not pairs:
        raise ValueError("no training pairs (use --pairs and/or --generate)")
    grader = FeatureGrader(embeddings_for(ctx))
    data = fit.featurize(
        grader,
        pairs,
        progress=_bar("featurizing questions"),
        library_questions={p["qid"] for p in generated},
    )
    labels = (data.y > 0.5).tolist()
    print(f"{len(pairs)} pairs, {len(set(data.groups))} questions, {sum(labels)} relevant")
    print(f"  {'grader':<42} {'AUC':>6} {'accuracy':>8} {'pairs/s':>8}")
    default_scores = grader.model.predict(data.x).tolist()
    builtin_auc = roc_auc(default_scores, labels)
    # what crag grades with when nothing is trained: plain similarity
    similarity_auc = roc_auc(data.x[:, 0].tolist(), labels)
    print(_line("similarity, the default (on these pairs)", similarity_auc, None, None))
    print(
        _line(
            "built-in features (on these pairs)",
            builtin_auc,
            best_accuracy(default_scores, labels)["accuracy"],
            data.pairs_per_second,
        )
    )
    cv: dict[str, Any] | None = None
    if args.cv and len(set(data.groups)) >= args.cv:
        cv = fit.cross_validate(data, k=args.cv, seed=args.seed)
        print(_line(f"trained, {args.cv}-fold CV by question", cv["auc"], cv["accuracy"], None))
    if args.questions:
        source_of = {q["id"]: question_source(q) for q in load_questions(args.questions)}
        sources = [source_of.get(qid, "?") for qid in data.groups]
        held = loso_auc(data.x, data.y, sources, {"similarity": FEATURES.index("cos")})
        for source, row in {**held["by_source"], "all": held["overall"]}.items():
            name = f"trained, {source} held out ({row['n']} pairs, ECE {row['ece']:.2f})"
            print(_line(name, row["fitted"], None, None))
            print(_line(f"similarity, {source} ({row['n']} pairs)", row["similarity"], None, None))
    model = fit.train(data)
    tested: dict[str, Any] | None = None
    if args.test_pairs:
        test = fit.featurize(grader, load_pairs(args.test_pairs))
        tested = fit.evaluate(model, test)
        print(
            _line(
                f"trained, on {args.test_pairs.name}",
                tested["auc"],
                tested["best_accuracy"]["accuracy"],
                test.pairs_per_second,
            )
        )
    if args.no_save:
        return 0
    # Pairs generated from a library are noisy labels: a model fitted to them can rank
    # worse than the default grader. Keep it only if it beats it on held-out folds.
    if cv is None and not args.force:
        print(
            "not saved: without cross-validation (--cv 0, or fewer questions than folds) "
            "nothing shows the trained model ranks better than similarity, the default; "
            "--force saves it anyway"
        )
        return 0
    if (
        cv
        and similarity_auc is not None
        and (cv["auc"] or 0.0) <= similarity_auc
        and not args.force
    ):
        print(
            f"not saved: held out, the trained model ranks no better than similarity, the "
            f"default (AUC {cv['auc']:.3f} vs {similarity_auc:.3f}), so crag keeps grading "
            "with it; --force saves it anyway"
        )
        return 0
    metadata = {
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "pairs_files": [str(p) for p in args.pairs],
        "generated_questions": args.generate,
        "seed": args.seed,
        "pairs": len(pairs),
        "questions": len(set(data.groups)),
        "collection": ctx.store.collection,
        "tenant": ctx.store.tenant,
        "cross_validation": {k: v for k, v in (cv or {}).items() if k != "scores"},
        "pairs_per_second": round(data.pairs_per_second, 1),
    }
    path = save_trained_grader(ctx, model.to_dict(), metadata)
    print(f"saved {path}; `crag ask` now grades with it (grader: trained)")
    print(
        "its scores are on a scale of their own: re-fit the thresholds with "
        "`crag tune QUESTIONS.jsonl --save` on labelled questions"
    )
    return 0
