"""Grading: the retrieval evaluators, the coverage check and CRAG's verdict rule.

- `registry`: the graders by name; `make_grader` / `make_strip_grader`.
- `base`, `similarity`, `features`, `judge`, `cascade` (with `mean`), `trained`: the graders.
- `coverage`: what of a question the library cannot cover at all.
- `verdict`: correct / incorrect / ambiguous from the scores and the thresholds.
"""
