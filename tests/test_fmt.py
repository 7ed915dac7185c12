"""finops.fmt: one way to write money and durations for people."""
import math

import numpy as np
import pytest

from finops.fmt import MISSING, duration_ms, usd


@pytest.mark.parametrize("value, text", [
    (11316.814, "$11,316.81"), (1605.02, "$1,605.02"), (1_234_567.891, "$1,234,567.89"),
    (43.497, "$43.50"), (1.0, "$1.00"), (0.996, "$1.00"), (0.5, "$0.50"), (0.152, "$0.15"),
    (0.075, "$0.075"), (0.0043, "$0.0043"), (0.000123, "$0.00012"), (0.0000012, "$0.000001"),
    (0.0, "$0.00"), (-1605.02, "−$1,605.02"), (np.float64(2.5), "$2.50"), (np.int64(3000), "$3,000.00"),
])
def test_usd_separators_cents_and_sub_cent_only_under_a_dollar(value, text):
    assert usd(value) == text


@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf, np.nan, "n/a"])
def test_usd_of_no_value_is_a_dash_never_none_or_nan(value):
    assert usd(value) == MISSING == "—"


@pytest.mark.parametrize("value, text", [
    (0, "0 ms"), (850, "850 ms"), (999.4, "999 ms"), (999.6, "1.00 s"), (1000, "1.00 s"), (2_345, "2.35 s"),
    (12_345, "12.3 s"), (123_456, "123 s"), (None, "—"), (math.nan, "—"),
])
def test_duration_in_seconds_from_1000_ms(value, text):
    assert duration_ms(value) == text


def test_export_names_carry_the_filters_so_filtered_and_unfiltered_never_collide():
    from datetime import datetime

    from finops.filters import Filters
    from finops.fmt import export_name

    whole = Filters(datetime(2026, 11, 17), datetime(2026, 12, 1))
    acme = Filters(datetime(2026, 11, 17), datetime(2026, 12, 1), tenants=("acme",), sla_tiers=("gold",))
    assert export_name("showback", whole) == "showback_2026-11-17_to_2026-11-30"
    assert export_name("showback", acme) == "showback_2026-11-17_to_2026-11-30_tenant-acme_tier-gold"
    assert export_name("x", Filters(models=("../etc/passwd",))) == "x_all-data_model-..-etc-passwd"


def test_csv_and_parquet_exports_round_cost_to_micro_dollars_and_keep_rates():
    import io

    import pandas as pd

    from finops.spend.exports import parquet_bytes, safe_csv

    frame = pd.DataFrame({"tenant": ["acme"], "cost_usd": [11316.81234567891234], "cost_per_1m_tokens": [0.123456789]})
    assert safe_csv(frame).splitlines()[1] == "acme,11316.812346,0.123456789"
    back = pd.read_parquet(io.BytesIO(parquet_bytes(frame)))
    assert back["cost_usd"].iloc[0] == 11316.812346 and back["cost_per_1m_tokens"].iloc[0] == 0.123456789
