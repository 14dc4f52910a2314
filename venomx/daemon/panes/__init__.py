"""The pane owner (``Panes``) and everything it alone uses: the sentinels, their
requests, the spawn sequence, termination, the watch on a pane's processes, and the
retention of exited panes."""

from venomx.daemon.panes.owner import Panes

__all__ = ["Panes"]
