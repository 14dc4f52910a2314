"""Lines the SDK's reader refused, answered as JSON-RPC 2.0 says instead of dropped.

The ``mcp`` SDK's stdio reader parses each line strictly and hands the server an
exception for one it cannot read, which the server only logs. JSON that is valid but
holds a lone surrogate escape (``"\\ud800"``) or an integer of more than 4,300 digits
is such a line: a request written so was never answered, and the agent's call waited
for ever. Each refused line is now answered: a parse error for text that is not JSON,
an invalid request (with the request's id when it has a usable one) for the rest. A
notification or a response is never answered. A refused line is never passed on to
the server with its odd text: the SDK cannot write a lone surrogate, and one echoed in
an answer (an unknown tool's name, a validation message) would end the adapter.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

# The longest integer Python reads from text by default (sys.get_int_max_str_digits).
INT_DIGITS = 4300
DEPTH = 200  # about where the SDK's JSON reader stops (its recursion limit)
ID_MAX = 2**63  # a request id beyond this is not one a client meant
READ_ONLY = (
    "the request holds text that is not Unicode (a lone surrogate escape), an integer of "
    f"more than {INT_DIGITS} digits, or JSON nested more than about {DEPTH} deep"
)
NOT_RPC = "not a JSON-RPC 2.0 message"


def _int(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:  # more digits than Python reads: only its size matters here
        return float("-inf") if text.startswith("-") else float("inf")


def _usable_id(message: dict[str, Any]) -> int | str | None:
    """The request's id, if it can be written back as it came; else None (JSON null)."""
    rid = message.get("id")
    if isinstance(rid, bool):
        return None
    if isinstance(rid, int):
        return rid if -ID_MAX <= rid < ID_MAX else None
    if isinstance(rid, str):
        try:
            rid.encode()
        except UnicodeEncodeError:
            return None
        return rid
    return None


def answer(refused: Exception) -> types.JSONRPCError | None:
    """The answer to a line the SDK refused (``refused`` is what its reader gave the
    server instead), or None for a line that gets none."""
    if not isinstance(refused, ValidationError):
        return None
    errors = refused.errors(include_url=False)
    line = errors[0].get("input") if errors and errors[0]["type"] == "json_invalid" else None
    if isinstance(line, str):
        if not line.strip():
            return None  # a blank line between messages
        try:
            message = json.loads(line, parse_int=_int)
        except ValueError:
            return _error(None, types.PARSE_ERROR, "not JSON")
        except RecursionError:  # deeper than Python reads either: its id is not known
            return _error(None, types.INVALID_REQUEST, READ_ONLY)
        why = READ_ONLY
    else:
        message, why = _whole(errors), NOT_RPC
    if not isinstance(message, dict):
        return _error(None, types.INVALID_REQUEST, NOT_RPC)
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response (to a request of ours): never answered
    if "id" not in message and isinstance(message.get("method"), str):
        return None  # a notification: never answered
    return _error(_usable_id(message), types.INVALID_REQUEST, why)


def _whole(errors: list[Any]) -> Any:
    """The message the SDK read as JSON but could not take as JSON-RPC, from its errors:
    each names the value it was given, and the whole message is the value of a root
    error (``model_type``) or the object a field is ``missing`` from."""
    for e in errors:
        loc = e.get("loc", ())
        if len(loc) == 1 or (len(loc) == 2 and e.get("type") == "missing"):
            return e.get("input")
    return None


def _error(rid: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message)
    )


class Answering:
    """The SDK's read stream (``read``), as the server reads it, with an answer written
    to ``write`` for each line the reader refused."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's dispatcher asks for it)."""
        return getattr(self._read, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._read.receive()
            if not isinstance(item, Exception):
                return item  # type: ignore[no-any-return]
            reply = answer(item)
            if reply is not None:
                try:
                    await self._write.send(SessionMessage(reply))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # the host's side is gone: lost like any answer would be

    async def aclose(self) -> None:
        await self._read.aclose()

    def __aiter__(self) -> Answering:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Answering:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
