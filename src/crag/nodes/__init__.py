"""The graph's nodes, one module each (grade's holds grade_part too), `citations` (the
sources an answer cites) and `trail` (the path every node records)."""
