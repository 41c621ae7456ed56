"""Key declarations: :class:`FieldSpec` (type, bounds, unit, help of one key) and value helpers.

Every section dataclass declares its keys with :func:`_f`, so validation, coercion, the CLI's
error messages and the dashboard's slider ranges read one table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FieldSpec", "extra_choices"]


@dataclass(frozen=True)
class FieldSpec:
    """Declared type, bounds, unit and help of one scenario key.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``choice``, ``text``. ``auto`` marks keys
    that also accept the word ``"auto"``; ``optional`` keys accept ``null`` (meaning "use the
    catalog value"). ``min_exclusive`` makes ``min`` an open bound (``0 < x``).
    """

    kind: str
    help: str
    unit: str = ""
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    choices: tuple[Any, ...] = ()
    auto: bool = False
    optional: bool = False
    step: float | None = None

    def allowed(self) -> str:
        """Describe the allowed values in words, for error messages and help text."""
        extra = []
        if self.auto:
            extra.append("'auto'")
        if self.optional:
            extra.append("null (catalog value)")
        if self.kind == "choice":
            return "one of " + ", ".join(str(c) for c in (*extra_choices(self), *self.choices))
        if self.kind == "bool":
            base = "true or false"
        elif self.kind == "text":
            base = "a text"
        else:
            noun = "an integer" if self.kind == "int" else "a number"
            lo = "" if self.min is None else _fmt(self.min)
            hi = "" if self.max is None else _fmt(self.max)
            if self.min is not None and self.max is not None:
                op = "greater than" if self.min_exclusive else "from"
                base = (
                    f"{noun} {op} {lo} and at most {hi}"
                    if self.min_exclusive
                    else f"{noun} {op} {lo} to {hi}"
                )
            elif self.min is not None:
                base = f"{noun} {'>' if self.min_exclusive else '>='} {lo}"
            else:
                base = noun
        if self.unit and self.kind in ("int", "float"):
            base += f" ({self.unit})"
        return base + "".join(f", or {e}" for e in extra)


def extra_choices(spec: FieldSpec) -> tuple[str, ...]:
    """Return the non-numeric extras a choice key accepts (``auto``)."""
    return ("auto",) if spec.auto else ()


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _f(default: Any, spec: FieldSpec) -> Any:
    return field(default=default, metadata={"spec": spec})
