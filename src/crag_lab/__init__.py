"""crag's lab: evaluation, threshold tuning and grader training.

It sits apart from the product: crag never imports it, and it plugs its
subcommands (`crag eval`, `crag tune`, `crag train-grader`) into the `crag`
command through the `crag.commands` entry points. It is told where its data
lives; it never looks for an evaluation set on its own.
"""
