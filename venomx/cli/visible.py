"""Text for a person's terminal, with its control characters shown instead of obeyed.

What the CLI prints for a person carries strings a pane's program chose (its argv0 for a
split it started, names it gave): written raw, an escape sequence among them would set
the person's clipboard (OSC 52), title or colours. Rows of output are already plain text
(the VT keeps no control characters); this is for everything else.
"""

from __future__ import annotations

import re
from typing import Any

from venomx.wire import dumps

# C0 but the newline that separates lines, DEL, and C1 (ESC's 8-bit forms)
_ESCAPED = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x0A}


def visible(text: str) -> str:
    """``text`` with every control character but newline written as ``\\xNN``."""
    return text.translate(_ESCAPED)


# JSON escapes C0 itself; DEL and C1 (U+009B is CSI, U+009D OSC) it leaves as they are
_RAW_IN_JSON = re.compile("[\x7f-\x9f]")


def json_line(obj: Any) -> bytes:
    """``obj`` as the one line of compact JSON the CLI prints, with DEL and C1 written as
    ``\\u00XX``: the same value, and nothing a terminal would act on."""
    data = dumps(obj)
    text = data.decode()
    if _RAW_IN_JSON.search(text) is None:
        return data
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


__all__ = ["json_line", "visible"]
