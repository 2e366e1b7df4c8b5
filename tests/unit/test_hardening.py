"""Text from documents, file names and the web never drives the terminal.

(The bad-input, fault and kill cases that used to live here are in tests/reliability/.)
"""

from __future__ import annotations

from crag.text import printable


def test_control_characters_never_reach_the_terminal() -> None:
    hostile = "Title\x1b[2J\x1b]0;pwned\x07 and\x08 \x9b31m text\tok\nnext"
    shown = printable(hostile)
    assert not any((ord(c) < 32 and c not in "\t\n") or 127 <= ord(c) < 160 for c in shown)
    assert shown == "Title\\x1b[2J\\x1b]0;pwned\\x07 and\\x08 \\x9b31m text\tok\nnext"


def test_a_file_name_never_breaks_a_progress_line() -> None:
    assert printable("evil\nname\r.pdf", one_line=True) == "evil\\x0aname\\x0d.pdf"
    assert printable("two\nlines") == "two\nlines"
