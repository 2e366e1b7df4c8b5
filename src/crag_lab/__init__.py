"""crag's lab: evaluation, threshold tuning and grader training.

It sits apart from the product: crag never imports it. It plugs its subcommands
(`crag eval`, `crag tune`, `crag train-grader`, ...) into the `crag` command through
the `crag.commands` entry points, and its graders (`graders/`) into crag's grader
table through the `crag.graders` entry point, loaded only when a run names one. It is
told where its data lives; it never looks for an evaluation set on its own.
"""
