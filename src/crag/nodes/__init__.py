"""The graph's nodes, by stage: retrieve (condense, cache_lookup, split, retrieve), grade
(grade, grade_part), web_search (rewrite, web_search), refine, generate (with the
sources an answer cites) and verify; `trail` holds the path every node records."""
