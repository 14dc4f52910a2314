"""What the fork server imports is what every sentinel's fork and exit copy and walk: no
module with an at-fork hook (``random``, ``logging``, ``threading``), and none of what
``secrets`` would bring (``hashlib`` and OpenSSL's libcrypto) or ``inspect`` (``ast``,
``dis``, ``tokenize``) unless something uses it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def loaded_after(code: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_the_fork_server_leaves_out_what_no_sentinel_uses() -> None:
    got = loaded_after(
        "import json, sys\n"
        "import workers.forkserver\n"
        "from workers import sentinel\n"
        "sentinel.warm_up()\n"  # a pane's hot paths, as the fork server runs them
        "maps = open('/proc/self/maps').read()\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'crypto': 'libcrypto' in maps,\n"
        "  'secrets': type(sys.modules['secrets']).__name__,\n"
        "  'inspect': type(sys.modules['inspect']).__name__}))\n"
    )
    modules = set(got["modules"])
    assert not modules & {"random", "hashlib", "_hashlib", "hmac", "logging", "threading"}
    assert not modules & {"ast", "dis", "tokenize"}
    assert "pyte" in modules and "wcwidth" in modules  # what sentinels do need is there
    assert got["crypto"] is False
    assert got["secrets"] == "Deferred"
    assert got["inspect"] == "Deferred"


def test_a_deferred_module_loads_on_first_use() -> None:
    got = loaded_after(
        "import json, sys\n"
        "import workers.deferred\n"
        "import secrets\n"
        "from wcwidth import textwrap\n"
        "token = secrets.token_hex(4)\n"
        "again = textwrap.secrets.token_bytes(2)\n"  # a module that bound the stand-in
        "import dataclasses\n"
        "@dataclasses.dataclass\n"
        "class NoDoc:\n"  # dataclasses writes its signature into __doc__ with inspect
        "    x: int\n"
        "print(json.dumps({'token': token, 'again': len(again),\n"
        "  'now': type(sys.modules['secrets']).__name__, 'random': 'random' in sys.modules,\n"
        "  'doc': NoDoc.__doc__, 'inspect': type(sys.modules['inspect']).__name__}))\n"
    )
    assert len(got["token"]) == 8
    assert got["again"] == 2
    assert got["now"] == "module" and got["random"] is True
    assert got["doc"] == "NoDoc(x: int)" and got["inspect"] == "module"
