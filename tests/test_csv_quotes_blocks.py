"""The CSV quote scanner (finops.ingest.base.CsvQuotes) answers the same whatever the blocks a file is read in:
whole lines skipped in one match, quoted text with doubled quotes matched in one step, and quotes followed one by
one elsewhere must all agree (but the excerpt an error quotes after a closing quote: the block's bytes). Seeded random files of the characters that matter, each read whole and in random
blocks of 1 to 9 bytes."""
from __future__ import annotations

import random
import re

import pytest

from finops.errors import InputError
from finops.ingest.base import CsvQuotes

PIECES = [b'"', b'""', b",", b";", b"\n", b"a", b"q1", b" ", b"\r\n", b'x"y', b'"",', b"q2,", b'"a""b"', b'{""k"": 1}']


def _read(data: bytes, sizes: list[int], delimiter: str):
    q = CsvQuotes("f.csv", ["a", "b", "c", "d"], delimiter)
    try:
        i = k = 0
        while i < len(data):
            size = sizes[k % len(sizes)]
            q.feed(data[i:i + size])
            i, k = i + size, k + 1
        q.finish()
    except InputError as exc:
        # the quoted excerpt after a closing quote is what the block holds of it: left out of the comparison
        return "refused", re.sub(r" \(.{0,30}\), which the reader would drop", "", str(exc)), exc.field
    return "read", q.line, q.inside


@pytest.mark.parametrize("delimiter", [",", ";"])
def test_the_answer_does_not_depend_on_the_blocks(delimiter):
    rng = random.Random(7)
    answers = set()
    for _ in range(4000):
        data = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))
        whole = _read(data, [len(data) + 1], delimiter)
        assert _read(data, [rng.randint(1, 9) for _ in range(4)], delimiter) == whole, data
        answers.add(whole[0])
    assert answers == {"read", "refused"}


def test_quoted_json_cells_read_and_text_after_a_closing_quote_is_refused():
    ok = b'id,meta,tags\nr1,"{""k"": ""v""}","[""prod""]"\nr2,"",plain\n'
    assert _read(ok, [len(ok)], ",") == ("read", 4, False)
    bad = ok + b'r3,"ac"me,x\n'
    kind, message, field = _read(bad, [5], ",")
    assert kind == "refused" and "line 4" in message and field == "b"


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_whole_lines_skipped_are_those_of_fields_each_unquoted_or_quoted_and_closed(delimiter):
    """The one match that skips whole lines (runs of unquoted fields taken whole) ends where the field-by-field
    pattern of such lines ends, from any start."""
    d = re.escape(delimiter.encode())
    cell = rb'(?:"[^"\n\r]*(?:""[^"\n\r]*)*"|[^"' + d + rb'\n\r]*)'
    by_field = re.compile(rb"(?:" + cell + rb"(?:" + d + cell + rb")*\n)*")
    simple = CsvQuotes("f.csv", ["a", "b", "c", "d"], delimiter).simple
    rng = random.Random(11)
    pieces = [*PIECES, delimiter.encode(), delimiter.encode() + b'"', b'"' + delimiter.encode()]
    for _ in range(20000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        for start in (0, rng.randint(0, len(data))):
            assert simple.match(data, start).end() == by_field.match(data, start).end(), (data, start)
