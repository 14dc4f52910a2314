"""The cost of hostile output to a pane's terminal, measured by scripts/bench."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workers.vt import Terminal


def _rep(unit: bytes, n: int, head: bytes = b"") -> bytes:
    return head + unit * max(1, (n - len(head)) // len(unit))


def _noise(n: int) -> bytes:
    import random

    return random.Random(14).randbytes(n)


COST_PATTERNS: dict[str, Callable[[int], bytes]] = {
    "seq": lambda n: b"".join(b"%d\r\n" % i for i in range(n // 6))[:n],
    "random": _noise,
    "combining": lambda n: _rep("\u0301".encode(), n, b"a"),
    "combining_nul": lambda n: _rep("\u0301\x00".encode(), n, b"a"),
    "zero_width": lambda n: _rep("\u200b".encode(), n, b"a"),
    "zero_width_col0": lambda n: _rep("\u200b".encode(), n),
    "c0_in_text": lambda n: _rep(b"a\x01\x02", n),
    "csi_4300_digits": lambda n: _rep(b"\x1b[" + b"9" * 4300 + b"m", n),
    "csi_many_params": lambda n: _rep(b"1;", n, b"\x1b["),
    "osc_endless": lambda n: _rep(b"t", n, b"\x1b]0;"),
    "erase_crashers": lambda n: _rep(b"\x1b[3K\x1b[4J", n),
    "scroll_region_lf": lambda n: _rep(b"\n", n, b"\x1b[2;23r\x1b[23H"),
    "reverse_index": lambda n: _rep(b"\x1bM", n, b"\x1b[2;23r\x1b[2H"),
    "insert_lines": lambda n: _rep(b"\x1b[9999L", n),
    "insert_chars": lambda n: _rep(b"\x1b[9999@", n),
    "cursor_moves": lambda n: _rep(b"\x1b[9999B\x1b[9999C\x1b[9999A\x1b[9999D", n),
    "tab_stops_everywhere": lambda n: _rep(b"\t", n, b"\x1b[H" + b"\x1bH\x1b[C" * 80),
    "decaln_ed2": lambda n: _rep(b"\x1b#8\x1b[2J", n),
    "reverse_video": lambda n: _rep(b"\x1b[?5h\x1b[?5l", n, b"x" * 1920),
    "wide": lambda n: _rep("宽".encode(), n),
}


def vt_costs(
    n: int = 200_000, cols: int = 80, rows: int = 24, tries: int = 3
) -> list[dict[str, Any]]:
    """CPU time to feed each hostile pattern of about ``n`` and ``2n`` bytes, best of
    ``tries``, in a sentinel's 128 KiB reads; a ``ratio`` near 2 means linear cost."""
    import time

    out: list[dict[str, Any]] = []
    for name, make in COST_PATTERNS.items():
        result: dict[str, Any] = {"pattern": name}
        for label, size in (("n", n), ("2n", 2 * n)):
            data = make(size)
            best = float("inf")
            for _ in range(tries):
                term = Terminal(cols, rows)
                t0 = time.process_time()
                for i in range(0, len(data), 131072):
                    term.feed(data[i : i + 131072])
                term.snapshot()
                best = min(best, time.process_time() - t0)
            result[f"bytes_{label}"] = len(data)
            result[f"seconds_{label}"] = best
        result["ratio"] = result["seconds_2n"] / max(result["seconds_n"], 1e-9)
        result["mb_per_s"] = result["bytes_2n"] / max(result["seconds_2n"], 1e-9) / 1e6
        out.append(result)
    return out


# Shapes whose cost per sequence grows with the pane's geometry, which a program may set
# itself (``pane.resize`` of its own pane): (name, cols, rows, repeated unit).
WIDE_PATTERNS: list[tuple[str, int, int, bytes]] = [
    ("bare LF, 65535 columns", 65535, 16, b"\n"),
    ("text and bare LF, 65535 columns", 65535, 16, b"ab\r\x1b[K\n"),
    ("bare LF carrying the column, 65535 columns", 65535, 16, b"\nb"),
    ("REP to the line's end, 65535 columns", 65535, 16, b"a\x1b[65535b"),
    ("insert mode and REP, 65535 columns", 65535, 16, b"\x1b[4h\rb\x1b[65535b"),
    ("insert mode, a character and SGR, 65535 columns", 65535, 16, b"\x1b[4hb\x1b[m"),
    ("tab stop set and tab, 65535 columns", 65535, 16, b"\x1bH\t"),
    ("RIS, 65535 columns", 65535, 16, b"\x1bc"),
    ("SU 999, 1024 rows", 1024, 1024, b"\x1b[999S"),
    ("DECALN, 1024 x 1024", 1024, 1024, b"\x1b#8"),
    ("DECALN then SU, 1024 x 1024", 1024, 1024, b"\x1b#8\x1b[999S"),
]


def wide_costs(seconds: float = 1.0, most: int = 1 << 20) -> list[dict[str, Any]]:
    """Bytes per CPU second of each wide-pane shape, fed in 4 KiB reads for about
    ``seconds`` of CPU (or ``most`` bytes): the constant a program buys by choosing its
    pane's size."""
    import time

    out: list[dict[str, Any]] = []
    for name, cols, rows, unit in WIDE_PATTERNS:
        term = Terminal(cols, rows)
        chunk = unit * max(1, 4096 // len(unit))
        fed = 0
        t0 = time.process_time()
        while fed < most and time.process_time() - t0 < seconds:
            term.feed(chunk)
            fed += len(chunk)
        spent = max(time.process_time() - t0, 1e-9)
        out.append({"pattern": name, "bytes": fed, "seconds": spent, "kb_per_s": fed / spent / 1e3})
    return out
