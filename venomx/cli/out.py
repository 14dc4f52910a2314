"""A line on stdout or stderr, as ``click.echo`` writes it, for the calls that never load
click. (Nothing the CLI prints holds an escape sequence for click to strip: JSON escapes
them and human text shows them as ``\\xNN``.)"""

from __future__ import annotations

import sys


def echo(text: str, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # closed at start, as click allows
        return
    stream.write(text + "\n")
    stream.flush()


__all__ = ["echo"]
