"""What every catalog entry shares: :class:`FrozenMap`, :class:`Source` and the entry base class."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

__all__ = ["SECTIONS", "FrozenMap", "Source"]


#: Entry sections of the catalog, in file order.
SECTIONS: Final[tuple[str, ...]] = (
    "gpus",
    "servers",
    "nics",
    "switches",
    "optics",
    "cables",
    "vendors",
    "ocs",
)

_K = TypeVar("_K")
_V = TypeVar("_V")

_SOURCE_REF = re.compile(r"\[(S[A-Za-z0-9]+)\]")


class FrozenMap(Mapping[_K, _V]):
    """Read-only, hashable and picklable mapping (unlike ``types.MappingProxyType``).

    Catalog entries travel inside frozen result dataclasses that the UI caches and pickles, so
    their mappings must survive both hashing and pickling.

    Parameters
    ----------
    data
        Items to copy, as a mapping or an iterable of pairs.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[_K, _V] | Iterable[tuple[_K, _V]] = ()) -> None:
        self._data: dict[_K, _V] = dict(data)

    def __getitem__(self, key: _K) -> _V:
        """Return the value of ``key``."""
        return self._data[key]

    def __iter__(self) -> Iterator[_K]:
        """Iterate over the keys in insertion order."""
        return iter(self._data)

    def __len__(self) -> int:
        """Return the number of items."""
        return len(self._data)

    def __hash__(self) -> int:
        """Hash the items (values must be hashable)."""
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        """Show the items."""
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[type[FrozenMap[_K, _V]], tuple[dict[_K, _V]]]:
        """Pickle as the class and a plain dict of the items."""
        return (type(self), (self._data,))


# ---------------------------------------------------------------------------------------------
# Entry dataclasses
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Source:
    """One citable source of the catalog.

    Parameters
    ----------
    key
        Source key as cited in notes, e.g. ``"S40"`` (without brackets).
    title
        Short human-readable title.
    url
        Where to read it.
    date
        Publication date or range as known, free text (may be empty).
    """

    key: str
    title: str
    url: str
    date: str = ""


@dataclass(frozen=True, kw_only=True)
class _Entry:
    """Fields every catalog entry has.

    Parameters
    ----------
    key
        Catalog key, e.g. ``"qm9700"``.
    name
        Display name.
    sources
        Field name -> source note (``"[S40] ..."`` or ``"estimate: ..."``).
    remark
        Free-text caveat shown with the entry (empty if none).
    """

    key: str
    name: str
    sources: FrozenMap[str, str] = field(default_factory=FrozenMap, repr=False, compare=True)
    remark: str = ""


def _speeds_text(speeds: Iterable[int]) -> str:
    return ", ".join(str(s) for s in speeds)
