"""A dev library's questions in British spelling (docs/evaluation.md): the probe of how
crag reads a reader who writes "regularisation" of a book that writes "regularization".

    python scripts/british_spelling.py ../shared/eval OUT/eval

OUT/eval links the library's books, external sources and labelled pairs and holds its
questions respelt: -ize, -ization, -yze and their forms as -ise, -isation, -yse, and a
few words of their own ("color", "modeling", "center"); names with "size" in them
("maxsize") are left alone. It prints each question changed. Then, for example:

    crag eval d2l=OUT/eval pydocs=OUT/eval-pydocs --held-out --eval-home .crag-eval --no-llm
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

WORDS = {
    "color": "colour",
    "behavior": "behaviour",
    "neighbor": "neighbour",
    "favor": "favour",
    "flavor": "flavour",
    "center": "centre",
    "modeling": "modelling",
    "modeled": "modelled",
    "labeled": "labelled",
    "labeling": "labelling",
    "catalog": "catalogue",
    "license": "licence",
    "defense": "defence",
}
IZE = re.compile(r"^(.{3,}?)(iz|yz)(ation|ations|e|es|ed|ing|er|ers)$")
LINKED = ("books", "external", "grader_pairs.jsonl", "README.md")


def british(word: str) -> str:
    low = word.lower()
    for us, gb in WORDS.items():
        if low in (us, us + "s"):
            out = gb + low[len(us) :]
            return out.capitalize() if word[0].isupper() else out
    if "size" not in low and (m := IZE.match(word)):
        return m.group(1) + {"iz": "is", "yz": "ys"}[m.group(2)] + m.group(3)
    return word


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
        respelt = re.sub(r"[A-Za-z]+", lambda m: british(m.group(0)), question["question"])
        if respelt != question["question"]:
            print(f"{question['question']}\n  -> {respelt}")
        rows.append(json.dumps({**question, "question": respelt}))
    (args.out / "questions.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
