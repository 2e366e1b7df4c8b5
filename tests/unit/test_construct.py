"""The reader's training data by construction: labels, refusals, the resumable store,
and the corpora's text extraction."""

from __future__ import annotations

import gzip
from pathlib import Path

from crag_lab import construct
from crag_lab.construct import Candidate, build_row, open_store, parse_reply, rows_from_reply
from crag_lab.corpora import _asciidoc, _pod, _rst, html_text

CHUNK = (
    "The listen directive sets the address and port of a server. "
    "By default nginx listens on port 80 for plain HTTP traffic. "
    "The ssl parameter makes every connection on the port use TLS. "
    "Several listen directives may share one server block."
)
OTHERS = [
    "The worker_processes directive sets how many workers serve requests.",
    "Plain HTTP uses port 80 unless a listen directive says otherwise.",
    "The ssl parameter of listen turns TLS on for a whole port.",
]


def cand() -> Candidate:
    return Candidate("nginx", "doc.txt", "nginx:doc.txt#3", CHUNK, OTHERS)


def test_the_deletion_negative_keeps_the_topic_and_loses_the_answer() -> None:
    row = build_row(cand(), "Which port does nginx listen on by default for HTTP?", "port 80")
    assert isinstance(row, dict)
    assert row["sentence"] == "By default nginx listens on port 80 for plain HTTP traffic."
    assert row["answer_sentences"] == [1]
    assert "80" not in row["negative"]
    assert "listen directive" in row["negative"]  # same topic, same words
    assert row["negative"].count(".") == 3
    # a same-document chunk holding the answer is no negative
    assert all("80" not in other for other in row["others"])
    assert row["others"][0] == OTHERS[2]  # the most overlapping first


def test_an_answer_is_found_whatever_its_quotes_and_spacing() -> None:
    text = "The default is \u2018off\u2019 for this variable. " + CHUNK
    row = build_row(
        Candidate("bash", "d", "bash:d#0", text, []),
        "What is the default of the show-all-if-ambiguous variable?",
        "'off'",
    )
    assert isinstance(row, dict) and row["answer_sentences"] == [0]


def test_a_reworded_answer_is_located_by_the_sentence_it_restates() -> None:
    row = build_row(
        cand(),
        "What does the ssl parameter of the listen directive do?",
        "It makes every connection on the port use TLS.",
    )
    assert isinstance(row, dict) and row["located"] == "sentence"
    assert row["sentence"] == "The ssl parameter makes every connection on the port use TLS."
    assert "TLS" not in row["negative"] and "port 80" in row["negative"]
    repeated = "Note: the ssl parameter makes every connection on the port use TLS."
    again = build_row(
        Candidate("nginx", "doc.txt", "nginx:doc.txt#3", CHUNK, [*OTHERS, repeated]),
        "What does the ssl parameter of the listen directive do?",
        "It makes every connection on the port use TLS.",
    )
    assert isinstance(again, dict) and repeated not in again["others"]
    # an answer that restates no one sentence locates nothing
    assert build_row(cand(), "What does nginx do with its ports?", "serves mail and video") == (
        "answer not in chunk"
    )


def test_questions_that_cannot_label_a_pair_are_refused() -> None:
    c = cand()
    assert build_row(c, "Which port does nginx use by default?", "port 443") == (
        "answer not in chunk"
    )
    assert build_row(c, "What does the passage say about port 80?", "80") == "names the passage"
    assert build_row(c, "Does nginx listen on port 80 by default?", "port 80") == (
        "answer in question"
    )
    assert build_row(c, "Which port by default", "port 80") == "not a question"
    long_answer = " ".join(["word"] * 20)
    assert build_row(c, "What does the ssl parameter do here?", long_answer) == "answer length"
    everywhere = Candidate("x", "d", "x:d#0", "Port one is set. Port two is set too.", [])
    assert build_row(everywhere, "What happens to each of the ports?", "set") == (
        "answer in every sentence"
    )


def test_a_reply_gives_one_row_per_distinct_question() -> None:
    reply = (
        "Q: Which port does nginx listen on by default for HTTP?\nA: port 80\n\n"
        "Q1: What makes connections on a listen port use TLS?\nA1: The ssl parameter\n\n"
        "Q: Which port does nginx listen on by default for HTTP?\nA: port 80\n"
        "Q: What does the passage describe?\nA: listen"
    )
    assert len(parse_reply(reply)) == 4
    rows, refused = rows_from_reply(cand(), reply)
    assert [r["answer"] for r in rows] == ["port 80", "The ssl parameter"]
    assert sorted(refused) == ["names the passage", "repeated"]
    assert rows_from_reply(cand(), "I cannot help with that.") == ([], ["no questions"])


def test_the_store_survives_a_torn_tail_and_keeps_appending(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl.gz"
    construct.append_rows(path, [{"n": 1}, {"n": 2}])
    construct.append_rows(path, [{"n": 3}])
    whole = path.read_bytes()
    # members are plain gzip: any reader sees every row
    assert gzip.decompress(whole).decode().count("\n") == 3
    path.write_bytes(whole + gzip.compress(b'{"n": 4}\n')[:-9])  # killed mid-write
    assert [r["n"] for r in open_store(path)] == [1, 2, 3]
    assert path.read_bytes() == whole  # the torn member is cut off
    construct.append_rows(path, [{"n": 5}])
    assert [r["n"] for r in construct.read_rows(path)[0]] == [1, 2, 3, 5]


def test_only_prose_chunks_are_asked_about() -> None:
    assert construct.is_prose(CHUNK * 2)
    listing = "\n".join(f"--opt-{i} VALUE  set {i}" for i in range(60))
    assert not construct.is_prose(listing)


def test_the_corpora_read_their_markup_as_prose() -> None:
    page = (
        "<html><head><title>T</title><script>var x=1;</script></head><body>"
        "<nav>Home | Next</nav><h1>Ownership</h1><p>Each value has an <code>owner</code>."
        "</p><pre>let s = String::new();</pre><p>Values are dropped at scope end.</p>"
        "</body></html>"
    )
    text = html_text(page)
    assert "Each value has an owner." in text and "Values are dropped" in text
    assert "String::new" not in text and "var x" not in text and "Home" not in text
    assert "String::new" in html_text(page, keep_pre=True)
    pod = "=head1 NAME\n\nperlfunc - builtins\n\n    my $x = 1;\n\nUse C<print> with E<lt>fhE<gt>."
    assert _pod(pod) == "NAME\n\nperlfunc - builtins\n\nUse print with <fh>."
    rst = (
        "add_library\n-----------\n\n.. code-block:: cmake\n\n  add_library(x)\n\n"
        "Adds a target named ``<name>``; see :command:`target_sources`.\n"
    )
    assert _rst(rst) == "add_library\n\nAdds a target named <name>; see target_sources."
    adoc = "NAME\n----\ngit-add - Add files\n\n------------\n$ git add .\n------------\nDone.\n"
    assert "$ git add" not in _asciidoc(adoc) and "Add files" in _asciidoc(adoc)
