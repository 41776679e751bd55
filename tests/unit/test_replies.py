"""A node's reply parsed within bounds (``chainfence._node.replies``): nesting checked without recursion,
integers bounded, and the quantities and header fields read from it bounded in width.

The process running this suite has imported eth_account, whose py_ecc raised the recursion limit to
100,000: a recursive parse of a reply nested that deep would crash it (the controls run in a child).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from chainfence._core.limits import MAX_REPLY_DEPTH
from chainfence._node.formats import quantity
from chainfence._node.headers import header_fields
from chainfence._node.replies import check_depth, parse
from chainfence._node.transports import ReplyRefused

DEEP = 100_000


def nested(depth: int, inner: bytes = b"") -> bytes:
    return b"[" * depth + inner + b"]" * depth


def test_the_suite_runs_where_a_recursive_parse_of_a_deep_reply_would_crash():
    assert sys.getrecursionlimit() == 100_000, "py_ecc (through eth_account) raised it"


def test_a_reply_nested_to_the_limit_parses_one_level_more_is_refused():
    assert parse(nested(MAX_REPLY_DEPTH, b"1")) == json.loads(nested(MAX_REPLY_DEPTH, b"1"))
    with pytest.raises(ReplyRefused, match=f"nested deeper than {MAX_REPLY_DEPTH} levels"):
        parse(nested(MAX_REPLY_DEPTH + 1))
    objects = b'{"a":' * (MAX_REPLY_DEPTH + 1) + b"1" + b"}" * (MAX_REPLY_DEPTH + 1)
    with pytest.raises(ReplyRefused, match="nested deeper"):
        parse(objects)


def test_a_reply_nested_100000_deep_is_refused_without_recursion():
    with pytest.raises(ReplyRefused, match="nested deeper"):
        parse(b'{"jsonrpc":"2.0","id":1,"result":' + nested(DEEP) + b"}")
    with pytest.raises(ReplyRefused, match="nested deeper"):
        parse(b"[1," * DEEP + b"1" + b"]" * DEEP)  # not one bracket after another: still peeled level by level


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"result": ["[" * 500, "]{" * 500, 'a "quoted" [ \\', {"x": "}" * 300}]}).encode()
    assert parse(text) == json.loads(text)


def test_closing_brackets_inside_strings_do_not_hide_a_deep_reply():
    """A bracket count that ignored strings would see these ``]`` close each level: flat."""
    for level in (b'["]",', b'["\\"]",', b'["\\\\",'):  # "]"   "\"]"   "\\" (an escaped backslash)
        data = level * DEEP + b"1" + b"]" * DEEP
        with pytest.raises(ReplyRefused, match="nested deeper"):
            parse(data)
        shallow = level * MAX_REPLY_DEPTH + b"1" + b"]" * MAX_REPLY_DEPTH
        assert parse(shallow) == json.loads(shallow)


def test_many_shallow_brackets_parse():
    logs = json.dumps([{"topics": ["0x01", "0x02"], "data": "0x"} for _ in range(5_000)]).encode()
    assert parse(logs) == json.loads(logs)


def test_brackets_that_cannot_pair_are_refused():
    """(Only a reply of more brackets than the depth limit is scanned: json refuses the others itself, at
    no depth.)"""
    with pytest.raises(ReplyRefused, match="do not pair"):
        check_depth(b"[}" + b"[]" * MAX_REPLY_DEPTH)
    with pytest.raises(ReplyRefused, match="do not pair"):
        check_depth(b"[]" * (MAX_REPLY_DEPTH + 1) + b"]")


def test_the_start_of_a_reply_is_not_refused_for_what_it_has_not_closed_yet():
    """A reply read a line at a time (IPC) is parsed until it is whole: its start is not a deep reply."""
    start = json.dumps([{"topics": [str(i)]} for i in range(100)]).encode()[:-40]
    check_depth(start)
    with pytest.raises(ValueError):
        parse(start)  # not whole yet: json's own ValueError, the reader reads on
    with pytest.raises(ReplyRefused, match="nested deeper"):
        check_depth(b"[" * (MAX_REPLY_DEPTH + 1))  # a start that is too deep already


def test_a_wide_integer_is_refused_typed_not_a_valueerror_later():
    assert parse(b'{"id": ' + b"9" * 78 + b"}") == {"id": int("9" * 78)}
    with pytest.raises(ReplyRefused, match="79 digits"):
        parse(b'{"id": ' + b"9" * 79 + b"}")
    with pytest.raises(ReplyRefused, match="5000 digits"):
        parse(b'{"id": ' + b"9" * 5_000 + b"}")  # json.loads: ValueError (Python's int-string limit)


def test_control_json_loads_raises_an_untyped_valueerror_for_a_5000_digit_integer():
    with pytest.raises(ValueError, match="integer string conversion") as raised:
        json.loads(b'{"id": ' + b"9" * 5_000 + b"}")
    assert not isinstance(raised.value, ReplyRefused)


def test_what_is_not_json_is_a_valueerror_as_json_loads_says():
    for data in (b"<html>", b"\xff\xfe", b'{"a": 1', b""):
        with pytest.raises(ValueError):
            parse(data)


def test_quantities_wider_than_256_bits_are_refused():
    assert quantity("0x" + "f" * 64) == (1 << 256) - 1
    with pytest.raises(ValueError, match="wider than 256 bits"):
        quantity("0x" + "f" * 65)
    with pytest.raises(ValueError, match="wider than 256 bits"):
        quantity(1 << 256)


def test_a_headers_number_and_time_are_64_bits_its_other_quantities_256(mainnet_block):
    header_fields(mainnet_block)
    for name, digits in (("number", 17), ("timestamp", 17), ("gasLimit", 65), ("difficulty", 65)):
        with pytest.raises(ValueError, match=f"{name} is wider than"):
            header_fields({**mainnet_block, name: "0x1" + "0" * (digits - 1)})
    with pytest.raises(ValueError, match="number is wider than 64 bits"):
        header_fields({**mainnet_block, "number": "0x" + "f" * 4_000})


@pytest.fixture
def mainnet_block():
    from tests.unit.mainnet_headers import JSON_VECTORS

    return dict(next(iter(JSON_VECTORS.values())))


CHILD = """
import sys, eth_account, web3
assert sys.getrecursionlimit() == 100_000
data = b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
if sys.argv[1] == "naive":
    import json
    json.loads(data)
else:
    from chainfence._node.replies import parse
    from chainfence._node.transports import ReplyRefused
    try:
        parse(data)
    except ReplyRefused as refused:
        print("refused:", refused)
"""


def test_in_a_process_that_imported_web3_a_100000_deep_reply_is_refused():
    run = subprocess.run([sys.executable, "-c", CHILD, "parse"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "refused: the reply is nested deeper than 64 levels" in run.stdout, run


def test_control_json_loads_of_it_there_is_killed_by_sigsegv():
    run = subprocess.run([sys.executable, "-c", CHILD, "naive"], capture_output=True, text=True, timeout=120)
    assert run.returncode == -signal.SIGSEGV, run


def test_a_log_page_too_long_is_a_refused_range():
    """As a provider's own size limit: the pager (``_node/events.py``) asks half the range."""
    from chainfence._node.failures import translate
    from chainfence.errors import LogRangeRefused, NodeUnreachable

    too_long = ReplyRefused("the node's reply is longer than 16777216 bytes", too_long=True)
    assert isinstance(translate(too_long, "eth_getLogs"), LogRangeRefused)
    refused = translate(too_long, "eth_getBlockByNumber")
    assert isinstance(refused, NodeUnreachable) and refused.reason == str(too_long)
    assert not isinstance(
        translate(ReplyRefused("the reply is nested deeper than 64 levels"), "eth_getLogs"), LogRangeRefused
    )
