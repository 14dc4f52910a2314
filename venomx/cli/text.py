"""Help text written for a person at a shell: what each group is for, and what a verb's
command does that its manifest summary (shared with MCP, where the reader is an agent
making tool calls) does not say."""

from __future__ import annotations

ROOT_HELP = """\
venomx: a headless terminal multiplexer daemon for trusted command execution.

Programs run in panes (PTYs) of windows of sessions, kept by a daemon. A run is a
program whose outcome comes only from the daemon's own wait status.

\b
Start:   venomx serve --detach
Run:     venomx session create --name ci                      # session: s0
         venomx run --key build-1 --session s0 -- make test   # run: r0, ...
Wait:    venomx run wait --run r0       # exits with the run's status
Inspect: venomx run list; venomx doctor

Every verb takes --json (one line of JSON), --socket (default $VENOMX_SOCKET) and
--token (default $VENOMX_TOKEN; the daemon's owner may pass @owner; without a token
you are the anonymous caller, who can only read)."""

GROUP_HELP = {
    "session": "Sessions: named containers of windows. Create one to hold your runs and "
    "panes; removing one (with --recursive) ends everything in it.",
    "window": "Windows: each holds one or more panes in a layout. Creating one "
    "starts a program in its first pane.",
    "pane": "Panes: one terminal (PTY) each, running one program. Read its rows, send it "
    "input, split, resize, kill or remove it; attach streams its raw output.",
    "principal": "Principals: identities with narrower grants and their tokens, to hand "
    "a tool only the authority it needs; revoke ends a token at once.",
    "config": "The daemon's configuration: read it, set one key, reload the file. Needs "
    "the admin right (the daemon's owner has it).",
    "audit": "The audit log: every denial and every admin action. Needs the admin right.",
    "seam": "Test seams: hold a request at a named point and wait until one is held. Only "
    "for a daemon started with `venomx serve --test-seams`.",
    "events": "Events: what happened in the daemon, in order.",
}

# What the CLI command does beyond the manifest summary (the MCP note is not shown here).
VERB_NOTES = {
    "run": "Give the program after --. Without --shell the words are exec'd directly (no "
    "shell); use --shell 'a && b' for shell syntax. Shows the run's ID (`run: r0`), "
    "key, source and pane, one per line (`--json | jq -r .run` in a script); then use "
    "`venomx run wait --run ID`. Subcommands wait, get, list and cancel read and "
    "stop runs.",
    "run.wait": "Exits with the run's status: its exit code, 128+N for signal N, 124 when "
    "its deadline ended it, 125 when it was cancelled. Ctrl-C or --timeout-ms "
    "ends only the wait, never the run: stop it with `venomx run cancel`.",
    "run.get": "Exits 0 whatever the run's outcome; `venomx run wait` exits with its status.",
    "run.list": "Shows run, key, state, outcome, status, duration and program; --json "
    "gives every field.",
    "window.create": "Give the program after --; without one the daemon's default shell runs.",
    "pane.split": "Give the program after --; without one the daemon's default shell runs.",
    "pane.capture_rows": "Prints the rows' text without padding and without the blank "
    "rows after the last text; --json gives the rows as they are.",
    "pane.attach": "Prints one JSON line per item (base64 bytes); to watch a pane on your "
    "terminal use `venomx attach --pane P`.",
    "doctor": "Exits 0 for ok and warn, 1 for fail. --json gives the full report.",
}

__all__ = ["GROUP_HELP", "ROOT_HELP", "VERB_NOTES"]
