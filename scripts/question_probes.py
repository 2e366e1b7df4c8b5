"""A dev library's questions as other readers write them (docs/evaluation.md): the probes
of how crag reads a question in British spelling, typed with a slip, in lower case, or
put in other words.

    python scripts/question_probes.py british eval/d2l OUT/eval
    python scripts/question_probes.py slips eval/d2l OUT/eval

OUT/eval links the library's books, external sources and labelled pairs and holds its
questions rewritten, printing each question changed:

- `british`: -ize, -ization, -yze and their forms as -ise, -isation, -yse, and a few
  words of their own ("color", "modeling", "center"); names with "size" in them
  ("maxsize") are left alone;
- `slips`: each question's longest lower-case specific word of seven letters or more
  (the words the coverage check asks the library about) typed with its two middle
  letters swapped;
- `lower`: the whole question in lower case, as people type into a search box;
- `paraphrase`: the question in other words, written by the local model (temperature
  0, about 3 s a question on two cores). A rewrite that drops one of the question's
  numbers, code names, capitalised names, years or versions is not used: the question
  stays as written, so the labels still hold.

Then, for example:

    crag eval d2l=OUT/eval pydocs=OUT/eval-pydocs --held-out --eval-home .crag-eval --no-llm
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path

from crag.grading.constraints import when
from crag.grading.coverage import specific_terms

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


def _british_word(word: str) -> str:
    low = word.lower()
    for us, gb in WORDS.items():
        if low in (us, us + "s"):
            out = gb + low[len(us) :]
            return out.capitalize() if word[0].isupper() else out
    if "size" not in low and (m := IZE.match(word)):
        return m.group(1) + {"iz": "is", "yz": "ys"}[m.group(2)] + m.group(3)
    return word


def british(question: str) -> str:
    return re.sub(r"[A-Za-z]+", lambda m: _british_word(m.group(0)), question)


def with_slip(question: str) -> str:
    words = [t for t in specific_terms(question) if t.isalpha() and t.islower() and len(t) >= 7]
    if not words:
        return question
    word = max(words, key=len)
    i = len(word) // 2
    slipped = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return re.sub(rf"\b{re.escape(word)}\b", slipped, question, count=1)


PARAPHRASE = (
    "You rewrite questions. Rewrite the user's question the way a different person would "
    "ask it: use other words and another sentence structure, but keep its exact meaning, "
    "and keep every name, product, number, year, version and code identifier exactly as "
    "written. If it asks two things, ask both. Reply with the rewritten question only."
)
# what a rewrite must keep: dotted or underscored code names, words with digits, names
# with inner capitals ("urllib.request", "__slots__", "Q3", "AdaBoost")
_KEPT = re.compile(r"[A-Za-z_][\w.]*[._][\w.()]+|\b\w*\d\w*\b|\b[A-Z][A-Za-z]*[A-Z]\w*\b")


def paraphrase(question: str) -> str:
    from langchain_core.messages import HumanMessage, SystemMessage

    from crag.models.chat import make_chat_model

    model = make_chat_model("local", max_tokens=80)
    reply = model.invoke([SystemMessage(PARAPHRASE), HumanMessage(question)]).content
    lines = str(reply).strip().strip('"').splitlines()
    rewrite = lines[0].strip() if lines else ""
    kept = all(t.lower() in rewrite.lower() for t in _KEPT.findall(question))
    same = {c.value for c in when(question)} <= {c.value for c in when(rewrite)}
    return rewrite if kept and same and len(rewrite) > 10 else question


PROBES: dict[str, Callable[[str], str]] = {
    "british": british,
    "slips": with_slip,
    "lower": str.lower,
    "paraphrase": paraphrase,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("probe", choices=sorted(PROBES))
    parser.add_argument("library", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rewrite = PROBES[args.probe]
    args.out.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if (args.library / name).exists() and not (args.out / name).exists():
            (args.out / name).symlink_to((args.library / name).resolve())
    rows = []
    for line in (args.library / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        changed = rewrite(question["question"])
        if changed != question["question"]:
            print(f"{question['question']}\n  -> {changed}")
        rows.append(json.dumps({**question, "question": changed}))
    (args.out / "questions.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
