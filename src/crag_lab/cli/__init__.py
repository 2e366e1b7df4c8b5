"""The lab's subcommands, each a module with NAME, HELP, add_arguments and run.

They reach the `crag` command through the `crag.commands` entry points
(pyproject.toml), so crag itself never imports them.
"""
