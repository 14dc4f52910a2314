"""Verb handlers, one module per family, registered against the manifest by name."""

from venomx.verbs import admin, events, pane, run, session  # noqa: F401  (registration)
