"""Text the pages show: a message that opens with a scenario key keeps the key's spelling."""

from __future__ import annotations

from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import training_step
from ui.theme import sentence_start


def test_a_warning_that_opens_with_a_key_keeps_it() -> None:
    """The Overview capitalises the step's warnings; page_fuzz seed 5 case 140 showed
    "Training.global_batch_tokens", a key no user can find in `keys` or the URL."""
    s = apply_overrides(
        Scenario(),
        {"cluster.n_gpus": 24, "model.name": "llama3-8b", "parallel.tp": 8, "parallel.pp": 1},
    )
    warnings = training_step(s).warnings
    opening = [w for w in warnings if w.startswith("training.global_batch_tokens")]
    assert opening, warnings
    assert sentence_start(opening[0]) == opening[0]
    assert sentence_start("memory is tight") == "Memory is tight"
    assert sentence_start("") == ""
