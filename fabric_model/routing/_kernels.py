"""Numba kernel of static ECMP hashing on a fat-tree: the paths of every queue pair in one loop.

:func:`fat_tree_ecmp_walk` is the per-queue-pair twin of the vectorised ``ecmp`` branch of
:func:`fabric_model.routing.fat_tree._per_path` (the readable reference, which also covers
``dmodk`` and the rare re-pick towards a partial pod): the same uniforms, drawn outside in
the same order (``uniforms[k]`` is the ``k``-th ``rng.random(n)`` the reference draws), the
same integer results (Python's floor ``//`` and ``%``, as NumPy's), so the same paths. The
divisions come precomputed per leaf, pod and core group (``fat_tree._walk_tables``), and a
hop a queue pair does not take is not computed, so a queue pair costs a few table reads
(2026-12-02: 22 -> 5 ns per queue pair on this VM).
It either writes the paths (``mode`` :data:`WRITE_PATHS`) or adds each queue pair's weight
to the links it crosses (:data:`ADD_LOADS`: the max-min solver's first round needs only
these sums, and the loop adds them in the solver's own order, noting each link's first
queue pair on the way), so a 1.2M-queue-pair pattern needs no path matrix at all.
``tests/test_speed_paths.py`` holds it equal to the reference.
"""

from __future__ import annotations

import numpy as np
from numba import types

from fabric_model._jit import jit

__all__ = ["ADD_LOADS", "NEEDS_REFERENCE", "UNEVEN_DOWN", "WRITE_PATHS"]

#: ``mode``: write every queue pair's six path slots (``-1`` = none) into ``out_paths``.
WRITE_PATHS = 0
#: ``mode``: add ``flow_weight[i]`` (1 when empty) to ``out_loads`` for every link crossed,
#: and (when ``out_first`` is not empty) note in it the first queue pair crossing each link.
ADD_LOADS = 1
#: Returned flag: some cross-pod path needs the re-pick towards a partial pod (use the
#: reference).
NEEDS_REFERENCE = 1
#: Returned flag: some leaf is reached by several parallel down cables, so the reference
#: draws one more uniform (``uniforms[4]``) and the walk must be repeated with it.
UNEVEN_DOWN = 2

_I64 = types.Array(types.int64, 1, "C", readonly=True)
_I64_2D = types.Array(types.int64, 2, "C", readonly=True)
_F64_2D = types.Array(types.float64, 2, "C", readonly=True)
_F64 = types.Array(types.float64, 1, "C", readonly=True)


@jit(types.int64(types.int64, types.int64))
def _mod(x: int, m: int) -> int:
    """``x % m`` (Python's floor modulo, ``m > 0``), without a division when ``-m <= x < 2m``."""
    if x >= m:
        x -= m
    elif x < 0:
        x += m
    if x < 0 or x >= m:
        x = x % m
    return x


@jit(
    types.int64(
        types.int64,  # mode
        _I64,  # src (connection endpoints)
        _I64,  # dst
        types.int64,  # qps
        _F64_2D,  # uniforms (draws x queue pairs)
        types.boolean,  # use_down_draw
        _I64,  # leaf_of_e
        types.int64,  # n_e
        types.int64,  # up (uplinks per leaf)
        types.int64,  # tiers (2 or 3)
        types.int64,  # n_spines (2 tiers)
        types.int64,  # leaves per pod (3 tiers)
        types.int64,  # base3: first spine-core cable id
        _I64,  # spines_in_pod
        _I64,  # pod_first_spine
        _I64,  # spine_up
        _I64,  # spine_first_uplink
        _I64,  # cable_group
        _I64,  # group_cores
        _I64_2D,  # block_start
        _I64,  # group_first_cable
        _I64,  # cable_by_position
        _I64,  # pod_first_uplink
        _I64,  # pod_uplinks
        _I64,  # spine_by_cable
        _I64,  # leaf_up_mod: (local leaf x up) mod spines of its pod (2 tiers: leaf x up mod S)
        _I64_2D,  # up_mod: j mod spines of the pod, per pod and uplink j (2 tiers: one row)
        _I64,  # up_quot: up // spines of the pod (2 tiers: one entry)
        _I64,  # up_rem: up % spines of the pod
        _I64,  # cable_pos_mod: position of each spine-core cable mod its group's cores
        _I64_2D,  # block_start_mod: block_start mod the group's cores
        _I64_2D,  # block_quot: block_size // the group's cores
        _I64_2D,  # block_rem: block_size % the group's cores
        _F64,  # flow_weight (empty: 1.0 each)
        types.Array(types.int64, 2, "C"),  # out_paths
        types.Array(types.float64, 1, "C"),  # out_loads
        types.int64,  # index of the first queue pair walked (for out_first)
        types.Array(types.int64, 1, "C"),  # out_first (-1: none yet; empty: not asked)
    )
)
def fat_tree_ecmp_walk(
    mode: int,
    src: np.ndarray,
    dst: np.ndarray,
    qps: int,
    uniforms: np.ndarray,
    use_down_draw: bool,
    leaf_of_e: np.ndarray,
    n_e: int,
    up: int,
    tiers: int,
    n_spines: int,
    lpp: int,
    base3: int,
    spines_in_pod: np.ndarray,
    pod_first_spine: np.ndarray,
    spine_up: np.ndarray,
    spine_first_uplink: np.ndarray,
    cable_group: np.ndarray,
    group_cores: np.ndarray,
    block_start: np.ndarray,
    group_first_cable: np.ndarray,
    cable_by_position: np.ndarray,
    pod_first_uplink: np.ndarray,
    pod_uplinks: np.ndarray,
    spine_by_cable: np.ndarray,
    leaf_up_mod: np.ndarray,
    up_mod: np.ndarray,
    up_quot: np.ndarray,
    up_rem: np.ndarray,
    cable_pos_mod: np.ndarray,
    block_start_mod: np.ndarray,
    block_quot: np.ndarray,
    block_rem: np.ndarray,
    flow_weight: np.ndarray,
    out_paths: np.ndarray,
    out_loads: np.ndarray,
    first_index: int,
    out_first: np.ndarray,
) -> int:
    """Walk every queue pair's ECMP path; return the NEEDS_REFERENCE | UNEVEN_DOWN bits.

    Queue pair ``i`` belongs to connection ``i // qps``. ``uniforms`` rows: leaf uplink,
    then (2 tiers) the down cable, or (3 tiers) the spine's core uplink, the core's cable
    into the destination pod, its re-pick, and with ``use_down_draw`` the down cable to the
    leaf. The reference's modulo and ceiling divisions come from the small per-leaf, per-pod
    and per-group tables (``up = up_quot s + up_rem``: ``ceil((up - j0) / s)`` for
    ``0 <= j0 < s`` is ``up_quot + (j0 < up_rem)``), so a queue pair costs no division; a
    hop that is not taken (same leaf, same pod) is not computed, and its draws are not read.
    Where a row's draws cannot change any path (one choice only, or the re-pick, which a
    walk that succeeds never takes), the caller may leave that row zero.
    """
    n_uplinks = cable_by_position.size
    flags = 0
    path = np.empty(6, dtype=np.int64)
    for c in range(src.size):
        # what depends on the connection only, once for its queue pairs
        s = src[c]
        d = dst[c]
        a = leaf_of_e[s]
        b = leaf_of_e[d]
        off = a != b
        pa = a // lpp
        pb = b // lpp
        xp = off and pa != pb
        sp_a = spines_in_pod[pa] if tiers == 3 else n_spines
        sp_b = spines_in_pod[pb] if tiers == 3 else n_spines
        first_a = pod_first_spine[pa] if tiers == 3 else 0
        first_b = pod_first_spine[pb] if tiers == 3 else 0
        mod_a = leaf_up_mod[a]
        mod_b = leaf_up_mod[b]
        row_a = pa if tiers == 3 else 0
        q_b = up_quot[pb] if tiers == 3 else up_quot[0]
        r_b = up_rem[pb] if tiers == 3 else up_rem[0]
        for qp in range(qps):
            i = c * qps + qp
            for k in range(6):
                path[k] = -1
            path[0] = 2 * s
            path[5] = 2 * d + 1
            if off:
                j = np.int64(uniforms[0, i] * up)
                spine_a = first_a + _mod(mod_a + up_mod[row_a, j], sp_a)
                if tiers == 2:
                    j0 = _mod(spine_a - mod_b, sp_b)
                    n_par = q_b + (1 if j0 < r_b else 0)
                    j_down = j0 + n_spines * np.int64(uniforms[1, i] * n_par)
                    path[1] = 2 * (n_e + a * up + j)
                    path[4] = 2 * (n_e + b * up + j_down) + 1
                else:
                    spine_b = spine_a
                    if xp:
                        t = np.int64(uniforms[1, i] * spine_up[spine_a])
                        cab_a = spine_first_uplink[spine_a] + t
                        grp = cable_group[cab_a]
                        n_c = group_cores[grp]
                        q0 = _mod(cable_pos_mod[cab_a] - block_start_mod[grp, pb], n_c)
                        n_par = block_quot[grp, pb] + (1 if q0 < block_rem[grp, pb] else 0)
                        pos = (
                            block_start[grp, pb]
                            + q0
                            + n_c * np.int64(uniforms[2, i] * max(n_par, 1))
                        )
                        slot = min(group_first_cable[grp] + pos, n_uplinks - 1)
                        cab_b = cable_by_position[slot]
                        if n_par <= 0:
                            # the reference re-picks towards this partial pod: it must route
                            cab_b = pod_first_uplink[pb] + np.int64(
                                uniforms[3, i] * pod_uplinks[pb]
                            )
                            flags |= NEEDS_REFERENCE
                        spine_b = spine_by_cable[cab_b]
                        path[2] = 2 * (base3 + cab_a)
                        path[3] = 2 * (base3 + cab_b) + 1
                    j0 = _mod(spine_b - first_b - mod_b, sp_b)
                    n_down = q_b + (1 if j0 < r_b else 0)
                    if n_down > 1:
                        flags |= UNEVEN_DOWN
                    j_b = j0
                    if use_down_draw:
                        j_b = j0 + sp_b * np.int64(uniforms[4, i] * n_down)
                    path[1] = 2 * (n_e + a * up + j)
                    path[4] = 2 * (n_e + b * up + j_b) + 1
            if mode == WRITE_PATHS:
                for k in range(6):
                    out_paths[i, k] = path[k]
            else:
                w = flow_weight[i] if flow_weight.size else 1.0
                for k in range(6):
                    if path[k] >= 0:
                        out_loads[path[k]] += w
                        if out_first.size and out_first[path[k]] < 0:
                            out_first[path[k]] = first_index + i
    return flags


@jit
def fill_rows(
    filled: np.ndarray,
    rows: np.ndarray,
    ids: np.ndarray,
    weights_in: np.ndarray,
    out_indices: np.ndarray,
    out_weights: np.ndarray,
) -> None:
    """Append one block of entries to CSR rows: row ``rows[i]`` gets ``ids[i, :]``.

    ``filled[r]`` is the next free entry of row ``r`` (advanced by the block's width);
    ``weights_in[i, k]`` goes with ``ids[i, k]``. The loop form of NumPy's
    ``pos = filled[rows, None] + arange(w); out[pos] = ids; filled[rows] += w`` for distinct
    ``rows`` (``tests/test_speed_paths.py`` holds the two equal), without its index matrix.
    """
    width = ids.shape[1]
    for i in range(rows.size):
        r = rows[i]
        p = filled[r]
        for k in range(width):
            out_indices[p + k] = ids[i, k]
            out_weights[p + k] = weights_in[i, k]
        filled[r] = p + width
