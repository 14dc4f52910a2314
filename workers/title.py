"""Process titles (``venomx-forkserver``, ``venomx-sentinel <pane>``) via setproctitle.

setproctitle's package ``__init__`` imports ``logging``, which imports ``threading``; both
register at-fork hooks that then run Python code in every child of the fork server, twice
per pane (the intermediate and the sentinel). Right after a fork every page that code
touches is copied, and those copies were a fifth of a pane start's page faults. The
package's C extension does all the work and imports neither, so it is loaded on its own;
the plain import remains the fallback.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable


def _setter() -> Callable[[str], None]:
    spec = importlib.util.find_spec("setproctitle")  # finds the package, does not run it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_setproctitle" + suffix)
            if not os.path.exists(path):
                continue
            try:
                name = "setproctitle._setproctitle"
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                ext = importlib.util.spec_from_file_location(name, path, loader=loader)
                assert ext is not None
                module = importlib.util.module_from_spec(ext)
                loader.exec_module(module)
                setter: Callable[[str], None] = module.setproctitle
                return setter
            except Exception:  # any surprise: take the documented way
                break
    import setproctitle

    return setproctitle.setproctitle


_set = _setter()


def set_title(title: str) -> None:
    """Set this process's title (advisory: a failure is ignored)."""
    try:
        _set(title)
    except Exception:  # pragma: no cover
        pass
