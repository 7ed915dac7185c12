"""How a number is written for people: one money formatter, one duration formatter, one "no value" mark.

Every page and every user-facing message writes money through :func:`usd` and durations through
:func:`duration_ms`, so the same figure reads the same everywhere: thousands separators, cents, more
decimals only under a dollar (two significant figures), and :data:`MISSING` instead of ``None`` or ``NaN``.
Exports keep full precision in numeric columns; this module is for text only.
"""
from __future__ import annotations

import math

MISSING = "—"
"""What a figure with no value shows (with the reason beside it or on hover), never ``None`` or ``NaN``."""

MAX_DECIMALS = 6        # micro-dollars: the finest a cost is stored or exported at


def _missing(x) -> bool:
    if x is None:
        return True
    try:
        return not math.isfinite(float(x))
    except (TypeError, ValueError):
        return True


def usd(x) -> str:
    """Dollars as text: separators and cents; under $1, two significant figures (up to micro-dollars).

    >>> usd(11316.814), usd(1605.02), usd(43.497), usd(0.152), usd(0.0043), usd(0.075)
    ('$11,316.81', '$1,605.02', '$43.50', '$0.15', '$0.0043', '$0.075')
    >>> usd(0), usd(-2500), usd(-0.0043), usd(1e-9), usd(None), usd(float("nan"))
    ('$0.00', '−$2,500.00', '−$0.0043', '< $0.000001', '—', '—')
    """
    if _missing(x):
        return MISSING
    x = float(x)
    sign, a = ("−" if x < 0 else ""), abs(x)
    if a == 0 or round(a, 2) >= 1:
        return f"{sign}${a:,.2f}"
    if a < 10 ** -MAX_DECIMALS / 2:
        return f"{sign}< $0.{'0' * (MAX_DECIMALS - 1)}1"
    decimals = max(2, min(MAX_DECIMALS, 1 - math.floor(math.log10(a))))
    return f"{sign}${a:,.{decimals}f}"


def usd_column_format(values) -> str:
    """A table column's printf format for dollars ``values``: cents, unless some amount is not zero but rounds to
    $0.00 (a fixture's $0.004 request), then enough decimals for its first two significant figures (at most
    :data:`MAX_DECIMALS`), so no spend reads "$0.00" beside a positive unit cost. The column stays numbers: it
    still sorts.

    >>> usd_column_format([1200.0, 0.5, 0]), usd_column_format([3.2, 0.0043]), usd_column_format([None, -0.031])
    ('$%,.2f', '$%,.4f', '$%,.2f')
    >>> usd_column_format([]), usd_column_format([1e-9, float("nan")])
    ('$%,.2f', '$%,.6f')
    """
    nums = [abs(float(v)) for v in values if not _missing(v)]
    small = [a for a in nums if 0 < a < 0.005]
    if not small:
        return "$%,.2f"
    return f"$%,.{max(2, min(MAX_DECIMALS, 1 - math.floor(math.log10(min(small)))))}f"


def duration_ms(x, decimals: int = 0, fine: bool = False) -> str:
    """Milliseconds as text; 1,000 ms and more in seconds. ``fine``: under a second to three significant digits
    (a queue wait of 0.126 ms is not '0 ms').

    >>> duration_ms(850), duration_ms(999.6), duration_ms(1000), duration_ms(12_345), duration_ms(2.345, 1)
    ('850 ms', '1.00 s', '1.00 s', '12.3 s', '2.3 ms')
    >>> duration_ms(0.126, fine=True), duration_ms(2.5, fine=True), duration_ms(0, fine=True), duration_ms(2_700, fine=True)
    ('0.126 ms', '2.5 ms', '0 ms', '2.70 s')
    >>> duration_ms(None)
    '—'
    """
    if _missing(x):
        return MISSING
    x = float(x)
    if fine and abs(x) < 999.5:
        return f"{number(x, 3)} ms"
    if abs(round(x, decimals)) < 1000:
        return f"{x:,.{decimals}f} ms"
    s = x / 1000
    return f"{s:,.2f} s" if abs(s) < 10 else f"{s:,.1f} s" if abs(s) < 100 else f"{s:,.0f} s"


def share(x, decimals: int = 1) -> str:
    """A share of a count as a percent: one request in 20,026 is not '0.0%' beside a count that says it exists.

    Nor is $479.99 of $480.20 '100.0%' (all of it): it is '> 99.9%'.

    >>> share(0.016), share(1 / 20_026), share(0), share(1.0), share(None), share(479.99 / 480.20)
    ('1.6%', '< 0.1%', '0.0%', '100.0%', '—', '> 99.9%')
    """
    if _missing(x):
        return MISSING
    least = 10.0 ** -(decimals + 2)
    if 0 < x < least / 2:
        return f"< {least:.{decimals}%}"
    return f"> {1 - least:.{decimals}%}" if 1 - least / 2 <= x < 1 else f"{x:.{decimals}%}"


def counted(n, noun: str) -> str:
    """A whole count and its noun, plural unless it is 1.

    >>> counted(1, "slot"), counted(6, "slot"), counted(12_000, "served request")
    ('1 slot', '6 slots', '12,000 served requests')
    """
    return f"{int(n):,} {noun}{'' if int(n) == 1 else 's'}"


def number(x, digits: int = 4) -> str:
    """A plain figure (a rate, a count of a what-if, a threshold): ``digits`` significant digits with separators,
    from 10,000 up whole (never an exponent: ``1e+06``), under 0.0001 '< 0.0001'.

    >>> number(0.8177), number(11.45), number(14_200), number(1e12), number(1e-9), number(0), number(7), number(-25_000)
    ('0.8177', '11.45', '14,200', '1,000,000,000,000', '< 0.0001', '0', '7', '-25,000')
    >>> number(7_200), number(1_234.5), number(-3_600), number(1_234.5, 3)
    ('7,200', '1,234', '-3,600', '1,234')
    >>> number(None), number(float("inf")), number(0.123456, 3)
    ('—', '—', '0.123')
    """
    if _missing(x):
        return MISSING
    x = float(x)
    a = abs(x)
    if a >= min(10_000, 10 ** digits):           # whole: %g would switch to an exponent at 10 ** digits
        return f"{x:,.0f}"
    if 0 < a < 0.0001:
        return "< 0.0001"
    return f"{x:,.{digits}g}"


def whole_or_places(v) -> str:
    """A count that may be fractional (replica-hours) with separators: whole as whole, else to two places
    (``,.4g`` read 1.44e+04).

    >>> whole_or_places(14400.0), whole_or_places(4.5)
    ('14,400', '4.50')
    """
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def period(since, until) -> str:
    """A period ``[since, until)`` as people say it: the last day included, times only when not whole days.

    >>> from datetime import datetime as d
    >>> period(d(2026, 11, 17), d(2026, 12, 1)), period(d(2026, 11, 30, 14), d(2026, 12, 1, 14))
    ('2026-11-17 to 2026-11-30', '2026-11-30 14:00 to 2026-12-01 14:00')
    >>> period(None, d(2026, 12, 1))
    'all data'
    """
    from datetime import time, timedelta

    if since is None or until is None:
        return "all data"
    if since.time() == time() and until.time() == time():
        return f"{since:%Y-%m-%d} to {until - timedelta(days=1):%Y-%m-%d}"
    return f"{since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M}"


def span(first, last) -> str:
    """The first and last request of some logs, to the minute, as people say it: the date once where both are on one
    day, one time where both are in one minute.

    >>> from datetime import datetime as d
    >>> span(d(2025, 3, 4, 14, 0, 5), d(2025, 3, 4, 14, 2)), span(d(2025, 6, 1, 12), d(2025, 6, 1, 12, 0, 40))
    ('2025-03-04 14:00 to 14:02', '2025-06-01 12:00')
    >>> span(d(2026, 11, 30, 23, 59), d(2026, 12, 1, 0, 1)), span(None, None)
    ('2026-11-30 23:59 to 2026-12-01 00:01', '—')
    """
    import pandas as pd

    if first is None or last is None or pd.isna(first) or pd.isna(last):
        return MISSING
    lo, hi = f"{first:%Y-%m-%d %H:%M}", f"{last:%Y-%m-%d %H:%M}"
    if lo == hi:
        return lo
    return f"{lo} to {hi[11:] if lo[:10] == hi[:10] else hi}"


def _is_cost(column: str) -> bool:
    return column.endswith("_usd") or (column.endswith("Cost") and column[:1].isupper())


def round_costs(frame):
    """An export's cost columns (``*_usd``, FOCUS ``*Cost``) rounded to micro-dollars; every other column, unit
    prices and rates included, keeps full precision.

    >>> import pandas as pd
    >>> round_costs(pd.DataFrame({"cost_usd": [1605.0212345678901], "BilledCost": [0.1 + 0.2],
    ...                           "cost_per_1m_tokens": [0.1234567891]})).iloc[0].tolist()
    [1605.021235, 0.3, 0.1234567891]
    """
    out = frame.copy()
    for c in out.columns:
        if _is_cost(str(c)) and out[c].dtype.kind == "f":
            out[c] = out[c].round(MAX_DECIMALS)
    return out


def in_words(items) -> str:
    """Items as a phrase: ``a``, ``a and b``, ``a, b and c``; ``""`` for none.

    >>> in_words(["error rate", "queue growing", "KV cache full"])
    'error rate, queue growing and KV cache full'
    """
    items = [str(x) for x in items]
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def some_of(items, most: int = 5) -> str:
    """The first ``most`` items as a phrase and how many more: 'a, b and c'; 'a, b, c, d, e and 3 more'.

    >>> some_of(["a", "b", "c"]), some_of("abcdefgh")
    ('a, b and c', 'a, b, c, d, e and 3 more')
    """
    items = [str(x) for x in items]
    return in_words(items) if len(items) <= most else ", ".join(items[:most]) + f" and {len(items) - most:,} more"


def _slug(value) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._]+", "-", str(value)).strip("-") or "blank"


def export_name(what: str, f) -> str:
    """A download's file name (no extension) that carries its period and filters, so exports never collide.

    >>> from datetime import datetime as d
    >>> from finops.filters import Filters
    >>> export_name("showback", Filters(d(2026, 11, 17), d(2026, 12, 1), tenants=("acme", "o'brien co")))
    'showback_2026-11-17_to_2026-11-30_tenant-acme+o-brien-co'
    >>> export_name("showback", Filters())
    'showback_all-data'
    """
    parts = [what, _slug(period(f.since, f.until)).replace("-to-", "_to_").replace(":", "")]
    for label, values in (("tenant", f.tenants), ("model", f.models), ("tier", f.sla_tiers)):
        if values:
            parts.append(f"{label}-" + "+".join(_slug(v) for v in values))
    return "_".join(parts)


def duration_columns(frame, columns):
    """``(frame, unit, names)``: the millisecond ``columns`` of ``frame`` in seconds (``"s"``) when any of them
    reaches 1,000 ms, else left in ms (``"ms"``), for a table that reads in one unit. A column turned to seconds is
    renamed so (``total_ms_p99`` -> ``total_s_p99``: a CSV of the table says its unit); ``names`` maps each of
    ``columns`` to its name in the frame returned.

    >>> import pandas as pd
    >>> out, unit, names = duration_columns(pd.DataFrame({"p50_ms": [850.0], "ttft_ms_p99": [12_345.0]}),
    ...                                     ["p50_ms", "ttft_ms_p99"])
    >>> unit, names, out["ttft_s_p99"].tolist()
    ('s', {'p50_ms': 'p50_s', 'ttft_ms_p99': 'ttft_s_p99'}, [12.345])
    """
    import re

    out = frame.copy()
    cols = [c for c in columns if c in out]
    top = max((float(out[c].max()) for c in cols if out[c].notna().any()), default=0.0)
    if top < 1000:
        return out, "ms", {c: c for c in cols}
    names = {c: re.sub(r"_ms(?=_|$)", "_s", c) for c in cols}
    for c in cols:
        out[c] = out[c] / 1000.0
    return out.rename(columns=names), "s", names


# (test on a column's name, formatter): the first that matches writes a table column's values for people
_COLUMN_FORMATS = (
    (lambda name: name.startswith("requests"), lambda v: f"{int(v):,}"),     # requests_with_total_ms: a count
    (lambda name: "usd" in name, usd),
    (lambda name: name.endswith("_ms") or "_ms_" in name, lambda v: duration_ms(v, fine=True)),
    (lambda name: name.endswith("share"), share),
)


def table(frame, missing: str = MISSING) -> str:
    """``frame`` as a terminal table for people, each column by its name: dollars (``*usd*``) through :func:`usd`,
    milliseconds (``*_ms``, ``*_ms_*``) through :func:`duration_ms` (seconds from 1,000 ms), shares (``*share``)
    through :func:`share`, whole counts (and ``requests*``) with separators, other figures through :func:`number` (never an exponent);
    times to the second (dates alone where every one is a whole day); text as it is; a value the data does not give (None, NaN, NaT, NA) as ``missing``.

    >>> import pandas as pd
    >>> print(table(pd.DataFrame({"policy": ["always", None], "escalation_share": [1.0, 0.5],
    ...                           "net_benefit_usd": [2.6387e-05, -0.069], "extra_latency_ms": [2307.9, 190.0],
    ...                           "requests": [14200, 3], "quality": [0.95, float("nan")]})))
    policy escalation_share net_benefit_usd extra_latency_ms requests quality
    always           100.0%       $0.000026           2.31 s   14,200    0.95
         —            50.0%         −$0.069           190 ms        3       —
    """
    import pandas as pd

    def column(name, values):
        fmt = next((f for test, f in _COLUMN_FORMATS if test(str(name))), None)
        if fmt is None and pd.api.types.is_datetime64_any_dtype(values):
            whole_days = bool((values.dropna() == values.dropna().dt.normalize()).all())
            fmt = (lambda v: f"{v:%Y-%m-%d}") if whole_days else (lambda v: f"{v:%Y-%m-%d %H:%M:%S}")
        elif fmt is None and pd.api.types.is_bool_dtype(values):
            fmt = str
        elif fmt is None and pd.api.types.is_integer_dtype(values):
            fmt = lambda v: f"{int(v):,}"      # noqa: E731
        elif fmt is None and pd.api.types.is_float_dtype(values):
            fmt = number
        elif fmt is None:
            fmt = lambda v: str(v) if isinstance(v, str) else number(v) if isinstance(v, float) else str(v)  # noqa: E731
        return [missing if _absent(v) else fmt(v) for v in values]

    def _absent(v) -> bool:
        try:
            return v is None or bool(pd.isna(v))
        except (TypeError, ValueError):
            return False
    shown = pd.DataFrame({c: column(c, frame[c]) for c in frame.columns}, index=frame.index)
    return shown.to_string(index=False)
