"""Scenario: what is trained, how it is parallelised, what it runs on, and what-ifs.

One frozen dataclass per section. The bounds of every key are written once, as field
metadata (:class:`FieldSpec`): validation, coercion of strings from the URL or ``--set``,
the CLI's error messages and the dashboard's slider ranges all read that one table.

Every key has a default, so ``{}`` is a valid scenario (the default preset: 1,024 H100 GPUs
on a rail-optimized InfiniBand NDR fat-tree).

Where things live (import every name from ``fabric_model.scenario``; the modules are the
package's layout, not its interface):

- ``fields``: :class:`FieldSpec` and ``_f``, the declaration every key is written with;
- one module per group of sections: ``hardware`` (``cluster``, ``fabric``), ``workload``
  (``model``, ``parallel``, ``training`` and the published model shapes), ``whatif``
  (``what_if``), ``costs`` (``costs``, ``reliability``), ``plant`` (``facility``,
  ``storage``, ``management``), ``hybrid`` (``hybrid``), ``ocs`` (``ocs``), ``nccl``
  (``nccl``), ``tails`` (``tails``);
- ``registry``: the ``SECTIONS`` registry and the key table built from it (``field_spec``,
  ``iter_field_specs``, ``coerce_value``);
- ``document``: :class:`Scenario` (all sections together) and the checks across sections;
- ``io``: ``--set`` assignments, overrides, YAML/JSON text and files, dumps;
- ``shapes``: parameter and FLOP counts of a model shape.

A new section goes in its own module here (its frozen dataclass, every key declared with
``_f(default, FieldSpec(...))``; copy ``nccl.py``), plus one line in ``SECTIONS``
(``registry.py``) and one field in :class:`Scenario` (``document.py``), plus its checks
across sections, if any, in ``document.py``.
"""

from __future__ import annotations

from fabric_model.scenario.costs import RELIABILITY_DATA as RELIABILITY_DATA
from fabric_model.scenario.costs import CostSpec, ReliabilitySpec
from fabric_model.scenario.document import Scenario
from fabric_model.scenario.fields import FieldSpec
from fabric_model.scenario.fields import extra_choices as extra_choices
from fabric_model.scenario.hardware import GPU_COUNT_MAX as GPU_COUNT_MAX
from fabric_model.scenario.hardware import VENDORS, ClusterSpec, FabricSpec
from fabric_model.scenario.hybrid import HYBRID_PARTITION_FAMILIES as HYBRID_PARTITION_FAMILIES
from fabric_model.scenario.hybrid import HybridSpec
from fabric_model.scenario.io import (
    MAX_SCENARIO_BYTES,
    apply_overrides,
    dump_scenario,
    load_scenario,
    parse_assignment,
    scenario_from_text,
    with_dependents,
)
from fabric_model.scenario.nccl import NCCL_ALGOS, NCCL_VERSIONS, NcclSpec
from fabric_model.scenario.nccl import NCCL_VERSIONS_PATH as NCCL_VERSIONS_PATH
from fabric_model.scenario.ocs import OcsSpec
from fabric_model.scenario.plant import FACILITY_DATA as FACILITY_DATA
from fabric_model.scenario.plant import FacilitySpec, ManagementSpec, StorageSpec
from fabric_model.scenario.registry import SECTIONS, field_spec, iter_field_specs
from fabric_model.scenario.registry import coerce_value as coerce_value
from fabric_model.scenario.tails import TailsSpec
from fabric_model.scenario.whatif import WhatIfSpec
from fabric_model.scenario.workload import (
    MODEL_NAMES,
    MODEL_SHAPES,
    SHAPE_KEYS,
    ModelSpec,
    ParallelismPlan,
    TrainingSpec,
)
from fabric_model.scenario.workload import MODELS_PATH as MODELS_PATH

__all__ = [
    "MAX_SCENARIO_BYTES",
    "MODEL_NAMES",
    "MODEL_SHAPES",
    "NCCL_ALGOS",
    "NCCL_VERSIONS",
    "SECTIONS",
    "SHAPE_KEYS",
    "VENDORS",
    "ClusterSpec",
    "CostSpec",
    "FabricSpec",
    "FacilitySpec",
    "FieldSpec",
    "HybridSpec",
    "ManagementSpec",
    "ModelSpec",
    "NcclSpec",
    "OcsSpec",
    "ParallelismPlan",
    "ReliabilitySpec",
    "Scenario",
    "StorageSpec",
    "TailsSpec",
    "TrainingSpec",
    "WhatIfSpec",
    "apply_overrides",
    "dump_scenario",
    "field_spec",
    "iter_field_specs",
    "load_scenario",
    "parse_assignment",
    "scenario_from_text",
    "with_dependents",
]
