"""Every verb venomx serves: params, result, dispatch right, resource check, exit policy.

Like tmux's ``cmd_table``: one entry per verb, one handler per entry. Schema validation,
the CLI, the MCP tools, docs/verbs.md, docs/skill.md and completions are generated from
this table; a test fails when a verb has no handler or a handler no entry.
"""

from __future__ import annotations

from typing import Any, NamedTuple

FORMAT = 1
MISSING: Any = object()

SIGNAL_NAMES = (
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGTERM",
    "SIGKILL",
    "SIGUSR1",
    "SIGUSR2",
    "SIGABRT",
    "SIGALRM",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGWINCH",
    "SIGPIPE",
)
# What termination sends when no one chose (foundation §9): pane.kill's and run.cancel's
# defaults, and what deadlines, removal and shutdown always send.
TERMINATE_SIGNAL, TERMINATE_GRACE_MS = "SIGHUP", 2000
SEAMS = ("run.before_barrier", "run.after_barrier", "terminate.unkillable")

# The value rules every surface shares (RFC-0007 §5, RFC-0013, RFC-0015 §4 and §8).
NAME_PATTERN = r"[A-Za-z0-9._:-]{1,64}"
NAME_HINT = "1-64 of [A-Za-z0-9._:-]"
KEY_PATTERN = r"[A-Za-z0-9._:-]{1,128}"
RUN_ID_PATTERN = r"r(?:0|[1-9][0-9]*)"  # as the daemon writes them (wire.id_number)
GRANT_RIGHTS = ("read", "write", "spawn", "admin")
GRANT_SCOPE_PATTERN = r"\*|self|(?:session|window|pane|run):(?:\*|[A-Za-z0-9._-]{1,64})"
ENV_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
ABSOLUTE_PATTERN = r"/[^\x00]*"
# A cwd is relative unless it starts with "/"; one with a NUL (or not UTF-8) names no
# directory: it is missing (foundation §6 has no other reason).
CWD_PATTERN = r"/[\s\S]*"
BASE64_PATTERN = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
MAX_ARGV = 262144  # bytes of argv in all: the UTF-8 of its items (foundation §6 "total")
MAX_ENV_VALUE = 32768
MAX_SHELL = 65536
MAX_CELLS = 1048576


class Param(NamedTuple):
    """One parameter: its type and bounds (schema rules, checked before authorization)
    and its value rules (``pattern`` … ``code``, checked where the spec puts them: when
    the handler calls ``venomx.manifest.rules.check_rules``).

    Value rules apply to a string, to each item of an array and to each key (``pattern``)
    or value (the rest) of an object. Lengths are UTF-8 bytes, as exec and the spec count
    them; an array's ``max_length`` counts all items' bytes together.
    """

    name: str
    kind: str  # string | integer | boolean | array | object
    summary: str = ""
    required: bool = False
    default: Any = MISSING
    choices: tuple[str, ...] | None = None
    min: int | None = None
    max: int | None = None
    items: str | None = None
    values: str | None = None  # the kind of an object's values
    pattern: str | None = None  # a regex the whole string must match
    hint: str | None = None  # the pattern in words: "<param> must be <hint>"
    min_length: int | None = None
    max_length: int | None = None
    nonempty: bool = False  # an array needs a first item, and it must not be empty
    text: bool = False  # no NUL, valid UTF-8 (no lone surrogates)
    code: str | None = None  # the error of a value rule, e.g. invalid_params.name
    reason: str | None = None  # one reason for every value rule (cwd: relative)

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING

    @property
    def has_rules(self) -> bool:
        return self.code is not None


class Group(NamedTuple):
    """A rule across params, checked in the verb's ``rules`` order.

    ``exactly_one``: exactly one of ``params`` (missing: the first; exclusive: the second
    given). ``requires``: with ``params[0]``, ``params[1]`` is required (missing).
    ``forbids``: with ``params[0]``, ``params[1]`` is not allowed (misplaced).
    ``max_product``: the product of ``params`` is at most ``limit``.
    """

    kind: str
    params: tuple[str, ...]
    code: str
    limit: int | None = None

    def describe(self) -> str:
        a = self.params
        if self.kind == "exactly_one":
            return "exactly one of " + ", ".join(a[:-1]) + f" or {a[-1]}"
        if self.kind == "requires":
            return f"{a[1]} is required with {a[0]}"
        if self.kind == "forbids":
            return f"{a[1]} is not allowed with {a[0]}"
        return " x ".join(a) + f" at most {self.limit}"


class Field(NamedTuple):
    """One field of a verb's result."""

    name: str
    kind: str
    required: bool = True
    summary: str = ""
    nullable: bool = False  # always present, null when unset (a session's name)


class Check(NamedTuple):
    """The resource check, done before lookup.

    ``params`` names the params that name the resource (kind = param name); with
    ``scope`` set the check is against that fixed scope (``*`` or ``session:*``).
    ``exactly_one`` gives the error raised when not exactly one of ``params`` is present.
    """

    right: str
    params: tuple[str, ...] = ()
    scope: str | None = None
    exactly_one: str | None = None


# What dispatch does after the resource check, in a verb's declared order (``steps``):
#   source      a given ``source`` must be this daemon's (conflict.source)
#   shutdown    no new work once shutdown has begun (unavailable.shutdown)
#   identified  the caller has a principal (denied.anonymous)
#   seams       the daemon runs with --test-seams (unsupported.seams)
#   delegation  ``grants`` are within the caller's (denied.delegation); the handler gets
#               the granted list
#   rules       the value rules (``rules``)
#   cwd         cwd resolution: an existing directory (RFC-0013)
#   target      look up the target and check its state; the handler gets the object
STEPS = ("source", "shutdown", "identified", "seams", "delegation", "rules", "cwd", "target")


class Target(NamedTuple):
    """What a verb acts on, looked up by dispatch after authorization (tmux's
    ``cmd_entry.target``): the params naming it (kind = param name), and the states it
    must be in, checked in order: ``running`` (a pane neither exited nor terminating),
    ``live`` (not exited), ``exited``, ``not_removing`` (its window and session are not
    being removed). The handler receives the object in place of the ID (None when an
    optional param is absent).

    ``resolve=False`` authorizes only: the handler resolves it with ``Context.resolve``
    at its own step (``run``: the key lookup comes between, RFC-0015 §11 row 16).
    """

    params: tuple[str, ...]
    state: tuple[str, ...] = ()
    resolve: bool = True


class Verb(NamedTuple):
    """One verb: its params and rules, result, authorization, target, steps, and the facts
    the CLI and MCP surfaces are generated from."""

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
    # The value rules after authorization, in the spec's order: a param name runs that
    # param's value rules, a Group its cross-param rule (RFC-0015 §11 step 6).
    rules: tuple[str | Group, ...] = ()
    trailing_argv: bool = False  # the CLI takes argv after --
    render: str = "fields"  # the CLI's human renderer (venomx.cli.app.RENDERERS)
    fail_field: str | None = None  # the CLI exits 1 when this result field is "fail"
    clock: bool = False  # the CLI shows the time waited on a terminal (stderr) meanwhile
    title: str = ""  # a short human title (the MCP tool's title)
    # What a call does to the world (the MCP tool's annotations): read (changes nothing),
    # write (changes state, destroys nothing), destructive (ends, removes or replaces
    # something), spawn (starts or drives arbitrary programs: destructive, open world).
    effect: str = "destructive"
    target: Target | None = None
    steps: tuple[str, ...] = ()  # from STEPS; by default "rules" (if any), then "target"

    @property
    def order(self) -> tuple[str, ...]:
        """The steps dispatch performs after the resource check, in order."""
        if self.steps:
            return self.steps
        out = ("rules",) if self.rules else ()
        return (*out, "target") if self.target is not None and self.target.resolve else out

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def groups(self) -> list[Group]:
        """Every cross-param rule, the resource check's target form included."""
        out = [r for r in self.rules if isinstance(r, Group)]
        c = self.check
        if c is not None and c.exactly_one is not None:
            out.insert(0, Group("exactly_one", c.params, c.exactly_one))
        return out


# The summary of a param that names an entity, when its verb gives none.
ID_SUMMARIES = {
    "session": "Session ID",
    "window": "Window ID",
    "pane": "Pane ID",
    "run": "Run ID, as run or run.list returns it",
    "principal": "Principal ID",
}


def S(name: str, summary: str = "", **kw: Any) -> Param:
    return Param(name, "string", summary or ID_SUMMARIES.get(name, ""), **kw)


def I(name: str, summary: str = "", **kw: Any) -> Param:  # noqa: E743
    return Param(name, "integer", summary, **kw)


def B(name: str, summary: str = "", **kw: Any) -> Param:
    return Param(name, "boolean", summary, **kw)


def F(name: str, kind: str = "string", required: bool = True) -> Field:
    return Field(name, kind, required)


# A session's or window's name: in every result that shows one, null when it has none
# (foundation §6 gives ``{session,name}``, as the ``*.created`` events carry it).
NAME_FIELD = Field("name", "string", nullable=True)
# The principal a connection acts as: null for the anonymous caller, which has none.
PRINCIPAL_FIELD = Field("principal", "string", nullable=True)


def key_param(summary: str, required: bool = False) -> Param:
    """A run's idempotency key (RFC-0015 §8: otherwise ``invalid_params.key``)."""
    return S(
        "key",
        summary,
        required=required,
        pattern=KEY_PATTERN,
        hint="1-128 of [A-Za-z0-9._:-]",
        code="invalid_params.key",
    )


def name_param(summary: str) -> Param:
    return S("name", summary, pattern=NAME_PATTERN, hint=NAME_HINT, code="invalid_params.name")


CWD = S(
    "cwd",
    "Working directory: an absolute path of an existing directory",
    pattern=CWD_PATTERN,
    hint="an absolute path",
    code="invalid_params.cwd",
    reason="relative",
)
GRANTS = Param(
    "grants",
    "array",
    "Grants of the new principal ({right, scope}); default "
    "read/write/spawn on self, narrowed to yours",
    items="object",
)
SPAWN_PARAMS = (
    I("cols", "Pane columns", default=80, min=1, max=65535),
    I("rows", "Pane rows", default=24, min=1, max=65535),
    GRANTS,
    CWD,
    Param(
        "env",
        "object",
        "Environment variables set on top of the base environment",
        values="string",
        pattern=ENV_NAME_PATTERN,
        max_length=MAX_ENV_VALUE,
        text=True,
        code="invalid_params.env",
    ),
    Param(
        "env_unset",
        "array",
        "Environment variable names removed",
        items="string",
        pattern=ENV_NAME_PATTERN,
        code="invalid_params.env",
    ),
)
# Per-pane cgroup limits (venomx.daemon.cgroups): applied before exec, or refused.
LIMIT_PARAMS = (
    I(
        "memory_max",
        "Memory limit in bytes of the pane's cgroup (memory.max, no swap): the OOM killer "
        "ends its processes beyond it; fails unsupported.cgroups where the host cannot apply it",
        min=4096,
        max=2**53 - 1,
    ),
    I(
        "pids_max",
        "Most processes and threads in the pane's cgroup at once (pids.max); fails "
        "unsupported.cgroups where the host cannot apply it",
        min=1,
        max=4194304,
    ),
)
ARGV = Param(
    "argv",
    "array",
    "Program and arguments, executed directly with no shell",
    items="string",
    nonempty=True,
    text=True,
    max_length=MAX_ARGV,
    code="invalid_params.argv",
)
CELLS = Group("max_product", ("cols", "rows"), "invalid_params.size", MAX_CELLS)
# RFC-0015 §11 step 6's order, which window.create and pane.split share from argv on
SPAWN_RULES: tuple[str | Group, ...] = ("argv", "name", CELLS, "env", "env_unset", "cwd")
SPLIT_RULES = tuple(r for r in SPAWN_RULES if r != "name")
# RFC-0015 §11 for run, which window.create and pane.split mirror: the target (step 8)
# is looked up before the cwd is resolved (step 9)
SPAWN_STEPS = ("shutdown", "delegation", "rules", "target", "cwd")
SPAWN_RESULT = (F("window"), F("pane"), F("session"), F("principal"), F("pid", "integer"))
PANE_RECORD = (
    F("pane"),
    F("window"),
    F("session"),
    F("principal"),
    F("pid", "integer"),
    F("argv0"),
    F("cols", "integer"),
    F("rows", "integer"),
    F("state"),
    F("exit_code", "integer", False),
    F("signal", "string", False),
    F("run", "string", False),
    F("created_at"),
    F("exited_at", "string", False),
)
ROWS_RESULT = (
    F("pane"),
    F("screen"),
    F("epoch", "integer"),
    F("offset", "integer"),
    F("cols", "integer"),
    F("rows", "integer"),
    F("oldest", "integer"),
    F("start", "integer"),
    F("end", "integer"),
    F("lines", "array"),
    F("cursor", "object"),
)
SPAWN_ERRORS = (
    "invalid_params.argv",
    "invalid_params.size",
    "invalid_params.cwd",
    "invalid_params.env",
    "invalid_params.name",
    "invalid_params.grants",
    "denied.spawn",
    "denied.delegation",
    "unavailable.spawn",
    "unavailable.shutdown",
    "conflict.removing",
)
RUN_FIELDS = ("run", "source", "key", "pane", "window", "session", "principal")


def run_record(wait: bool) -> tuple[Field, ...]:
    req = (
        {"state", "outcome", "status", "completed_at", "duration_ms", "cleanup"}
        if wait
        else {"state"}
    )
    return (
        *(F(n) for n in RUN_FIELDS),
        F("pid", "integer"),
        F("shell", "boolean"),
        F("state", "string", True),
        F("outcome", "string", "outcome" in req),
        F("exit_code", "integer", False),
        F("signal", "string", False),
        F("cause", "string", False),
        F("status", "integer", "status" in req),
        F("fault", "string", False),
        F("started_at"),
        F("completed_at", "string", "completed_at" in req),
        F("duration_ms", "integer", "duration_ms" in req),
        # beyond RFC-0015: the leader's usage, from the wait that gave its status
        F("cpu_ms", "integer", False),
        F("max_rss_kib", "integer", False),
        # the pane's cgroup as a whole, escapees included, at completion
        F("cgroup_cpu_usec", "integer", False),
        F("memory_peak_kib", "integer", False),
        F("oom", "boolean", False),
        # what the pane left at completion: {verified, escapees}; fixed then
        F("cleanup", "object", "cleanup" in req),
        F("output", "object", False),
    )


READ_RUN = Check("read", ("run",))
CLEANUP_PARAMS = (
    S("signal", "Signal sent first", default=TERMINATE_SIGNAL, choices=SIGNAL_NAMES),
    I("grace_ms", "Milliseconds before SIGKILL", default=TERMINATE_GRACE_MS, min=0, max=3600000),
)

VERBS: tuple[Verb, ...] = (
    Verb(
        "hello",
        "Open the conversation: protocol version, token, frame size. First request.",
        (
            I("protocol", "Protocol version (1)", required=True, min=1, max=1),
            S("client", "Client name and version"),
            S("token", "@owner, a principal token, or absent for the anonymous caller"),
            I("max_frame", "Largest frame in bytes, both directions", min=4096, max=16777216),
        ),
        (
            F("protocol", "integer"),
            F("server"),
            F("source"),
            PRINCIPAL_FIELD,
            F("max_frame", "integer"),
        ),
        errors=("invalid_request.hello", "denied.owner", "denied.token"),
        internal=True,
        title="Open conversation",
        effect="read",
    ),
    Verb(
        "cancel",
        "Cancel a request in flight on this connection.",
        (I("id", "The request to cancel", required=True, min=-(2**63), max=2**63 - 1),),
        (F("cancelled", "boolean"),),
        internal=True,
        title="Cancel request",
        effect="write",
    ),
    Verb(
        "whoami",
        "Show the principal this connection acts as, its grants and the source.",
        (),
        (PRINCIPAL_FIELD, F("grants", "array"), F("source")),
        title="Who am I",
        effect="read",
    ),
    Verb(
        "session.create",
        "Create a session (a named container of windows); with reuse, return the oldest "
        "session of that name you created, if there is one.",
        (
            name_param("Session name: " + NAME_HINT),
            B(
                "reuse",
                "With name: return an existing session of that name instead of creating one "
                "(get-or-create in one step)",
                default=False,
            ),
        ),
        (F("session"), NAME_FIELD, F("created", "boolean", False)),
        "spawn",
        Check("spawn", scope="session:*"),
        errors=("invalid_params.name", "denied.spawn", "unavailable.shutdown"),
        rules=("name",),
        title="Create session",
        effect="write",
        steps=("shutdown", "rules"),
    ),
    Verb(
        "session.list",
        "List sessions you can read.",
        (),
        (F("source"), F("sessions", "array")),
        "read",
        errors=("denied.read", "unsupported.result_size"),
        title="List sessions",
        effect="read",
    ),
    Verb(
        "session.get",
        "Show a session and its windows.",
        (S("session", required=True),),
        (F("session"), NAME_FIELD, F("windows", "array")),
        "read",
        Check("read", ("session",)),
        errors=("not_found.session", "denied.read"),
        title="Get session",
        effect="read",
        target=Target(("session",)),
    ),
    Verb(
        "session.remove",
        "Remove a session; with recursive, terminate its live panes first. Destructive.",
        (S("session", required=True), B("recursive", "Terminate live panes first", default=False)),
        (F("session"), F("removed", "array")),
        "write",
        Check("write", ("session",)),
        errors=(
            "not_found.session",
            "denied.write",
            "conflict.live_panes",
            "conflict.removing",
            "timeout.terminate",
        ),
        title="Remove session",
        target=Target(("session",)),
    ),
    Verb(
        "window.create",
        "Create a window with one pane running argv (default: the "
        "configured shell). Starts a process.",
        (
            S("session", required=True),
            name_param("Window name"),
            ARGV,
            *SPAWN_PARAMS,
            *LIMIT_PARAMS,
        ),
        SPAWN_RESULT,
        "spawn",
        Check("spawn", ("session",)),
        errors=("not_found.session", *SPAWN_ERRORS, "unsupported.cgroups"),
        rules=SPAWN_RULES,
        trailing_argv=True,
        title="Create window",
        effect="spawn",
        target=Target(("session",), ("not_removing",)),
        steps=SPAWN_STEPS,
    ),
    Verb(
        "window.get",
        "Show a window: its layout and pane records.",
        (S("window", required=True),),
        (
            F("window"),
            F("session"),
            NAME_FIELD,
            F("layout", "object"),
            F("panes", "array"),
        ),
        "read",
        Check("read", ("window",)),
        errors=("not_found.window", "denied.read"),
        title="Get window",
        effect="read",
        target=Target(("window",)),
    ),
    Verb(
        "window.remove",
        "Remove a window; with recursive, terminate its live panes first. Destructive.",
        (S("window", required=True), B("recursive", "Terminate live panes first", default=False)),
        (F("window"), F("removed", "array")),
        "write",
        Check("write", ("window",)),
        errors=(
            "not_found.window",
            "denied.write",
            "conflict.live_panes",
            "conflict.removing",
            "timeout.terminate",
        ),
        title="Remove window",
        target=Target(("window",)),
    ),
    Verb(
        "pane.split",
        "Split a live pane and run argv in the new pane. Starts a process.",
        (
            S("pane", required=True),
            S("axis", "Split axis", required=True, choices=("cols", "rows")),
            ARGV,
            *SPAWN_PARAMS,
            *LIMIT_PARAMS,
        ),
        SPAWN_RESULT,
        "spawn",
        Check("spawn", ("pane",)),
        errors=(
            "not_found.pane",
            "conflict.pane_exited",
            "conflict.pane_terminating",
            *SPAWN_ERRORS,
            "unsupported.cgroups",
        ),
        rules=SPLIT_RULES,
        trailing_argv=True,
        title="Split pane",
        effect="spawn",
        target=Target(("pane",), ("running", "not_removing")),
        steps=SPAWN_STEPS,
    ),
    Verb(
        "pane.list",
        "List panes you can read, optionally of one session or window.",
        (S("session", "Only panes of this session"), S("window", "Only panes of this window")),
        (F("source"), F("panes", "array")),
        "read",
        Check("read", ("session", "window")),
        errors=("not_found.session", "not_found.window", "denied.read"),
        title="List panes",
        effect="read",
        target=Target(("session", "window")),
    ),
    Verb(
        "pane.send",
        "Send input to a pane: exactly one of text, keys or data (base64).",
        (
            S("pane", required=True),
            S("text", "Text, sent as UTF-8 (no lone surrogates)"),
            Param(
                "keys", "array", "Key names: Enter, Tab, Escape, Up, C-c, F5, ...", items="string"
            ),
            S(
                "data",
                "Raw bytes, base64",
                pattern=BASE64_PATTERN,
                hint="base64",
                code="invalid_params.input",
                reason="base64",
            ),
        ),
        (F("pane"), F("bytes", "integer")),
        "write",
        Check("write", ("pane",)),
        errors=(
            "invalid_params.input",
            "not_found.pane",
            "denied.write",
            "conflict.pane_exited",
            "conflict.pane_terminating",
            "timeout.input",
            "unavailable.sentinel",
        ),
        rules=(Group("exactly_one", ("text", "keys", "data"), "invalid_params.input"), "data"),
        title="Send input to pane",
        effect="spawn",
        target=Target(("pane",), ("running",), resolve=False),
    ),
    Verb(
        "pane.resize",
        "Resize a pane's PTY (renumbers rows: the epoch changes).",
        (
            S("pane", required=True),
            I("cols", "New columns", required=True, min=1, max=65535),
            I("rows", "New rows", required=True, min=1, max=65535),
        ),
        PANE_RECORD,
        "write",
        Check("write", ("pane",)),
        errors=(
            "invalid_params.size",
            "not_found.pane",
            "denied.write",
            "conflict.pane_exited",
            "unavailable.sentinel",
        ),
        title="Resize pane",
        effect="write",
        rules=(CELLS,),
        target=Target(("pane",), ("live",)),
    ),
    Verb(
        "pane.kill",
        "Stop a pane's process group: signal, grace, then SIGKILL. Destructive.",
        (
            S("pane", required=True),
            S("signal", "Signal sent first", default=TERMINATE_SIGNAL, choices=SIGNAL_NAMES),
            I(
                "grace_ms",
                "Milliseconds before SIGKILL",
                default=TERMINATE_GRACE_MS,
                min=0,
                max=3600000,
            ),
        ),
        PANE_RECORD,
        "write",
        Check("write", ("pane",)),
        errors=("not_found.pane", "denied.write", "timeout.terminate", "unavailable.shutdown"),
        title="Kill pane",
        target=Target(("pane",)),
    ),
    Verb(
        "pane.remove",
        "Remove an exited pane (and its window when it was the last). Destructive.",
        (S("pane", required=True),),
        (F("pane"), F("removed", "array")),
        "write",
        Check("write", ("pane",)),
        errors=("not_found.pane", "denied.write", "conflict.pane_live"),
        title="Remove pane",
        target=Target(("pane",), ("exited",)),
    ),
    Verb(
        "pane.cleanup",
        "End every process an exited pane left behind (its cgroup's members, else those "
        "still carrying its VENOMX_PANE): signal, grace, then SIGKILL. Destructive.",
        (S("pane", required=True), *CLEANUP_PARAMS),
        (F("pane"), F("ended", "integer"), F("remaining", "integer")),
        "write",
        Check("write", ("pane",)),
        errors=("not_found.pane", "denied.write", "conflict.pane_live"),
        title="Clean up pane",
        target=Target(("pane",), ("exited",)),
    ),
    Verb(
        "pane.capture_rows",
        "Read rows of a pane's screen and history as text.",
        (
            S("pane", required=True),
            I("epoch", "Fail unless the row epoch is this", min=-(2**62), max=2**62),
            I("start", "First row (clamped to the rows the pane holds)", min=-(2**62), max=2**62),
            I("end", "One past the last row (clamped likewise)", min=-(2**62), max=2**62),
            I("limit", "Most rows", default=1000, min=1, max=10000),
        ),
        ROWS_RESULT,
        "read",
        Check("read", ("pane",)),
        errors=(
            "not_found.pane",
            "denied.read",
            "conflict.epoch",
            "unavailable.sentinel",
            "unsupported.result_size",
        ),
        title="Read pane rows",
        effect="read",
        target=Target(("pane",)),
    ),
    Verb(
        "pane.attach",
        "Stream a pane's output: a repaint, then every byte in order. With after, "
        "resume instead: the bytes after that output offset, when the pane still holds "
        "them (its last 256 KiB of output; an ended pane's for a while), without a repaint.",
        (
            S("pane", required=True),
            I(
                "after",
                "Resume after this output offset (0: from the first byte); the first item is "
                "then a screen with replay true and no data, or, when the bytes are no longer "
                "held, an ordinary repaint",
                min=0,
                max=2**53,
            ),
        ),
        (F("exit", "object"),),
        "read",
        Check("read", ("pane",)),
        streams=True,
        errors=("not_found.pane", "denied.read", "unavailable.sentinel", "unsupported.result_size"),
        title="Attach to pane",
        effect="read",
        target=Target(("pane",)),
    ),
    Verb(
        "run",
        "Start a process (a trusted run) in a new pane and return its run ID once "
        "it has been exec'd. The key makes retries safe: the same key and parameters "
        "return the same run instead of starting the command again. argv uses no shell; "
        "shell runs /bin/sh -c explicitly.",
        (
            key_param(
                "Idempotency key: a retry with the same key and parameters returns the "
                "same run instead of starting the command again",
                required=True,
            ),
            S(
                "session",
                "Run in a new window of this session; give exactly one of session or pane",
            ),
            S(
                "pane",
                "Run in a new pane split from this live pane; give exactly one of session or pane",
            ),
            S(
                "axis",
                "Split axis; required with pane, not allowed with session",
                choices=("cols", "rows"),
            ),
            ARGV._replace(
                summary="Program and arguments, executed directly with no shell; "
                "give exactly one of argv or shell",
            ),
            S(
                "shell",
                "Command line run explicitly as /bin/sh -c; give exactly one of argv or shell",
                text=True,
                min_length=1,
                max_length=MAX_SHELL,
                code="invalid_params.command",
            ),
            name_param("Window name; only with session"),
            I("cols", "Pane columns", default=80, min=1, max=65535),
            I("rows", "Pane rows", default=24, min=1, max=65535),
            I(
                "deadline_ms",
                "Terminate the command this many milliseconds after it starts; "
                "default: no deadline",
                min=1,
                max=86400000,
            ),
            I(
                "output_rows",
                "Most rows of output kept in the result",
                default=100,
                min=0,
                max=1000,
            ),
            I(
                "output_bytes",
                "Most UTF-8 bytes of output lines kept in the result",
                default=65536,
                min=0,
                max=262144,
            ),
            S(
                "source",
                "Fail unless the daemon's event source is this one (detects a daemon "
                "restart between retries)",
            ),
            GRANTS,
            *SPAWN_PARAMS[3:],
            *LIMIT_PARAMS,
            S(
                "input",
                'What a read of the terminal gets: "terminal", typed input (a read waits '
                'for it), or "eof", end of file at once, as from /dev/null, for every read '
                "(input typed with pane.send is read first); a program that sets its own "
                "terminal mode has its own",
                choices=("terminal", "eof"),
                default="terminal",
            ),
        ),
        (*(F(n) for n in RUN_FIELDS), F("pid", "integer"), F("reused", "boolean")),
        "spawn",
        Check("spawn", ("session", "pane"), exactly_one="invalid_params.target"),
        errors=(
            "invalid_params.command",
            "invalid_params.target",
            "invalid_params.key",
            "invalid_params.argv",
            "invalid_params.name",
            "invalid_params.size",
            "invalid_params.cwd",
            "invalid_params.env",
            "invalid_params.grants",
            "not_found.session",
            "not_found.pane",
            "denied.spawn",
            "denied.delegation",
            "conflict.pane_exited",
            "conflict.pane_terminating",
            "conflict.removing",
            "conflict.run_key",
            "conflict.source",
            "unavailable.run_limit",
            "unavailable.spawn",
            "unavailable.shutdown",
            "unsupported.cgroups",
        ),
        rules=(
            Group("forbids", ("session", "axis"), "invalid_params.target"),
            Group("forbids", ("pane", "name"), "invalid_params.target"),
            Group("requires", ("pane", "axis"), "invalid_params.target"),
            Group("exactly_one", ("argv", "shell"), "invalid_params.command"),
            "shell",
            "key",
            *SPAWN_RULES,
        ),
        trailing_argv=True,
        title="Run a command",
        effect="spawn",
        target=Target(("session", "pane"), ("running", "not_removing"), resolve=False),
        steps=("source", "shutdown", "delegation", "rules"),
    ),
    Verb(
        "run.wait",
        "Wait for a run to complete and return its record: outcome, exit code "
        "or signal, status, and the tail of its output. Waiting never stops the run.",
        (
            S("run", required=True),
            I(
                "timeout_ms",
                "Fail timeout.wait after this long; 0 checks without waiting; absent: no limit",
                min=0,
                max=86400000,
            ),
            B("output", "Include the output tail", default=True),
        ),
        run_record(True),
        "read",
        READ_RUN,
        exit_field="status",
        errors=("not_found.run", "denied.read", "timeout.wait", "unsupported.result_size"),
        mcp="A wait blocks this tool call until the run completes, reporting progress "
        "(state, elapsed time, output size) every few seconds when the call asks for "
        "it. Pass timeout_ms of at most 25000 (hosts often give up on a call after "
        "30-60 s; up to 60000 only if yours allows it) and call again in a loop while "
        "it fails timeout.wait; the run keeps running either way.",
        clock=True,
        title="Wait for run",
        effect="read",
        target=Target(("run",)),
    ),
    Verb(
        "run.get",
        "Show a run's record without waiting.",
        (S("run", required=True), B("output", "Include the output tail", default=True)),
        run_record(False),
        "read",
        READ_RUN,
        errors=("not_found.run", "denied.read", "unsupported.result_size"),
        title="Get run",
        effect="read",
        target=Target(("run",)),
    ),
    Verb(
        "run.list",
        "List runs you can read, ordered by run ID, a page at a time.",
        (
            S("pane", "Only runs of this pane"),
            key_param("Only your run with this key"),
            S(
                "after",
                "List runs after this run ID",
                pattern=RUN_ID_PATTERN,
                hint="a run ID (r0, r1, ...)",
                code="invalid_params.after",
            ),
            I("limit", "Most runs in one page", default=256, min=1, max=1024),
        ),
        (F("source"), F("runs", "array"), F("next", "string", False)),
        "read",
        Check("read", ("pane",)),
        rules=("key", "after"),
        errors=(
            "not_found.pane",
            "denied.read",
            "invalid_params.key",
            "invalid_params.after",
            "unsupported.result_size",
        ),
        title="List runs",
        effect="read",
        render="runs",
    ),
    Verb(
        "run.cancel",
        "Stop a run: signal its pane's process group, grace, then SIGKILL. "
        "Destructive. Returns the completed record.",
        (
            S("run", required=True),
            S("signal", "Signal sent first", default=TERMINATE_SIGNAL, choices=SIGNAL_NAMES),
            I(
                "grace_ms",
                "Milliseconds before SIGKILL",
                default=TERMINATE_GRACE_MS,
                min=0,
                max=3600000,
            ),
        ),
        run_record(False),
        "write",
        Check("write", ("run",)),
        errors=("not_found.run", "denied.write", "timeout.terminate", "unavailable.shutdown"),
        title="Cancel run",
        target=Target(("run",)),
    ),
    Verb(
        "run.cleanup",
        "End every process a completed run's pane left behind (as pane.cleanup). "
        "Never changes the run's record. Destructive.",
        (S("run", required=True), *CLEANUP_PARAMS),
        (F("run"), F("pane"), F("ended", "integer"), F("remaining", "integer")),
        "write",
        Check("write", ("run",)),
        errors=("not_found.run", "denied.write", "conflict.pane_live"),
        title="Clean up run",
        target=Target(("run",)),
    ),
    Verb(
        "events.subscribe",
        "Stream events: a snapshot of entities, then every later event you may read, live.",
        (
            I("after", "Resume after this seq (no snapshot unless asked)", min=0, max=2**62),
            B("snapshot", "Send a snapshot first (default: only when after is absent)"),
            S("source", "Fail unless the daemon's source is this one"),
        ),
        (F("seq", "integer"),),
        "read",
        streams=True,
        errors=(
            "not_found.cursor",
            "conflict.source",
            "unavailable.backlog",
            "denied.read",
            "unsupported.result_size",
        ),
        title="Subscribe to events",
        effect="read",
        steps=("source",),
    ),
    Verb(
        "events.read",
        "Read events after a seq, waiting up to timeout_ms for the first.",
        (
            I("after", "Read events after this seq", min=0, max=2**62),
            I("limit", "Most events", default=256, min=1, max=1024),
            I("timeout_ms", "Wait this long for a first event", default=0, min=0, max=60000),
        ),
        (F("source"), F("events", "array"), F("next", "integer")),
        "read",
        errors=("not_found.cursor", "denied.read", "unsupported.result_size"),
        title="Read events",
        effect="read",
    ),
    Verb(
        "principal.create",
        "Mint a child principal with narrower grants and a token.",
        (
            GRANTS.__class__("grants", "array", GRANTS.summary, required=True, items="object"),
            name_param("A label for the principal"),
        ),
        (F("principal"), F("token"), F("grants", "array")),
        None,
        errors=(
            "denied.anonymous",
            "denied.delegation",
            "invalid_params.grants",
            "invalid_params.name",
            "unavailable.principal_limit",
        ),
        rules=("name",),
        title="Create principal",
        effect="write",
        steps=("identified", "delegation", "rules"),
    ),
    Verb(
        "principal.revoke",
        "Revoke a descendant principal (and its descendants): its token "
        "stops working at once. Destructive.",
        (S("principal", required=True),),
        (F("principal"), F("revoked", "array")),
        None,
        errors=("denied.anonymous", "denied.revoke", "not_found.principal"),
        title="Revoke principal",
        target=Target(("principal",)),
        steps=("identified", "target"),
    ),
    Verb(
        "config.get",
        "Read the configuration, or one key of it.",
        (S("path", "A key such as run.max_active"),),
        (F("config", "object"),),
        "admin",
        Check("admin", scope="*"),
        errors=("denied.admin", "invalid_params.config"),
        title="Get configuration",
        effect="read",
    ),
    Verb(
        "config.set",
        "Set one configuration key; value is JSON text. Applies at once.",
        (
            S("path", "The key, such as run.max_active", required=True),
            S("value", "JSON text of the new value", required=True),
        ),
        (F("path"), F("value", "any")),
        "admin",
        Check("admin", scope="*"),
        errors=("denied.admin", "invalid_params.config"),
        title="Set configuration key",
    ),
    Verb(
        "config.reload",
        "Reload the configuration file. Applies at once.",
        (),
        (F("config", "object"), F("changed", "array")),
        "admin",
        Check("admin", scope="*"),
        errors=("denied.admin", "invalid_params.config"),
        title="Reload configuration",
    ),
    Verb(
        "audit.list",
        "List audit records: denials and admin actions.",
        (
            I("after", "Records after this seq", min=0, max=2**62),
            I("limit", "Most records", default=256, min=1, max=10000),
        ),
        (F("records", "array"), F("next", "integer")),
        "admin",
        Check("admin", scope="*"),
        errors=("denied.admin", "unsupported.result_size"),
        title="List audit records",
        effect="read",
    ),
    Verb(
        "doctor",
        "Check the daemon's health: sentinels, escaped processes, zombies, fds, runs and counters.",
        (),
        (
            F("source"),
            F("version"),
            F("pid", "integer"),
            F("uptime_ms", "integer"),
            F("status"),
            F("checks", "array"),
        ),
        "read",
        errors=("denied.read", "unsupported.result_size"),
        render="doctor",
        fail_field="status",
        title="Check daemon health",
        effect="read",
    ),
    Verb(
        "shutdown",
        "Stop the daemon: terminate every pane, answer waiters, remove the socket. Destructive.",
        (),
        (F("shutdown", "boolean"),),
        "admin",
        Check("admin", scope="*"),
        errors=("denied.admin",),
        title="Shut down daemon",
    ),
    Verb(
        "seam.set",
        "Hold or release a test seam (daemon started with --test-seams).",
        (
            S("name", "The seam", required=True, choices=SEAMS),
            S(
                "state",
                "hold stops requests at the seam; release lets them go on",
                required=True,
                choices=("hold", "release"),
            ),
        ),
        (F("name"), F("state")),
        "admin",
        Check("admin", scope="*"),
        errors=("unsupported.seams", "denied.admin"),
        title="Set test seam",
        effect="write",
        steps=("seams",),
    ),
    Verb(
        "seam.wait",
        "Wait until a request is held at a test seam.",
        (
            S("name", "The seam", required=True, choices=SEAMS),
            I("timeout_ms", "Fail timeout.seam after this long", required=True, min=0, max=600000),
        ),
        (F("name"), F("held", "integer")),
        "admin",
        Check("admin", scope="*"),
        errors=("unsupported.seams", "denied.admin", "timeout.seam"),
        title="Wait at test seam",
        effect="read",
        steps=("seams",),
    ),
)

_BY_NAME = {v.name: v for v in VERBS}


def verb_by_name(name: str) -> Verb | None:
    return _BY_NAME.get(name)


def defaults_of(verb: Verb) -> dict[str, Any]:
    return {p.name: p.default for p in verb.params if p.has_default}


__all__ = [
    "FORMAT",
    "MISSING",
    "SIGNAL_NAMES",
    "VERBS",
    "Check",
    "Field",
    "Group",
    "Param",
    "Verb",
    "defaults_of",
    "verb_by_name",
]
