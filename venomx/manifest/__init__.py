"""The verb manifest (format 1): the one table every surface is generated from."""

from venomx.manifest.verbs import VERBS, Check, Field, Param, Verb, verb_by_name

__all__ = ["VERBS", "Check", "Field", "Param", "Verb", "verb_by_name"]
