"""Ingest: a folder of PDFs (and .md/.txt) → page-cited chunks → Chroma.

- `loaders`: one file in, its pages out (a one-line reason for every bad file);
- `chunking`: pages → overlapping chunks that never cross a page;
- `page_edges`: a PDF page's running headers, footers and numbers, and its citation;
- `indexer`: incremental, crash-safe writing into a library collection (`stored`: what
  the collection holds of each file; `rebuild`: dropping it to ingest it whole);
- `prefetch`: the next PDF read by a helper process while the current one is embedded;
- `progress`: the terminal display of an ingest run;
- `graph`: the `crag-ingest` graph for `langgraph dev`.
"""
