"""Presentation mode (``ui.present``): ``?present=1`` replaces any page with the design's
story (``ui.deck.deck_slides``, the report's sections), one view per URL.

AppTest here; the real-browser walk (sidebar hidden, Next/Previous, a view by its URL) is
in tests/test_browser_present.py.
"""

from __future__ import annotations

import pytest

from fabric_model.presets import DEFAULT_PRESET, load_preset
from tests.apptest_helpers import assert_no_exception, new_session, url
from ui.deck import deck_slides
from ui.report import report_context

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def titles() -> list[str]:
    """The titles the story should show: the deck's, then the pinned what-ifs."""
    return [s.title for s in deck_slides(report_context(load_preset(DEFAULT_PRESET)))] + [
        "What-ifs"
    ]


def _title(at) -> str:  # type: ignore[no-untyped-def]
    return at.title[0].value


def test_present_steps_through_the_story_and_keeps_each_view_in_the_url(
    titles: list[str],
) -> None:
    at = new_session({"present": "1"}).run()
    assert_no_exception(at)
    assert _title(at) == titles[0] == DEFAULT_PRESET
    assert any(m.value.startswith("Step time: ") for m in at.markdown)
    assert at.button(key="present_prev").disabled
    at.button(key="present_next").click().run()
    assert url(at) == {"preset": DEFAULT_PRESET, "present": "1", "slide": "2"}
    assert _title(at) == titles[1]
    at.button(key="present_next").click().run()
    assert _title(at) == titles[2] and url(at)["slide"] == "3"
    at.button(key="present_prev").click().run()
    assert _title(at) == titles[1]
    at.button(key="present_leave").click().run()  # back to the page, the URL without it
    assert url(at) == {"preset": DEFAULT_PRESET}
    assert _title(at) == "Overview"


def test_a_view_opens_from_its_url_with_the_sidebars_scenario(titles: list[str]) -> None:
    at = new_session({"present": "1", "slide": str(len(titles))}).run()
    assert _title(at) == "What-ifs" and at.button(key="present_next").disabled
    at = new_session({"present": "1", "slide": "4", "cluster.n_gpus": "2048"}).run()
    assert_no_exception(at)
    assert "All-reduce across 2,048 GPUs" in _title(at)  # the sidebar's scenario, slide 4


def test_a_bad_slide_number_is_one_warning_naming_the_range(titles: list[str]) -> None:
    at = new_session({"present": "1", "slide": "99"}).run()
    assert [w.value for w in at.warning] == [
        f"URL parameter slide = '99': must be 1 to {len(titles)}; showing 1"
    ]
    assert _title(at) == titles[0]


def test_the_sidebar_toggle_starts_the_presentation() -> None:
    at = new_session().run()
    at.toggle(key="present_mode").set_value(True).run()
    assert url(at) == {"preset": DEFAULT_PRESET, "present": "1", "slide": "1"}
    assert _title(at) == DEFAULT_PRESET
