"""PFC head-of-line blocking charged to other jobs (issue 29, Build 1): a link that feeds a
port holding PFC pause a share ``p`` of the time moves nothing for any flow on it then, so a
victim job's flows on it keep ``1 - p`` of their rate (run/interference.py); the pause share
comes from the DCQCN fluid model of the culprit's incast (collectives/transport.py) through
its training step (``StepResult.pfc_pause_s``).

No published victim-throughput figure could be extracted as a golden row (the DCQCN paper's
victim-flow experiment, Zhu et al. SIGCOMM 2015 section 2, is plotted without a table), so
the mechanism is tested against hand calculations."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.collectives.transport import incast
from fabric_model.presets import load_preset
from fabric_model.run.cluster_sim import Cluster
from fabric_model.run.interference import FabricRates
from fabric_model.run.traffic import TrafficShape, job_pattern
from fabric_model.scenario import apply_overrides
from fabric_model.training.layout import Layout
from fabric_model.training.step import training_step

#: 1,024 H100, 128 DGX in 4 rail-optimized groups of 32, adaptive routing (bundles)
BASE = load_preset("dgx-h100-ib-ndr")
#: an MoE job: TP8, EP4 over nodes, DP 2; its EP groups' first members are hot receivers
MOE = TrafficShape(
    Layout(tp=8, cp=1, ep=4, pp=1, edp=2),
    Layout(tp=8, cp=1, ep=4, pp=1, edp=2),
    (("dp", 1.0), ("ep", 2.0)),
)
#: the culprit's nodes: EP groups (0, 1, 32, 33) and (64, 65, 96, 97); hot: nodes 0 and 64
CULPRIT_NODES = (0, 1, 32, 33, 64, 65, 96, 97)
DP16 = TrafficShape.data_parallel(16, 8)
LINE_Bps = 50e9  # an NDR NIC's rate (400 Gb/s), the solver's line-rate units


@pytest.fixture(scope="module")
def rates() -> FabricRates:
    cl = Cluster.build(BASE)
    return FabricRates(cl.ctx, cl.layout)


def _shared(fr: FabricRates, tag: str, p: float, victim: tuple[int, ...]) -> dict:
    culprit = dataclasses.replace(MOE, pause_share=p, hot=(0,) if p > 0 else ())
    jobs = {
        f"a{tag}": (culprit, CULPRIT_NODES),
        f"b{tag}": (DP16, victim),
        f"c{tag}": (DP16, (3, 4)),  # inside group 0: never leaves its leaves
    }
    return {k[0]: v for k, v in fr.shared(jobs).items()}


def test_victim_keeps_one_minus_p_of_its_rate(rates: FabricRates) -> None:
    """Hand calculation: the ring 2 <-> 34 enters group 0's leaves through the leaf-down
    bundle that also feeds hot node 0's ports; paused 30 % of the time, the victim's NIC-bound
    ring moves 0.7 x 50 GB/s. The culprit keeps its own rates (its pause is its incast
    model's time); a job that stays under its leaves is untouched."""
    base = _shared(rates, "hand0", 0.0, (2, 34))
    hit = _shared(rates, "hand3", 0.3, (2, 34))
    assert base["b"]["dp"] == pytest.approx(LINE_Bps, rel=1e-9)
    assert hit["b"]["dp"] == pytest.approx(0.7 * LINE_Bps, rel=1e-9)
    assert hit["a"] == pytest.approx(base["a"], rel=1e-9)
    assert hit["c"] == pytest.approx(base["c"], rel=1e-9)
    culprit = dataclasses.replace(MOE, pause_share=0.3, hot=(0,))
    paused = rates.routed("ahand3", culprit, CULPRIT_NODES).pause_links
    g = rates.ctx.topology.graph
    assert paused.size and (paused >= g.link_src.size).all()  # adaptive: leaf-down bundles


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    p=st.floats(0.01, 0.9),
    dp=st.floats(0.0, 0.09),
    victim=st.lists(st.sampled_from(list(range(2, 32)) + list(range(34, 64))), min_size=2,
                    max_size=2, unique=True),
)  # fmt: skip
def test_victims_never_speed_up_and_lose_more_with_more_pause(
    rates: FabricRates, p: float, dp: float, victim: list[int]
) -> None:
    nodes = tuple(sorted(victim))
    tag = f"{p}-{dp}-{nodes}"
    none = _shared(rates, "n" + tag, 0.0, nodes)
    some = _shared(rates, "s" + tag, p, nodes)
    more = _shared(rates, "m" + tag, p + dp, nodes)
    for d, r in none["b"].items():
        assert some["b"][d] <= r * (1 + 1e-9)
        assert more["b"][d] <= some["b"][d] * (1 + 1e-9)
        assert some["b"][d] >= (1 - p) * r * (1 - 1e-9)  # one hop: at most (1 - p) lost
    assert some["a"] == pytest.approx(none["a"], rel=1e-9)


def test_hot_connections_end_at_the_hot_members() -> None:
    """Only the EP connections into each group's hot member are marked (PXN rail-matched)."""
    shape = dataclasses.replace(MOE, pause_share=0.1, hot=(0,))
    pat = job_pattern(shape, np.array(CULPRIT_NODES), 8, 1, 1)
    ep = pat.dims.index("ep")
    dst_node = pat.dst // 8
    assert pat.pause_share == 0.1
    assert (pat.hot == ((pat.dim == ep) & np.isin(dst_node, (0, 64)))).all()
    assert pat.hot.any()


def test_pause_share_only_from_pfc_with_dcqcn() -> None:
    """What pauses: DCQCN with PFC on; PFC off drops instead (no pause), the telemetry
    control's and UEC's closed forms keep the queue below Xoff, credits keep the max-min
    answer. The pause share grows with the fan-in at every phase size."""
    kw = dict(port_Bps=50e9, buffer_bytes=1e6, rtt_s=8e-6, mtu_bytes=4096, cable_m=3.0)
    shares = []
    for n in (2, 4, 8, 16):
        m = incast("roce-dcqcn", pfc=True, fan_in=n, load=float(n), **kw)
        assert m is not None
        shares.append(np.array(m.pause_fraction))
    assert shares[-1].max() > 0.1
    for lo, hi in itertools.pairwise(shares):
        assert (hi >= lo - 1e-12).all()
    off = incast("roce-dcqcn", pfc=False, fan_in=8, load=8.0, **kw)
    assert off is not None and max(off.pause_fraction) == 0.0
    for tr, pfc in (("spectrum-x", True), ("uec", False), ("lossy-spray", False)):
        m = incast(tr, pfc=pfc, fan_in=8, load=8.0, **kw)
        assert m is not None and max(m.pause_fraction) == 0.0
    assert incast("ib-credit", pfc=False, fan_in=8, load=8.0, **kw) is None
    assert incast("roce-pfc", pfc=True, fan_in=8, load=8.0, **kw) is None


@pytest.mark.parametrize(
    ("preset", "extra", "pauses"),
    [
        ("dgx-h100-roce-ecmp", {}, True),
        ("dgx-h100-roce-ecmp", {"what_if.pfc": "off"}, False),
        ("dgx-h100-spectrum-x", {}, False),
    ],
)
def test_step_reports_the_expert_all_to_all_pause(preset: str, extra: dict, pauses: bool) -> None:
    """A skewed expert all-to-all across NVLink domains on RoCE (DCQCN, PFC) holds pause at
    its hot receivers' ports; the traffic shape carries the share and the hot members."""
    s = apply_overrides(
        load_preset(preset),
        {
            "cluster.n_gpus": 32,
            "model.name": "mixtral-8x7b",
            "parallel.tp": 2,
            "parallel.ep": 8,
            "parallel.pp": 1,
            "parallel.vpp": 1,
            "model.routing_skew": 4.0,
            **extra,
        },
    )
    r = training_step(s)
    assert r.feasible
    shape = TrafficShape.from_step(r, s.model.routing_skew, s.model.hot_fraction)
    if pauses:
        assert 0 < r.pfc_pause_s["ep"] < r.comm_s["ep"]
        assert shape.pause_share == pytest.approx(r.pfc_pause_s["ep"] / r.step_time_s)
        assert shape.hot  # ceil(0.125 x 8) = 1 hot member per EP group
    else:
        assert r.pfc_pause_s == {}
        assert shape.pause_share == 0.0 and shape.hot == ()
