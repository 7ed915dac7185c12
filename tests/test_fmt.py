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
