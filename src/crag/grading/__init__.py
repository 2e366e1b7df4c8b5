"""Grading: the retrieval evaluators, the coverage check and CRAG's verdict rule.

- `registry`: the graders by name; `make_grader` / `make_strip_grader` (the lab's
  graders, `features`, `trained`, `mean` and `reader`, plug in by entry point).
- `graders` (the protocol, similarity, the cascade), `judge`, `cross_encoder`: the graders.
- `question_form`: what a question asks for, and `read`: the question read once.
- `coverage`: what of a question the library cannot cover at all.
- `verdict`: correct / incorrect / ambiguous from the scores and the thresholds, and
  the router (which questions take the fast path).
- `outcome`: the run's confidence, a probability from a logistic model.
"""
