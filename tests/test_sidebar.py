"""app.py's sidebar: period presets, unknown filter values in the URL, one wording of the period."""
from datetime import datetime

import pytest

from helpers import run_page, texts

# the sample fleet of the demo_db fixture: 2026-11-15 00:00 to 2026-11-23 23:59 UTC
PRESET_SPANS = {
    "last 24 h": (datetime(2026, 11, 23), datetime(2026, 11, 24)),
    "last 7 days": (datetime(2026, 11, 17), datetime(2026, 11, 24)),
    "last 30 days": (datetime(2026, 10, 25), datetime(2026, 11, 24)),
    "this month": (datetime(2026, 11, 1), datetime(2026, 11, 24)),
    "last month": (datetime(2026, 10, 1), datetime(2026, 11, 1)),
}


@pytest.mark.parametrize("preset", list(PRESET_SPANS))
def test_a_preset_in_the_url_sets_the_period(demo_db, preset):
    at = run_page(demo_db, query_params={"period": preset})
    assert not at.exception
    f = at.session_state["_filters"]
    assert (f.since, f.until) == PRESET_SPANS[preset]


def test_the_period_is_worded_one_way_inclusive_of_the_last_day(demo_db):
    at = run_page(demo_db, query_params={"period": "last 7 days"})
    assert at.caption[0].value == "2026-11-17 to 2026-11-23 (UTC)"
    assert "Period shown: 2026-11-17 to 2026-11-23 (UTC)" in texts(at)
    assert "exclusive" not in texts(at)
    assert (at.date_input(key="from").value.isoformat(), at.date_input(key="to").value.isoformat()) == (
        "2026-11-17", "2026-11-23")


def test_editing_a_date_makes_the_period_custom(demo_db):
    at = run_page(demo_db, query_params={"period": "last 7 days"})
    at.date_input(key="from").set_value(datetime(2026, 11, 20).date()).run()
    assert at.selectbox(key="period").value == "custom"
    f = at.session_state["_filters"]
    assert (f.since, f.until) == (datetime(2026, 11, 20), datetime(2026, 11, 24))


def test_an_unknown_tenant_in_the_url_is_named_and_left_out(demo_db):
    at = run_page(demo_db, query_params={"tenant": "nobody", "model": "no-such-model"})
    assert not at.exception
    warnings = [w.value for w in at.sidebar.warning]
    assert any("tenants this store does not hold, left out: nobody; showing all tenants" in w for w in warnings)
    assert any("models this store does not hold, left out: no-such-model" in w for w in warnings)
    f = at.session_state["_filters"]
    assert f.tenants == () and f.models == ()


def test_a_period_in_the_url_the_fields_cannot_show_is_named(demo_db):
    """?from=garbage&to=2099-13-01&period=foo showed the whole store with no word: the fields dropped what they
    could not take. Each is named now; the test fleet's days are 2026-11-15 to 2026-11-23."""
    at = run_page(demo_db, query_params={"from": "garbage", "to": "2099-13-01", "period": "foo"})
    assert not at.exception, [e.value for e in at.exception]
    [warning] = [w.value for w in at.sidebar.warning if "The link's period" in w.value]
    assert warning == ("The link's period: from=garbage is no date (YYYY-MM-DD): 'From' ignored it; to=2099-13-01 is "
                       "no date (YYYY-MM-DD): 'To' ignored it; period=foo is none of custom, last 24 h, last 7 days, "
                       "last 30 days, this month, last month: 'Period' ignored it.")
    outside = run_page(demo_db, query_params={"from": "2020-01-01"})
    assert not outside.exception, [e.value for e in outside.exception]
    assert ("The link's period: from=2020-01-01 is outside the stored days (2026-11-15 to 2026-11-23)."
            in [w.value for w in outside.sidebar.warning])
    assert not [w for w in run_page(demo_db, query_params={"from": "2026-11-17"}).sidebar.warning
                if "The link's period" in w.value]
