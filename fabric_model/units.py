"""Unit conversions, in one place.

Conventions (as nccl-tests prints them): GB/s is 10^9 bytes/s; Gb/s is 10^9 bits/s;
message sizes on the command line use binary suffixes (1K = 1024 bytes); GiB is 2^30 bytes.
"""

from __future__ import annotations

import re

BITS_PER_BYTE = 8
NS_PER_US = 1_000.0
US_PER_S = 1_000_000.0
HOURS_PER_YEAR = 8_760.0
FIBER_NS_PER_M = 5.0  # group index ~1.47; hardware-and-cost-facts section 3.3
GIB = 2**30


def gbps_to_Bps(gbps: float) -> float:
    """Convert a line rate in Gb/s (10^9 bit/s) to bytes/s."""
    return gbps * 1e9 / BITS_PER_BYTE


def gbps_to_GBps(gbps: float) -> float:
    """Convert Gb/s to GB/s (10^9 bytes/s)."""
    return gbps / BITS_PER_BYTE


def Bps_to_GBps(bps: float) -> float:
    """Convert bytes/s to GB/s (10^9 bytes/s)."""
    return bps / 1e9


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_SIZE_MULT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size_bytes(text: str) -> int:
    """Parse ``8``, ``1K``, ``4M``, ``1G`` (binary suffixes, as nccl-tests) to bytes.

    Raises
    ------
    ValueError
        If the text is not a size.
    """
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 8, 1K, 4M, 1G)")
    value = float(m.group(1)) * _SIZE_MULT[m.group(2).upper()]
    if value != int(value) or value < 0:
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def format_size_bytes(n_bytes: int) -> str:
    """Format bytes with the largest exact binary suffix (``1048576`` -> ``1M``)."""
    for suffix in ("T", "G", "M", "K"):
        mult = _SIZE_MULT[suffix]
        if n_bytes >= mult and n_bytes % mult == 0:
            return f"{n_bytes // mult}{suffix}"
    return str(n_bytes)
