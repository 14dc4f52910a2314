"""Every verb venomx serves: params, result, dispatch right, resource check, exit policy.

Like tmux's ``cmd_table``: one entry per verb, one handler per entry. Schema validation,
the CLI, the MCP tools, docs/verbs.md, docs/skill.md and completions are generated from
this table; a test fails when a verb has no handler or a handler no entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FORMAT = 1
MISSING: Any = object()

SIGNAL_NAMES = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGKILL", "SIGUSR1", "SIGUSR2",
                "SIGABRT", "SIGALRM", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGWINCH", "SIGPIPE")
SEAMS = ("run.before_barrier", "run.after_barrier", "terminate.unkillable")


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # string | integer | boolean | array | object
    summary: str = ""
    required: bool = False
    default: Any = MISSING
    choices: tuple[str, ...] | None = None
    min: int | None = None
    max: int | None = None
    items: str | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    required: bool = True
    summary: str = ""


@dataclass(frozen=True)
class Check:
    """The resource check, done before lookup.

    ``params`` names the params that name the resource (kind = param name); with
    ``scope`` set the check is against that fixed scope (``*`` or ``session:*``).
    ``exactly_one`` gives the error raised when not exactly one of ``params`` is present.
    """

    right: str
    params: tuple[str, ...] = ()
    scope: str | None = None
    exactly_one: str | None = None


@dataclass(frozen=True)
class Verb:
    name: str
    summary: str
    params: tuple[Param, ...] = ()
    result: tuple[Field, ...] = ()
    dispatch: str | None = None
    check: Check | None = None
    exit_field: str | None = None
    streams: bool = False
    errors: tuple[str, ...] = ()
    mcp: str = ""
    internal: bool = False  # protocol verbs (hello, cancel): no CLI command or MCP tool

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def S(name: str, summary: str = "", **kw: Any) -> Param:
    return Param(name, "string", summary, **kw)


def I(name: str, summary: str = "", **kw: Any) -> Param:  # noqa: E743
    return Param(name, "integer", summary, **kw)


def B(name: str, summary: str = "", **kw: Any) -> Param:
    return Param(name, "boolean", summary, **kw)


def F(name: str, kind: str = "string", required: bool = True) -> Field:
    return Field(name, kind, required)


GRANTS = Param("grants", "array", "Grants of the new principal ({right, scope}); default "
               "read/write/spawn on self, narrowed to yours", items="object")
SPAWN_PARAMS = (
    I("cols", "Pane columns", default=80, min=1, max=65535),
    I("rows", "Pane rows", default=24, min=1, max=65535),
    GRANTS,
    S("cwd", "Working directory: an absolute path of an existing directory"),
    Param("env", "object", "Environment variables set on top of the base environment"),
    Param("env_unset", "array", "Environment variable names removed", items="string"),
)
ARGV = Param("argv", "array", "Program and arguments, executed directly with no shell",
             items="string")
SPAWN_RESULT = (F("window"), F("pane"), F("session"), F("principal"), F("pid", "integer"))
PANE_RECORD = (F("pane"), F("window"), F("session"), F("principal"), F("pid", "integer"),
               F("argv0"), F("cols", "integer"), F("rows", "integer"), F("state"),
               F("exit_code", "integer", False), F("signal", "string", False),
               F("run", "string", False), F("created_at"), F("exited_at", "string", False))
ROWS_RESULT = (F("pane"), F("screen"), F("epoch", "integer"), F("offset", "integer"),
               F("cols", "integer"), F("rows", "integer"), F("oldest", "integer"),
               F("start", "integer"), F("end", "integer"), F("lines", "array"),
               F("cursor", "object"))
SPAWN_ERRORS = ("invalid_params.argv", "invalid_params.size", "invalid_params.cwd",
                "invalid_params.env", "invalid_params.name", "invalid_params.grants",
                "denied.spawn", "denied.delegation", "unavailable.spawn",
                "unavailable.shutdown", "conflict.removing")
RUN_FIELDS = ("run", "source", "key", "pane", "window", "session", "principal")


def run_record(wait: bool) -> tuple[Field, ...]:
    req = {"state", "outcome", "status", "completed_at", "duration_ms"} if wait else {"state"}
    return (*(F(n) for n in RUN_FIELDS), F("pid", "integer"), F("shell", "boolean"),
            F("state", "string", True), F("outcome", "string", "outcome" in req),
            F("exit_code", "integer", False), F("signal", "string", False),
            F("cause", "string", False), F("status", "integer", "status" in req),
            F("fault", "string", False),
            F("started_at"), F("completed_at", "string", "completed_at" in req),
            F("duration_ms", "integer", "duration_ms" in req), F("output", "object", False))


READ_RUN = Check("read", ("run",))

VERBS: tuple[Verb, ...] = (
    Verb("hello", "Open the conversation: protocol version, token, frame size. First request.",
         (I("protocol", "Protocol version (1)", required=True, min=1, max=1),
          S("client", "Client name and version"),
          S("token", "@owner, a principal token, or absent for the anonymous caller"),
          I("max_frame", "Largest frame in bytes, both directions", min=4096, max=16777216)),
         (F("protocol", "integer"), F("server"), F("source"), F("principal"),
          F("max_frame", "integer")),
         errors=("invalid_request.hello", "denied.owner", "denied.token"), internal=True),
    Verb("cancel", "Cancel a request in flight on this connection.",
         (I("id", "The request to cancel", required=True, min=-2**63, max=2**63 - 1),),
         (F("cancelled", "boolean"),), internal=True),
    Verb("whoami", "Show the principal this connection acts as, its grants and the source.",
         (), (F("principal"), F("grants", "array"), F("source"))),
    Verb("session.create", "Create a session (a named container of windows).",
         (S("name", "Session name: 1-64 of [A-Za-z0-9._:-]"),),
         (F("session"), F("name", "string", False)), "spawn", Check("spawn", scope="session:*"),
         errors=("invalid_params.name", "denied.spawn", "unavailable.shutdown")),
    Verb("session.list", "List sessions you can read.", (),
         (F("source"), F("sessions", "array")), "read"),
    Verb("session.get", "Show a session and its windows.", (S("session", required=True),),
         (F("session"), F("name", "string", False), F("windows", "array")), "read",
         Check("read", ("session",)), errors=("not_found.session", "denied.read")),
    Verb("session.remove", "Remove a session; with recursive, terminate its live panes "
         "first. Destructive.",
         (S("session", required=True), B("recursive", "Terminate live panes first",
                                         default=False)),
         (F("session"), F("removed", "array")), "write", Check("write", ("session",)),
         errors=("not_found.session", "denied.write", "conflict.live_panes",
                 "conflict.removing", "timeout.terminate")),
    Verb("window.create", "Create a window with one pane running argv (default: the "
         "configured shell). Starts a process.",
         (S("session", required=True), S("name", "Window name"), ARGV, *SPAWN_PARAMS),
         SPAWN_RESULT, "spawn", Check("spawn", ("session",)),
         errors=("not_found.session", *SPAWN_ERRORS)),
    Verb("window.get", "Show a window: its layout and pane records.",
         (S("window", required=True),),
         (F("window"), F("session"), F("name", "string", False), F("layout", "object"),
          F("panes", "array")), "read", Check("read", ("window",)),
         errors=("not_found.window", "denied.read")),
    Verb("window.remove", "Remove a window; with recursive, terminate its live panes first. "
         "Destructive.",
         (S("window", required=True), B("recursive", "Terminate live panes first",
                                        default=False)),
         (F("window"), F("removed", "array")), "write", Check("write", ("window",)),
         errors=("not_found.window", "denied.write", "conflict.live_panes",
                 "conflict.removing", "timeout.terminate")),
    Verb("pane.split", "Split a live pane and run argv in the new pane. Starts a process.",
         (S("pane", required=True), S("axis", "Split axis", required=True,
                                      choices=("cols", "rows")), ARGV, *SPAWN_PARAMS),
         SPAWN_RESULT, "spawn", Check("spawn", ("pane",)),
         errors=("not_found.pane", "conflict.pane_exited", "conflict.pane_terminating",
                 *SPAWN_ERRORS)),
    Verb("pane.list", "List panes you can read, optionally of one session or window.",
         (S("session"), S("window")), (F("source"), F("panes", "array")), "read",
         Check("read", ("session", "window")),
         errors=("not_found.session", "not_found.window", "denied.read")),
    Verb("pane.send", "Send input to a pane: exactly one of text, keys or data (base64).",
         (S("pane", required=True), S("text", "Text, sent as UTF-8"),
          Param("keys", "array", "Key names: Enter, Tab, Escape, Up, C-c, F5, ...",
                items="string"),
          S("data", "Raw bytes, base64")),
         (F("pane"), F("bytes", "integer")), "write", Check("write", ("pane",)),
         errors=("invalid_params.input", "not_found.pane", "denied.write",
                 "conflict.pane_exited", "conflict.pane_terminating", "timeout.input",
                 "unavailable.sentinel")),
    Verb("pane.resize", "Resize a pane's PTY (renumbers rows: the epoch changes).",
         (S("pane", required=True), I("cols", required=True, min=1, max=65535),
          I("rows", required=True, min=1, max=65535)),
         PANE_RECORD, "write", Check("write", ("pane",)),
         errors=("invalid_params.size", "not_found.pane", "denied.write",
                 "conflict.pane_exited", "unavailable.sentinel")),
    Verb("pane.kill", "Stop a pane's process group: signal, grace, then SIGKILL. "
         "Destructive.",
         (S("pane", required=True),
          S("signal", "Signal sent first", default="SIGHUP", choices=SIGNAL_NAMES),
          I("grace_ms", "Milliseconds before SIGKILL", default=2000, min=0, max=3600000)),
         PANE_RECORD, "write", Check("write", ("pane",)),
         errors=("not_found.pane", "denied.write", "timeout.terminate",
                 "unavailable.shutdown")),
    Verb("pane.remove", "Remove an exited pane (and its window when it was the last). "
         "Destructive.",
         (S("pane", required=True),), (F("pane"), F("removed", "array")), "write",
         Check("write", ("pane",)),
         errors=("not_found.pane", "denied.write", "conflict.pane_live")),
    Verb("pane.capture_rows", "Read rows of a pane's screen and history as text.",
         (S("pane", required=True), I("epoch", "Fail unless the row epoch is this", min=1,
                                      max=2**62),
          I("start", "First row", min=0, max=2**62), I("end", "One past the last row",
                                                         min=0, max=2**62),
          I("limit", "Most rows", default=1000, min=1, max=10000)),
         ROWS_RESULT, "read", Check("read", ("pane",)),
         errors=("not_found.pane", "denied.read", "conflict.epoch",
                 "unavailable.sentinel", "unsupported.result_size")),
    Verb("pane.attach", "Stream a pane's output: a repaint, then every byte in order.",
         (S("pane", required=True),), (F("exit", "object"),), "read",
         Check("read", ("pane",)), streams=True,
         errors=("not_found.pane", "denied.read", "unavailable.sentinel")),
    Verb("run", "Start a process (a trusted run) in a new pane and return its run ID once "
         "it has been exec'd. The key makes retries safe: the same key and parameters "
         "return the same run instead of starting the command again. argv uses no shell; "
         "shell runs /bin/sh -c explicitly.",
         (S("key", "Idempotency key: a retry with the same key and parameters returns the "
            "same run instead of starting the command again", required=True),
          S("session", "Run in a new window of this session; give exactly one of session "
            "or pane"),
          S("pane", "Run in a new pane split from this live pane; give exactly one of "
            "session or pane"),
          S("axis", "Split axis; required with pane, not allowed with session",
            choices=("cols", "rows")),
          Param("argv", "array", "Program and arguments, executed directly with no shell; "
                "give exactly one of argv or shell", items="string"),
          S("shell", "Command line run explicitly as /bin/sh -c; give exactly one of argv "
            "or shell"),
          S("name", "Window name; only with session"),
          I("cols", "Pane columns", default=80, min=1, max=65535),
          I("rows", "Pane rows", default=24, min=1, max=65535),
          I("deadline_ms", "Terminate the command this many milliseconds after it starts; "
            "default: no deadline", min=1, max=86400000),
          I("output_rows", "Most rows of output kept in the result", default=100, min=0,
            max=1000),
          I("output_bytes", "Most UTF-8 bytes of output lines kept in the result",
            default=65536, min=0, max=262144),
          S("source", "Fail unless the daemon's event source is this one (detects a daemon "
            "restart between retries)"),
          GRANTS, *SPAWN_PARAMS[3:]),
         (*(F(n) for n in RUN_FIELDS), F("pid", "integer"), F("reused", "boolean")),
         "spawn", Check("spawn", ("session", "pane"), exactly_one="invalid_params.target"),
         errors=("invalid_params.command", "invalid_params.target", "invalid_params.key",
                 "invalid_params.argv", "invalid_params.name", "invalid_params.size",
                 "invalid_params.cwd", "invalid_params.env", "invalid_params.grants",
                 "not_found.session", "not_found.pane", "denied.spawn", "denied.delegation",
                 "conflict.pane_exited", "conflict.pane_terminating", "conflict.removing",
                 "conflict.run_key", "conflict.source", "unavailable.run_limit",
                 "unavailable.spawn", "unavailable.shutdown")),
    Verb("run.wait", "Wait for a run to complete and return its record: outcome, exit code "
         "or signal, status, and the tail of its output. Waiting never stops the run.",
         (S("run", required=True),
          I("timeout_ms", "Fail timeout.wait after this long; 0 checks without waiting; "
            "absent: no limit", min=0, max=86400000),
          B("output", "Include the output tail", default=True)),
         run_record(True), "read", READ_RUN, exit_field="status",
         errors=("not_found.run", "denied.read", "timeout.wait", "unsupported.result_size"),
         mcp="A wait blocks this tool call until the run completes. Pass timeout_ms of at "
             "most 60000 and call again in a loop while it fails timeout.wait; the run "
             "keeps running either way."),
    Verb("run.get", "Show a run's record without waiting.",
         (S("run", required=True), B("output", "Include the output tail", default=True)),
         run_record(False), "read", READ_RUN,
         errors=("not_found.run", "denied.read", "unsupported.result_size")),
    Verb("run.list", "List runs you can read, ordered by run ID, a page at a time.",
         (S("pane", "Only runs of this pane"), S("key", "Only your run with this key"),
          S("after", "List runs after this run ID"),
          I("limit", "Most runs in one page", default=256, min=1, max=1024)),
         (F("source"), F("runs", "array"), F("next", "string", False)), "read",
         Check("read", ("pane",)),
         errors=("not_found.pane", "denied.read", "unsupported.result_size")),
    Verb("run.cancel", "Stop a run: signal its pane's process group, grace, then SIGKILL. "
         "Destructive. Returns the completed record.",
         (S("run", required=True),
          S("signal", "Signal sent first", default="SIGHUP", choices=SIGNAL_NAMES),
          I("grace_ms", "Milliseconds before SIGKILL", default=2000, min=0, max=3600000)),
         run_record(False), "write", Check("write", ("run",)),
         errors=("not_found.run", "denied.write", "timeout.terminate",
                 "unavailable.shutdown")),
    Verb("events.subscribe", "Stream events: a snapshot of entities, then every later event "
         "you may read, live.",
         (I("after", "Resume after this seq (no snapshot unless asked)", min=0, max=2**62),
          B("snapshot", "Send a snapshot first (default: only when after is absent)"),
          S("source", "Fail unless the daemon's source is this one")),
         (F("seq", "integer"),), "read", streams=True,
         errors=("not_found.cursor", "conflict.source", "unavailable.backlog")),
    Verb("events.read", "Read events after a seq, waiting up to timeout_ms for the first.",
         (I("after", "Read events after this seq", min=0, max=2**62),
          I("limit", "Most events", default=256, min=1, max=1024),
          I("timeout_ms", "Wait this long for a first event", default=0, min=0,
            max=60000)),
         (F("source"), F("events", "array"), F("next", "integer")), "read",
         errors=("not_found.cursor",)),
    Verb("principal.create", "Mint a child principal with narrower grants and a token.",
         (GRANTS.__class__("grants", "array", GRANTS.summary, required=True, items="object"),
          S("name", "A label for the principal")),
         (F("principal"), F("token"), F("grants", "array")), None,
         errors=("denied.anonymous", "denied.delegation", "invalid_params.grants",
                 "invalid_params.name")),
    Verb("principal.revoke", "Revoke a descendant principal (and its descendants): its token "
         "stops working at once. Destructive.",
         (S("principal", required=True),), (F("principal"), F("revoked", "array")), None,
         errors=("denied.anonymous", "denied.revoke", "not_found.principal")),
    Verb("config.get", "Read the configuration, or one key of it.", (S("path", "A key such "
         "as run.max_active"),), (F("config", "object"),), "admin", Check("admin", scope="*"),
         errors=("denied.admin", "invalid_params.config")),
    Verb("config.set", "Set one configuration key; value is JSON text. Applies at once.",
         (S("path", required=True), S("value", "JSON text of the new value", required=True)),
         (F("path"), F("value", "any")), "admin", Check("admin", scope="*"),
         errors=("denied.admin", "invalid_params.config")),
    Verb("config.reload", "Reload the configuration file. Applies at once.", (),
         (F("config", "object"), F("changed", "array")), "admin", Check("admin", scope="*"),
         errors=("denied.admin", "invalid_params.config")),
    Verb("audit.list", "List audit records: denials and admin actions.",
         (I("after", "Records after this seq", min=0, max=2**62),
          I("limit", "Most records", default=256, min=1, max=10000)),
         (F("records", "array"), F("next", "integer")), "admin", Check("admin", scope="*"),
         errors=("denied.admin",)),
    Verb("doctor", "Check the daemon's health: sentinels, escaped processes, zombies, fds, "
         "runs and counters.", (),
         (F("source"), F("version"), F("pid", "integer"), F("uptime_ms", "integer"),
          F("status"), F("checks", "array")), "read"),
    Verb("shutdown", "Stop the daemon: terminate every pane, answer waiters, remove the "
         "socket. Destructive.", (), (F("shutdown", "boolean"),), "admin",
         Check("admin", scope="*"), errors=("denied.admin",)),
    Verb("seam.set", "Hold or release a test seam (daemon started with --test-seams).",
         (S("name", required=True, choices=SEAMS),
          S("state", required=True, choices=("hold", "release"))),
         (F("name"), F("state")), "admin", Check("admin", scope="*"),
         errors=("unsupported.seams", "denied.admin")),
    Verb("seam.wait", "Wait until a request is held at a test seam.",
         (S("name", required=True, choices=SEAMS),
          I("timeout_ms", default=10000, min=0, max=600000)),
         (F("name"), F("held", "integer")), "admin", Check("admin", scope="*"),
         errors=("unsupported.seams", "denied.admin", "timeout.seam")),
)

_BY_NAME = {v.name: v for v in VERBS}


def verb_by_name(name: str) -> Verb | None:
    return _BY_NAME.get(name)


def defaults_of(verb: Verb) -> dict[str, Any]:
    return {p.name: p.default for p in verb.params if p.has_default}


__all__ = ["FORMAT", "MISSING", "SIGNAL_NAMES", "VERBS", "Check", "Field", "Param", "Verb",
           "defaults_of", "field", "verb_by_name"]
