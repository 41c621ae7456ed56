"""InfiniBand multi-plane (``fabric.planes`` on ``fabric.vendor = infiniband``).

Sourced in assets/catalog.yaml: ConnectX-8 reaches XDR through a planarized network [S86]
and runs NDR 400G legs to Quantum-X800 through splitters [SL3], so an 800G XDR NIC port
splits into 2 planes of NDR 400G (Quantum-2 QM9700 at 400G, or Quantum-X800's 288 legs of
400G). No public source splits it into 4 x 200G or 8 x 100G InfiniBand links: refused.
"""

from __future__ import annotations

import pytest

from fabric_model.errors import InfeasibleDesignError
from fabric_model.plant.cost import bill_of_materials
from fabric_model.scenario import Scenario, apply_overrides

XDR = {"cluster.gpu": "b300", "fabric.vendor": "infiniband", "fabric.link_gbps": 800}


def s(n_gpus: int, planes: int, **extra: object) -> Scenario:
    over = {**XDR, "cluster.n_gpus": n_gpus, "fabric.planes": planes, **extra}
    return apply_overrides(Scenario(), over)


def test_auto_switch_runs_quantum_x800_in_its_288_x_400g_mode() -> None:
    """N3 (expert review 2): 2 planes of 400G on Q3400 (radix 288) need 2 tiers, not 3."""
    bom = bill_of_materials(s(16_384, 2))
    d = bom.to_dict()
    assert (d["switch"], d["switch_radix"], d["tiers"], d["n_switches"]) == ("q3400", 288, 2, 360)
    assert d["max_switch_hops"] == 3 and d["pod_nics"] == 16_384
    assert bom.capex_usd == pytest.approx(180.5e6, rel=0.005)
    qm = bill_of_materials(s(16_384, 2, **{"fabric.switch": "qm9700"}))
    assert qm.topology.tiers == 3 and qm.capex_usd > bom.capex_usd
    assert "over qm9700 radix 64 at 400G: 3 tiers" in d["switch_choice"]


def test_two_ib_planes_of_ndr_are_planes_times_one_plane() -> None:
    two = bill_of_materials(s(16_384, 2, **{"fabric.switch": "qm9700"}))
    topo = two.topology
    assert topo.planes == 2 and two.hardware.switch.key == "qm9700"
    assert two.hardware.radix == 64  # Quantum-2 at 400G
    # one plane: 16,384 NDR ports on radix-64 = 3 tiers, 512 leaves + 512 spines + 256 cores
    one = bill_of_materials(
        apply_overrides(
            Scenario(),
            {
                "cluster.gpu": "b300",
                "fabric.vendor": "infiniband",
                "fabric.link_gbps": 400,
                "cluster.n_gpus": 16_384,
            },
        )
    )
    assert dict(topo.switches_by_tier) == {
        t: 2 * n for t, n in one.topology.switches_by_tier.items()
    }
    assert topo.links_by_class == {k: 2 * v for k, v in one.topology.links_by_class.items()}
    nic_side = [x for x in two.lines if x.where == "nic-leaf (NIC side)"]
    assert [(x.key, x.quantity) for x in nic_side] == [("osfp_800g_2x400g_ib_planes_nic", 16_384)]
    assert two.to_dict()["planes"] == 2


def test_quantum_x800_runs_288_legs_of_400g() -> None:
    two = bill_of_materials(s(65_536, 2, **{"fabric.switch": "q3400"}))
    assert two.hardware.radix == 288
    # 65,536 ports per plane on radix 288: 2 tiers hold 288 x 144 = 41,472, so 3
    assert two.topology.tiers == 3


@pytest.mark.parametrize("planes", [4, 8])
def test_unsourced_ib_planes_refuse_in_one_line(planes: int) -> None:
    with pytest.raises(InfeasibleDesignError) as info:
        bill_of_materials(s(16_384, planes))
    msg = str(info.value)
    assert info.value.key == "fabric.planes" and "\n" not in msg
    assert msg.endswith(": 1, 2")  # the plane counts this NIC rate and switch allow
    why = {4: "no NIC-side breakout transceiver", 8: "runs 400, 800 Gb/s ports, not 100"}
    assert why[planes] in msg
