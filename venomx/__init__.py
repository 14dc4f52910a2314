"""venomx: a headless terminal multiplexer daemon for trusted command execution."""

__version__ = "0.1.0"
PROTOCOL = 1
