"""Slices of an OCS fabric's blocks for the shared-cluster scheduler: shapes and placement.

On an optical-circuit-switched fabric (``fabric.topology = ocs``,
:mod:`fabric_model.topology.ocs`) a job larger than one block gets a *slice*: whole blocks
that no other job holds, joined by circuits of its own (Jouppi et al., "TPU v4: An Optically
Reconfigurable Supercomputer", ISCA 2023: each job gets a slice of 4 x 4 x 4 cubes joined by
the OCS). A job that fits one block takes nodes inside one block, as TPU v4's sub-cube slices
share a cube; its traffic never leaves the block's own fabric (NVLink, a cube's mesh, a pod's
leaf-spine).

Which blocks form a slice (:data:`SLICE_RULES`, the policies of
:data:`fabric_model.run.placement.PLACEMENTS` for OCS designs):

- ``ocs-any``: any free blocks, exactly as many as the job needs. With ``ocs.reconfigure``
  ``job`` or ``phase`` the OCS joins any blocks; with ``never`` the installed circuits must
  join them (a connected set of the circuits among free blocks, grown breadth-first).
- ``ocs-slice`` (the default on an OCS design): the slice the design's ``ocs.circuits`` need.
  ``uniform``, ``ring`` and ``job`` circuits are formed over any blocks (``ocs-any``);
  ``torus`` and ``twisted-torus`` need a torus of blocks ``a x b x c`` that fits the
  cluster's block grid, each side at most the grid's in some orientation (TPU v4's slices are
  ``AxBxC`` tori of its 16 x 16 x 16 pod, twisted where the shape allows: Google Cloud TPU v4
  documentation, "3D mesh and 3D torus"). A job whose block count is no such shape gets the
  smallest shape that holds it (the blocks beyond its need are held idle: that, and a free
  set too small for the rounded shape, is the slice-shape fragmentation). The OCS closes
  every ring of the slice's torus, twisted when its count is ``2m x m x m`` or ``2m x m``
  (:mod:`fabric_model.topology.ocs`), plain otherwise. With ``never`` the installed torus
  must already be there: the slice is an axis-aligned box of the grid (``ocs-box``).
- ``ocs-box``: an axis-aligned box of free blocks on the block grid (positions wrap: the grid
  is a torus), as a torus pod without an OCS places slices (TPU v3, and the slice-packer-torus
  study), of the smallest count from the job's need up with a shape that fits the grid. With
  ``never`` (torus circuits only: the installed torus is the grid) the box keeps only the
  installed circuits among its blocks, so it has a ring in a dimension only when it spans
  that dimension (:func:`slice_rings`); reconfigured, the OCS forms its circuits over the
  box's blocks.

The block grid: the installed torus's dimensions with ``never`` and torus circuits (its built
blocks, spares included), else :func:`~fabric_model.topology.torus3d.torus_dims` of the
blocks the scheduler places on. Spare blocks (``ocs.spare_blocks``, built beyond
``cluster.n_gpus``) are held out of placement: they take a failed block's place
(:mod:`fabric_model.run.cluster_sim`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabric_model.errors import FabricModelError
from fabric_model.topology.ocs import Circuits
from fabric_model.topology.torus3d import torus_dims

__all__ = [
    "SLICE_RULES",
    "SliceGrid",
    "box_shapes",
    "connected_blocks",
    "find_box",
    "ocs_any",
    "ocs_box",
    "ocs_slice",
    "slice_blocks_needed",
    "slice_rings",
    "valid_shape",
]

#: The slice rules of the OCS placement policies (module docstring).
SLICE_RULES = {
    "ocs-slice": "the slice the design's circuits need (a torus of blocks for torus circuits)",
    "ocs-any": "any free blocks (a connected set of the installed circuits when never)",
    "ocs-box": "an axis-aligned box of free blocks on the block grid (a torus pod's slices)",
}
_TORI = ("torus", "twisted-torus")


@dataclass(frozen=True, eq=False)
class SliceGrid:
    """An OCS design's blocks as the scheduler places on them.

    Attributes
    ----------
    n_blocks
        Blocks the scheduler places on (``cluster.n_gpus / block_gpus``).
    n_built
        Blocks built (with the spares).
    nodes_per_block, block_gpus
        Servers and GPUs per block.
    uplinks
        Uplinks (OCS ports) per block, ``U``.
    dims
        The block grid ``(X, Y, Z)``: grid position ``x + X (y + Y z)`` is block ``x + X (y +
        Y z)``; positions past :attr:`n_blocks` (spares, or a grid larger than the pool) are
        never free.
    circuits, reconfigure
        ``ocs.circuits`` and ``ocs.reconfigure``.
    spare_blocks
        ``ocs.spare_blocks``.
    reconfig_s
        Time to set a slice's circuits (``ocs.reconfig_ms``), s.
    static
        The installed circuits over the built blocks when ``reconfigure = never`` (else None).
    kind
        ``ocs.block``.
    """

    n_blocks: int
    n_built: int
    nodes_per_block: int
    block_gpus: int
    uplinks: int
    dims: tuple[int, int, int]
    circuits: str
    reconfigure: str
    spare_blocks: int
    reconfig_s: float
    static: Circuits | None
    kind: str

    @property
    def reconfigurable(self) -> bool:
        """Whether the OCS sets each slice's circuits (``job`` or ``phase``)."""
        return self.reconfigure != "never"

    @property
    def n_positions(self) -> int:
        """Grid positions."""
        return math.prod(self.dims)

    def blocks_for(self, k_nodes: int) -> int:
        """Blocks a job of ``k_nodes`` servers needs (before any shape rounding)."""
        return -(-k_nodes // self.nodes_per_block)

    def nodes_of(self, blocks: np.ndarray) -> np.ndarray:
        """Return the servers of ``blocks``, block by block in the given order."""
        per = self.nodes_per_block
        return (np.asarray(blocks, dtype=np.int64)[:, None] * per + np.arange(per)).ravel()


# ------------------------------------------------------------------------------ shapes


def _triples(n: int) -> list[tuple[int, int, int]]:
    """Every ordered ``(a, b, c)`` with ``a b c = n``."""
    out = []
    for a in range(1, n + 1):
        if n % a:
            continue
        for b in range(1, n // a + 1):
            if (n // a) % b == 0:
                out.append((a, b, n // a // b))
    return out


def box_shapes(n: int, dims: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """Orientations ``(a, b, c)`` of ``n`` blocks that fit ``dims`` (most cubic first)."""
    fits = [t for t in _triples(n) if all(s <= d for s, d in zip(t, dims, strict=True))]
    return sorted(fits, key=lambda t: (max(t), -min(t), t))


def valid_shape(n: int, dims: tuple[int, int, int]) -> bool:
    """Whether ``n`` blocks form a torus slice that fits the block grid ``dims``."""
    return bool(box_shapes(n, dims))


def _needs_shape(grid: SliceGrid, rule: str) -> bool:
    """Whether ``rule`` needs a torus shape of blocks on ``grid`` (module docstring)."""
    return rule == "ocs-box" or (rule == "ocs-slice" and grid.circuits in _TORI)


def slice_blocks_needed(grid: SliceGrid, nb: int, rule: str) -> int | None:
    """Blocks a slice of a job needing ``nb`` blocks holds under ``rule``; None: no shape.

    ``ocs-any`` (and ``ocs-slice`` with non-torus circuits): ``nb``. A torus slice
    (``ocs-slice`` with torus circuits) and a box (``ocs-box``): the smallest count from
    ``nb`` up with a shape that fits the grid (:func:`box_shapes`).
    """
    if not _needs_shape(grid, rule):
        return nb if nb <= grid.n_blocks else None
    for n in range(nb, min(grid.n_blocks, grid.n_positions) + 1):
        if valid_shape(n, grid.dims):
            return n
    return None


def slice_rings(box: tuple[int, int, int], dims: tuple[int, int, int]) -> tuple[bool, ...]:
    """Which rings a box of a static torus keeps: dimension ``d`` closes iff ``box[d] = dims[d]``.

    A box (an axis-aligned sub-grid) of a torus pod inherits the pod's wraparound in a
    dimension only when it spans it (slice-packer-torus, PyPI: "a slice inherits a closed ring
    in a dimension only if it spans that dimension completely"); a dimension of the pod of
    size 1 has no ring to keep.
    """
    return tuple(b == d for b, d in zip(box, dims, strict=True))


# ------------------------------------------------------------------------------ placement


def _free_blocks(grid: SliceGrid, free: np.ndarray) -> np.ndarray:
    """Blocks whose every server is free (and up), as a bool mask over the pool."""
    per = grid.nodes_per_block
    mask = np.asarray(free[: grid.n_blocks * per]).reshape(grid.n_blocks, per)
    return np.asarray(mask.all(axis=1), dtype=bool)


def _inside_one_block(grid: SliceGrid, free: np.ndarray, k: int) -> np.ndarray | None:
    """``k`` free servers of one block (best fit: the block with the fewest that hold them)."""
    per = grid.nodes_per_block
    counts = np.asarray(free[: grid.n_blocks * per]).reshape(grid.n_blocks, per).sum(axis=1)
    fits = np.flatnonzero(counts >= k)
    if not fits.size:
        return None
    best = int(fits[np.lexsort((fits, counts[fits]))][0])
    idx = np.flatnonzero(free[best * per : (best + 1) * per])[:k] + best * per
    return idx.astype(np.int64)


def find_box(free_pos: np.ndarray, dims: tuple[int, int, int], n: int) -> np.ndarray | None:
    """Grid positions of a free box of ``n`` blocks (first shape, lowest anchor), or None.

    ``free_pos`` is a bool mask over the grid's positions (``x + X (y + Y z)``). Boxes wrap
    around the grid's edges (a torus pod); the positions come back box-ordered, ``x`` fastest.
    """
    X, Y, Z = dims
    cube = np.asarray(free_pos, dtype=np.int64).reshape(Z, Y, X)
    for a, b, c in box_shapes(n, dims):
        # window sums with wraparound: pad by the box's extent, integrate, difference
        pad = np.pad(cube, ((0, c - 1), (0, b - 1), (0, a - 1)), mode="wrap")
        s = np.zeros((pad.shape[0] + 1, pad.shape[1] + 1, pad.shape[2] + 1), dtype=np.int64)
        s[1:, 1:, 1:] = pad.cumsum(0).cumsum(1).cumsum(2)
        win = (
            s[c:, b:, a:]
            - s[:-c, b:, a:]
            - s[c:, :-b, a:]
            - s[c:, b:, :-a]
            + s[:-c, :-b, a:]
            + s[:-c, b:, :-a]
            + s[c:, :-b, :-a]
            - s[:-c, :-b, :-a]
        )[:Z, :Y, :X]
        hit = np.argwhere(win == n)
        if hit.size:
            z0, y0, x0 = (int(v) for v in hit[0])
            xs = (x0 + np.arange(a)) % X
            ys = (y0 + np.arange(b)) % Y
            zs = (z0 + np.arange(c)) % Z
            pos = xs[None, None, :] + X * (ys[None, :, None] + Y * zs[:, None, None])
            return pos.ravel().astype(np.int64)
    return None


def connected_blocks(
    free_blocks: np.ndarray, a: np.ndarray, b: np.ndarray, n: int
) -> np.ndarray | None:
    """``n`` free blocks joined by circuits ``a[i] - b[i]`` among themselves, or None.

    Components of the circuits among free blocks; the smallest that holds ``n`` (best fit),
    grown breadth-first from its lowest block, so every block taken has a circuit to one
    taken before it.
    """
    nb = free_blocks.size
    keep = free_blocks[a] & free_blocks[b]
    ea, eb = np.concatenate([a[keep], b[keep]]), np.concatenate([b[keep], a[keep]])
    order = np.argsort(ea, kind="stable")
    ptr = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(np.bincount(ea, minlength=nb), out=ptr[1:])
    nbr = eb[order]
    label = np.full(nb, -1, dtype=np.int64)
    sizes: list[int] = []
    for s in np.flatnonzero(free_blocks).tolist():
        if label[s] >= 0:
            continue
        label[s] = len(sizes)
        stack, size = [s], 0
        while stack:
            u = stack.pop()
            size += 1
            for v in nbr[ptr[u] : ptr[u + 1]].tolist():
                if label[v] < 0:
                    label[v] = label[s]
                    stack.append(v)
        sizes.append(size)
    fits = [c for c, size in enumerate(sizes) if size >= n]
    if not fits:
        return None
    comp = min(fits, key=lambda c: (sizes[c], c))
    start = int(np.flatnonzero(label == comp)[0])
    out, seen, head = [start], {start}, 0
    while len(out) < n:
        u = out[head]
        head += 1
        for v in sorted(set(nbr[ptr[u] : ptr[u + 1]].tolist())):
            if v not in seen and len(out) < n:
                seen.add(v)
                out.append(v)
    return np.asarray(out, dtype=np.int64)


def _static_ends(grid: SliceGrid) -> tuple[np.ndarray, np.ndarray]:
    """Return the installed circuits' ends among the pool's blocks (built ``b`` = ``b``)."""
    st = grid.static
    if st is None:
        raise FabricModelError("ocs.reconfigure: the installed circuits exist only with never")
    keep = (st.a < grid.n_blocks) & (st.b < grid.n_blocks)
    return st.a[keep], st.b[keep]


def _place(grid: SliceGrid, free: np.ndarray, k: int, rule: str) -> np.ndarray | None:
    """Return the servers of a slice for a job of ``k`` servers under ``rule``.

    A job inside one block gets ``k`` servers; a larger one every server of its slice's
    blocks, block by block in slice order (the job's ranks on the first ``k``).
    """
    if k <= grid.nodes_per_block:
        return _inside_one_block(grid, free, k)
    nb = grid.blocks_for(k)
    need = slice_blocks_needed(grid, nb, rule)
    if need is None:
        return None
    fb = _free_blocks(grid, free)
    if int(fb.sum()) < need:
        return None
    if rule == "ocs-box" or (_needs_shape(grid, rule) and not grid.reconfigurable):
        free_pos = np.zeros(grid.n_positions, dtype=bool)
        free_pos[: grid.n_blocks] = fb
        blocks = find_box(free_pos, grid.dims, need)
    elif grid.reconfigurable:
        blocks = np.flatnonzero(fb)[:need]
    else:
        blocks = connected_blocks(fb, *_static_ends(grid), need)
    if blocks is None:
        return None
    return grid.nodes_of(blocks)


def ocs_slice(grid: SliceGrid, free: np.ndarray, k: int) -> np.ndarray | None:
    """``ocs-slice``: the slice the design's circuits need (module docstring)."""
    return _place(grid, free, k, "ocs-slice")


def ocs_any(grid: SliceGrid, free: np.ndarray, k: int) -> np.ndarray | None:
    """``ocs-any``: any free blocks (module docstring)."""
    return _place(grid, free, k, "ocs-any")


def ocs_box(grid: SliceGrid, free: np.ndarray, k: int) -> np.ndarray | None:
    """``ocs-box``: a box of free blocks on the block grid (module docstring)."""
    return _place(grid, free, k, "ocs-box")


def grid_dims(
    n_blocks: int, n_built: int, circuits: str, reconfigure: str, installed: object
) -> tuple[int, int, int]:
    """Return the block grid (module docstring): the installed torus's, or ``torus_dims``."""
    if reconfigure == "never" and circuits in _TORI and installed is not None:
        dims = tuple(int(d) for d in installed)  # type: ignore[attr-defined]
        return (dims[0], dims[1], dims[2])
    if reconfigure == "never":
        return torus_dims(n_built)
    return torus_dims(n_blocks)


def random_box_slices(dims: tuple[int, int, int], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random boxes of a grid: sides uniform on ``1 .. dims[d]`` each, as ``(n, 3)``."""
    return np.stack([rng.integers(1, d + 1, size=n) for d in dims], axis=1)
