"""Generated from the manifest by ``python -m venomx.cli.facts``: do not edit.

Each CLI verb's row, as ``venomx.cli.facts.Row`` describes it.
"""

# ruff: noqa: E501
from typing import Any

# fmt: off
VERBS: dict[str, Any] = {
    'whoami': (False, False, False, 'fields', None, None, ()),
    'session.create': (False, False, False, 'fields', None, None, (('name', 'string', None, None, None), ('reuse', 'boolean', None, None, None))),
    'session.list': (False, False, False, 'fields', None, None, ()),
    'session.get': (False, False, False, 'fields', None, None, (('session', 'string', None, None, None),)),
    'session.remove': (False, False, False, 'fields', None, None, (('session', 'string', None, None, None), ('recursive', 'boolean', None, None, None))),
    'window.create': (True, False, False, 'fields', None, None, (('session', 'string', None, None, None), ('name', 'string', None, None, None), ('argv', 'array', None, None, None), ('cols', 'integer', 1, 65535, None), ('rows', 'integer', 1, 65535, None), ('grants', 'array', None, None, None), ('cwd', 'string', None, None, None), ('env', 'object', None, None, None), ('env_unset', 'array', None, None, None), ('memory_max', 'integer', 4096, 9007199254740991, None), ('pids_max', 'integer', 1, 4194304, None))),
    'window.get': (False, False, False, 'fields', None, None, (('window', 'string', None, None, None),)),
    'window.remove': (False, False, False, 'fields', None, None, (('window', 'string', None, None, None), ('recursive', 'boolean', None, None, None))),
    'pane.split': (True, False, False, 'fields', None, None, (('pane', 'string', None, None, None), ('axis', 'string', None, None, ('cols', 'rows')), ('argv', 'array', None, None, None), ('cols', 'integer', 1, 65535, None), ('rows', 'integer', 1, 65535, None), ('grants', 'array', None, None, None), ('cwd', 'string', None, None, None), ('env', 'object', None, None, None), ('env_unset', 'array', None, None, None), ('memory_max', 'integer', 4096, 9007199254740991, None), ('pids_max', 'integer', 1, 4194304, None))),
    'pane.list': (False, False, False, 'fields', None, None, (('session', 'string', None, None, None), ('window', 'string', None, None, None))),
    'pane.send': (False, False, False, 'fields', None, None, (('pane', 'string', None, None, None), ('text', 'string', None, None, None), ('keys', 'array', None, None, None), ('data', 'string', None, None, None))),
    'pane.resize': (False, False, False, 'fields', None, None, (('pane', 'string', None, None, None), ('cols', 'integer', 1, 65535, None), ('rows', 'integer', 1, 65535, None))),
    'pane.kill': (False, False, False, 'fields', None, None, (('pane', 'string', None, None, None), ('signal', 'string', None, None, ('SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGKILL', 'SIGUSR1', 'SIGUSR2', 'SIGABRT', 'SIGALRM', 'SIGCONT', 'SIGSTOP', 'SIGTSTP', 'SIGWINCH', 'SIGPIPE')), ('grace_ms', 'integer', 0, 3600000, None))),
    'pane.remove': (False, False, False, 'fields', None, None, (('pane', 'string', None, None, None),)),
    'pane.cleanup': (False, False, False, 'fields', None, None, (('pane', 'string', None, None, None), ('signal', 'string', None, None, ('SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGKILL', 'SIGUSR1', 'SIGUSR2', 'SIGABRT', 'SIGALRM', 'SIGCONT', 'SIGSTOP', 'SIGTSTP', 'SIGWINCH', 'SIGPIPE')), ('grace_ms', 'integer', 0, 3600000, None))),
    'pane.capture_rows': (False, False, False, 'fields', None, None, (('pane', 'string', None, None, None), ('epoch', 'integer', -4611686018427387904, 4611686018427387904, None), ('start', 'integer', -4611686018427387904, 4611686018427387904, None), ('end', 'integer', -4611686018427387904, 4611686018427387904, None), ('limit', 'integer', 1, 10000, None))),
    'pane.attach': (False, True, False, 'fields', None, None, (('pane', 'string', None, None, None), ('after', 'integer', 0, 9007199254740992, None))),
    'run': (True, False, False, 'fields', None, None, (('key', 'string', None, None, None), ('session', 'string', None, None, None), ('pane', 'string', None, None, None), ('axis', 'string', None, None, ('cols', 'rows')), ('argv', 'array', None, None, None), ('shell', 'string', None, None, None), ('name', 'string', None, None, None), ('cols', 'integer', 1, 65535, None), ('rows', 'integer', 1, 65535, None), ('deadline_ms', 'integer', 1, 86400000, None), ('output_rows', 'integer', 0, 1000, None), ('output_bytes', 'integer', 0, 262144, None), ('source', 'string', None, None, None), ('grants', 'array', None, None, None), ('cwd', 'string', None, None, None), ('env', 'object', None, None, None), ('env_unset', 'array', None, None, None), ('memory_max', 'integer', 4096, 9007199254740991, None), ('pids_max', 'integer', 1, 4194304, None), ('input', 'string', None, None, ('terminal', 'eof')))),
    'run.wait': (False, False, True, 'fields', 'status', None, (('run', 'string', None, None, None), ('timeout_ms', 'integer', 0, 86400000, None), ('output', 'boolean', None, None, None))),
    'run.get': (False, False, False, 'fields', None, None, (('run', 'string', None, None, None), ('output', 'boolean', None, None, None))),
    'run.list': (False, False, False, 'runs', None, None, (('pane', 'string', None, None, None), ('key', 'string', None, None, None), ('after', 'string', None, None, None), ('limit', 'integer', 1, 1024, None))),
    'run.cancel': (False, False, False, 'fields', None, None, (('run', 'string', None, None, None), ('signal', 'string', None, None, ('SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGKILL', 'SIGUSR1', 'SIGUSR2', 'SIGABRT', 'SIGALRM', 'SIGCONT', 'SIGSTOP', 'SIGTSTP', 'SIGWINCH', 'SIGPIPE')), ('grace_ms', 'integer', 0, 3600000, None))),
    'run.cleanup': (False, False, False, 'fields', None, None, (('run', 'string', None, None, None), ('signal', 'string', None, None, ('SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGKILL', 'SIGUSR1', 'SIGUSR2', 'SIGABRT', 'SIGALRM', 'SIGCONT', 'SIGSTOP', 'SIGTSTP', 'SIGWINCH', 'SIGPIPE')), ('grace_ms', 'integer', 0, 3600000, None))),
    'events.subscribe': (False, True, False, 'fields', None, None, (('after', 'integer', 0, 4611686018427387904, None), ('snapshot', 'boolean', None, None, None), ('source', 'string', None, None, None))),
    'events.read': (False, False, False, 'fields', None, None, (('after', 'integer', 0, 4611686018427387904, None), ('limit', 'integer', 1, 1024, None), ('timeout_ms', 'integer', 0, 60000, None))),
    'principal.create': (False, False, False, 'fields', None, None, (('grants', 'array', None, None, None), ('name', 'string', None, None, None))),
    'principal.revoke': (False, False, False, 'fields', None, None, (('principal', 'string', None, None, None),)),
    'config.get': (False, False, False, 'fields', None, None, (('path', 'string', None, None, None),)),
    'config.set': (False, False, False, 'fields', None, None, (('path', 'string', None, None, None), ('value', 'string', None, None, None))),
    'config.reload': (False, False, False, 'fields', None, None, ()),
    'audit.list': (False, False, False, 'fields', None, None, (('after', 'integer', 0, 4611686018427387904, None), ('limit', 'integer', 1, 10000, None))),
    'doctor': (False, False, False, 'doctor', None, 'status', ()),
    'shutdown': (False, False, False, 'fields', None, None, ()),
    'seam.set': (False, False, False, 'fields', None, None, (('name', 'string', None, None, ('run.before_barrier', 'run.after_barrier', 'terminate.unkillable')), ('state', 'string', None, None, ('hold', 'release')))),
    'seam.wait': (False, False, False, 'fields', None, None, (('name', 'string', None, None, ('run.before_barrier', 'run.after_barrier', 'terminate.unkillable')), ('timeout_ms', 'integer', 0, 600000, None))),
}

# what exec passes of the caller's environment (RFC-0013)
ENV_NAME_PATTERN = '[A-Za-z_][A-Za-z0-9_]*'
MAX_ENV_VALUE = 32768
# fmt: on
