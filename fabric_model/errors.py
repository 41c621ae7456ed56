"""Package errors: one base class and a few precise subclasses.

The library never calls ``sys.exit`` and never uses ``assert`` for user input; the command
line and the pages turn these errors into one clear line (exit status 2 / ``st.error``).
"""

from __future__ import annotations

import reprlib

__all__ = [
    "SHOWN_VALUE_CHARS",
    "CatalogError",
    "FabricModelError",
    "InfeasibleDesignError",
    "NcclLogError",
    "ScenarioError",
    "ScenarioFileError",
    "UnknownCatalogKeyError",
    "shown_value",
]

#: Longest text of a value a message repeats; a longer value shows its start and its length.
SHOWN_VALUE_CHARS = 60


def shown_value(value: object, limit: int = SHOWN_VALUE_CHARS) -> str:
    """Return ``repr(value)`` for a message, cut to its start when longer than ``limit``.

    A pasted 10,000-character URL value stays one readable line:

    >>> shown_value("a" * 10_000)
    "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'... (10,000 characters)"
    """
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        # bounded: a YAML alias bomb is a few lines that expand to billions of elements
        short = reprlib.Repr()
        short.maxlevel = 2
        short.maxlist = short.maxtuple = short.maxdict = short.maxset = 4
        short.maxstring = short.maxother = limit
        return short.repr(value)
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class FabricModelError(Exception):
    """Base class of every error the model raises on bad input."""


class ScenarioError(FabricModelError, ValueError):
    """A scenario key has a value outside what is allowed.

    Parameters
    ----------
    key
        Dotted scenario key, e.g. ``"fabric.link_gbps"``.
    value
        The offending value as given.
    allowed
        Human-readable statement of what is allowed, e.g. ``"one of 200, 400, 800, 1600"``.
    """

    #: Pass as ``value`` when there is no value to show (an unknown key, a missing ``=``).
    NO_VALUE: object = object()

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        shown = "" if value is ScenarioError.NO_VALUE else f" = {shown_value(value)}"
        name = key if len(key) <= SHOWN_VALUE_CHARS else shown_value(key)
        super().__init__(f"{name}{shown}: {allowed}")


class ScenarioFileError(FabricModelError, ValueError):
    """A scenario file (or text) cannot be read as a YAML/JSON mapping."""


class UnknownCatalogKeyError(FabricModelError, LookupError):
    """A catalog key (GPU, NIC, switch, ...) is not in the catalog."""

    def __init__(self, kind: str, key: str, known: list[str] | tuple[str, ...]) -> None:
        self.kind = kind
        self.key = key
        self.known = tuple(known)
        super().__init__(f"unknown {kind} {key!r}; known: {', '.join(sorted(self.known))}")

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0])


class CatalogError(FabricModelError):
    """The catalog data file is malformed (a programming/data error, not user input)."""


class InfeasibleDesignError(FabricModelError):
    """The requested design cannot be built (radix exhausted, non power-of-two hypercube, ...).

    Parameters
    ----------
    key
        The scenario key that makes the design infeasible (the one a user should change).
    message
        What rule is broken and what would be allowed.
    """

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


class NcclLogError(FabricModelError, ValueError):
    """An nccl-tests log cannot be read; the message says where and why."""
