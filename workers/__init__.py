"""Processes that run outside the daemon: the fork server and one sentinel per pane.

Nothing in this package imports ``venomx``; a test enforces it so a sentinel stays small.
"""
