"""Package errors: one base class and a few precise subclasses.

The library never calls ``sys.exit`` and never uses ``assert`` for user input; the command
line and the pages turn these errors into one clear line (exit status 2 / ``st.error``).
"""

from __future__ import annotations

__all__ = [
    "CatalogError",
    "FabricModelError",
    "InfeasibleDesignError",
    "NcclLogError",
    "ScenarioError",
    "ScenarioFileError",
    "UnknownCatalogKeyError",
]


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
        shown = "" if value is ScenarioError.NO_VALUE else f" = {value!r}"
        super().__init__(f"{key}{shown}: {allowed}")


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
