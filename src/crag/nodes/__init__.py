"""The graph's six nodes, one module each, and `trail` (the path every node records)."""
