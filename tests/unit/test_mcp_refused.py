"""What the MCP adapter answers for a line the SDK's reader refused (``refused.answer``)."""

from __future__ import annotations

import mcp.types as types
import pytest

from venomx.mcp.refused import answer


def _refused(line: str) -> Exception:
    """What the SDK's stdio reader hands the server for ``line``."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:
        return exc
    raise AssertionError(f"the SDK reads {line!r}")


def _request(rid: str, params: str = '{"x":"\\ud800"}') -> str:
    return '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}' % (rid, params)


@pytest.mark.parametrize(
    ("rid", "expected"),
    [
        ("7", 7),
        ('"a"', "a"),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", None),  # past any id a client meant
        ("9" * 5000, None),
        ("true", None),
        ("1.5", None),
        ("null", None),
        ('"\\udc80"', None),  # an id that cannot be written back
    ],
)
def test_a_request_is_answered_with_its_id_when_it_can_be_written_back(
    rid: str, expected: object
) -> None:
    reply = answer(_refused(_request(rid)))
    assert reply is not None
    assert reply.id == expected
    assert reply.error.code == types.INVALID_REQUEST
    reply.model_dump_json()  # the SDK can write it


@pytest.mark.parametrize(
    "line",
    [
        "",
        "  \t",
        '{"jsonrpc":"2.0","method":"notifications/x","params":{"x":"\\ud800"}}',
        '{"jsonrpc":"2.0","id":1,"result":{"x":"\\ud800"}}',  # a response: never answered
    ],
)
def test_a_blank_line_a_notification_or_a_response_gets_no_answer(line: str) -> None:
    assert answer(_refused(line)) is None


def test_text_that_is_not_json_is_a_parse_error_with_no_id() -> None:
    reply = answer(_refused('{"jsonrpc":"2.0","id":1,'))
    assert reply is not None and reply.id is None and reply.error.code == types.PARSE_ERROR


@pytest.mark.parametrize(
    "line",
    [
        "[1,2]",
        '{"jsonrpc":"2.0","method":5}',
        _request("1", "[" * 5000 + "]" * 5000),  # deeper than Python reads too
    ],
)
def test_json_that_is_no_message_is_an_invalid_request_with_no_id(line: str) -> None:
    reply = answer(_refused(line))
    assert reply is not None and reply.id is None and reply.error.code == types.INVALID_REQUEST


def test_an_exception_that_is_no_refused_line_gets_no_answer() -> None:
    assert answer(OSError("read failed")) is None


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}',
        '{"jsonrpc":"2.0","id":7,"method":5}',
        '{"jsonrpc":"2.0","id":7}',
    ],
)
def test_json_rpc_of_the_wrong_shape_is_answered_with_its_id(line: str) -> None:
    reply = answer(_refused(line))
    assert reply is not None and reply.id == 7 and reply.error.code == types.INVALID_REQUEST


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","method":"notifications/x","params":5}',
        '{"jsonrpc":"2.0","id":7,"result":5}',
        '{"jsonrpc":"2.0","id":7,"error":{"code":"x"}}',
    ],
)
def test_a_notification_or_response_of_the_wrong_shape_gets_no_answer(line: str) -> None:
    assert answer(_refused(line)) is None
