"""The NCCL tuner plugin's CSV: the model's algorithm, protocol and channels per size.

Written from the scenario, not from its cables (:func:`~fabric_model.collectives.tuner_csv.
tuner_csv`): one NVLink domain has collectives too.
"""

from __future__ import annotations

from fabric_model.collectives.tuner_csv import tuner_csv
from fabric_model.report.export.formats import EXPORT_FORMATS, Export
from fabric_model.scenario import Scenario

__all__ = ["nccl_tuner_export"]


def nccl_tuner_export(scenario: Scenario) -> Export:
    """Write the CSV NCCL's example tuner plugin reads (``plugins/tuner/example``)."""
    text, n_rows, notes = tuner_csv(scenario)
    suffix = EXPORT_FORMATS["nccl-tuner-csv"].file_suffix
    return Export("nccl-tuner-csv", text, n_rows, f"{scenario.name}{suffix}", notes)
