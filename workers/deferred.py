"""Modules the fork server's imports pull in and no sentinel uses, left unloaded.

pyte imports wcwidth, whose ``textwrap`` module imports ``secrets`` for one function a
pane never calls. ``secrets`` brings ``random``, whose at-fork hook reseeds a Mersenne
Twister in every forked process (44 more pages copied in each sentinel and each
intermediate), and ``hashlib`` with OpenSSL's libcrypto (37 more mappings that every
fork and exit walk). ``dataclasses`` (the protocol's messages) imports ``inspect``,
which brings ``ast``, ``dis`` and ``tokenize``, for the signature it writes into a
class without a docstring: ~0.9 MiB of heap that every fork copies the page tables of
and every exit unmaps. Until an attribute is read, such a module is a stand-in that
then loads the real one. The fork server imports this first, before pyte; the daemon,
which needs ``secrets`` for its tokens, never does.
"""

from __future__ import annotations

import importlib
import sys
import types


class Deferred(types.ModuleType):
    """Stands in for a module until its first attribute is read, then loads it."""

    def __getattr__(self, attr: str) -> object:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def defer(name: str) -> None:
    if name not in sys.modules:
        sys.modules[name] = Deferred(name)


defer("secrets")
defer("inspect")
