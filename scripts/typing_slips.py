"""A dev library's questions with one typing slip (docs/evaluation.md): the probe of how
crag reads a reader who types "dropuot" for "dropout".

    python scripts/typing_slips.py ../shared/eval OUT/eval

OUT/eval links the library's books, external sources and labelled pairs and holds its
questions, each with its longest lower-case specific word of seven letters or more
(the words the coverage check asks the library about) typed with its two middle letters
swapped. It prints each question changed. Then, for example:

    crag eval d2l=OUT/eval pydocs=OUT/eval-pydocs --held-out --eval-home .crag-eval --no-llm
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from crag.grading.coverage import specific_terms

LINKED = ("books", "external", "grader_pairs.jsonl", "README.md")


def with_slip(question: str) -> str:
    words = [t for t in specific_terms(question) if t.isalpha() and t.islower() and len(t) >= 7]
    if not words:
        return question
    word = max(words, key=len)
    i = len(word) // 2
    slipped = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return re.sub(rf"\b{re.escape(word)}\b", slipped, question, count=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if (args.library / name).exists() and not (args.out / name).exists():
            (args.out / name).symlink_to((args.library / name).resolve())
    rows = []
    for line in (args.library / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        slipped = with_slip(question["question"])
        if slipped != question["question"]:
            print(f"{question['question']}\n  -> {slipped}")
        rows.append(json.dumps({**question, "question": slipped}))
    (args.out / "questions.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
