"""Altair chart builders: each takes the DataFrame a ``finops`` view returns and gives an ``alt.Chart``.

Every chart has a title, axis titles with units and tooltips. Pages only place them.
Sections are grouped by topic; add new ones under their own heading.
"""
from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime

import altair as alt
import numpy as np
import pandas as pd

from finops.fmt import MISSING, duration_ms, number, usd
from finops.schema import IDLE_TENANT
from finops.store import SEGMENT_EXPRS, SEGMENT_LABELS

IDLE_COLOR = "#b9bec7"
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
           "#79706e")
GRAIN_TITLES = {"hour": ("Hour (UTC)", "per hour"), "day": ("Day (UTC)", "per day"),
                "week": ("Week starting (UTC)", "per week"), "month": ("Month", "per month")}
GRAIN_FORMAT = {"hour": "%b %d %H:%M", "day": "%b %d", "week": "%b %d", "month": "%b %Y"}


# fit the container's width; ``height`` is the plot's height (axes, legends and titles come on top)
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")

#: a name on an axis (a model, a tenant) longer than this many characters gives its middle way to "…": the start
#: (the provider's or family's prefix) and the end (the size and variant) are what tell two models apart, where
#: cutting the end drew three bars all labelled "accounts/firewor…"
NAME_CHARS = 34


def name_axis(chars: int = NAME_CHARS, **kwargs) -> alt.Axis:
    """The axis of a name field: a label past ``chars`` characters shortened in the middle, never at the end."""
    return alt.Axis(labelExpr=f"truncate(datum.label, {int(chars)}, 'center')", labelLimit=int(chars * 7.6), **kwargs)


#: a name in a legend is shortened sooner (a legend sets several side by side): 24 characters, about 150 px
LEGEND_NAME_CHARS = 24


def name_legend(columns: int = 4, qualified: bool = False, **kwargs) -> alt.Legend:
    """A legend of names under the chart, ``columns`` side by side (about 190 px each: 4 fit a full-width chart,
    2 a half-width one), each name shortened in the middle past :data:`LEGEND_NAME_CHARS` characters.
    ``qualified``: a label is a name and a qualifier in brackets ("llama-3.1-8b (small)"); the name alone is
    shortened and the qualifier kept whole (otherwise every long name of one size class read alike)."""
    short = f"truncate(datum.label, {LEGEND_NAME_CHARS}, 'center')"
    if qualified:
        cut = "lastindexof(datum.label, ' (')"
        short = (f"{cut} > 0 ? truncate(substring(datum.label, 0, {cut}), {LEGEND_NAME_CHARS}, 'center') "
                 f"+ substring(datum.label, {cut}) : {short}")
    return alt.Legend(orient="bottom", columns=columns, labelLimit=250 if qualified else 170, labelExpr=short,
                      **kwargs)


# ---------------------------------------------------------------- times: UTC in every browser
# The store's times are naive UTC. Handed to the browser naive, Vega reads them in the viewer's time zone: east of
# UTC (Berlin, Tokyo) every day's spend was drawn on the day before, its axis saying "Day (UTC)". So every chart's
# times go out as UTC instants (:func:`_chart`), every time axis has a UTC scale and every time in a tooltip a UTC
# time unit (:func:`_time_tip`).

def _utc(data):
    """``data`` with its naive datetime columns marked UTC (a frame's copy; anything else as it is)."""
    if not isinstance(data, pd.DataFrame):
        return data
    naive = [c for c in data.columns if isinstance(data[c].dtype, np.dtype) and data[c].dtype.kind == "M"]
    return data.assign(**{c: data[c].dt.tz_localize("UTC") for c in naive}) if naive else data


def _chart(data=alt.Undefined, **kwargs) -> alt.Chart:
    """``alt.Chart`` of ``data`` with its times as UTC instants (:func:`_utc`)."""
    return alt.Chart(_utc(data), **kwargs)


#: the finest time a tooltip shows (its format picks what it writes)
_TIP_UNIT = alt.TimeUnitParams(unit="yearmonthdatehoursminutes", utc=True)


def _time_tip(field: str, title: str, fmt: str) -> alt.Tooltip:
    """A tooltip of the time ``field`` written in UTC (a format alone writes the viewer's local time)."""
    return alt.Tooltip(f"{field}:T", title=title, format=fmt, timeUnit=_TIP_UNIT)


def _with_tip_texts(data: pd.DataFrame, writers: dict) -> pd.DataFrame:
    """``data`` with a text column ``<col>_tip`` for each ``col: write`` of ``writers``: the value written, or —
    where there is none (a tooltip writes a missing number as 'null')."""
    return data.assign(**{f"{c}_tip": [MISSING if pd.isna(v) else write(v) for v in data[c]] for c, write in writers.items()})


def _text_tip(field: str, title: str) -> alt.Tooltip:
    """The tooltip of a ``<field>_tip`` column of :func:`_with_tip_texts`."""
    return alt.Tooltip(f"{field}_tip:N", title=title)


# ---------------------------------------------------------------- bounds: no chart grows with the data

#: coloured series in one chart (models, tenants, routes): the largest; the rest folded into OTHER
MAX_SERIES = len(PALETTE)
#: rows of one bar chart or heatmap axis (a bar per model, tenant or tier): the largest; the rest left out
MAX_ROWS = 30
#: data rows one chart sends to the browser; a longer time series gets a coarser grain (sums) or is sampled
MAX_POINTS = 5_000
OTHER = "other"
OTHER_COLOR = "#d9d9d9"        # the folded rest: lighter than idle capacity's grey


def sparkline(values) -> list[float]:
    """The points of a KPI card's sparkline: ``values`` less missing ones, rounded to nine significant digits of
    the largest. Streamlit scales a sparkline to its own range, so float noise drew as a trend: an idle hour's
    $80 beside a busy hour's $79.999999999999 (the same GPU-hour, summed another way) drew as a steep rise.

    >>> sparkline([79.999999999999, 80.0, None]), sparkline([0.5, 0.25]), sparkline([])
    ([80.0, 80.0], [0.5, 0.25], [])
    """
    nums = pd.to_numeric(pd.Series(list(values), dtype="object"), errors="coerce").astype("float64")
    nums = nums[np.isfinite(nums)]
    top = float(nums.abs().max()) if len(nums) else 0.0
    if top == 0:
        return nums.tolist()
    return nums.round(9 - math.ceil(math.log10(top))).tolist()


def keep_top(frame: pd.DataFrame, key: str, weight: str, n: int, *, what: str, by_what: str,
             fold: tuple[str, ...] | None = None, by: tuple[str, ...] = (), keep: tuple[str, ...] = ()
             ) -> tuple[pd.DataFrame, str | None]:
    """The rows of the ``n`` values of ``key`` with the largest total ``weight``, and a note saying so.

    ``fold`` names additive columns: the other values become one :data:`OTHER` row per ``by`` group,
    those columns summed (other columns empty); without it the others are left out. ``keep`` values
    (idle capacity) are always kept and not counted.

    >>> f = pd.DataFrame({"model": list("abc"), "cost_usd": [1.0, 5.0, 3.0]})
    >>> out, note = keep_top(f, "model", "cost_usd", 2, what="models", by_what="spend", fold=("cost_usd",))
    >>> out.to_dict("list"), note
    ({'model': ['b', 'c', 'other'], 'cost_usd': [5.0, 3.0, 1.0]}, "the 2 of 3 models with the highest spend; the rest as 'other'")
    >>> f = pd.DataFrame({"model": list("abcd"), "cost_usd": [0.0, 0.0, 2.0, 0.0]})
    >>> out, note = keep_top(f, "model", "cost_usd", 2, what="models", by_what="spend", fold=("cost_usd",))
    >>> out.to_dict("list"), note
    ({'model': ['c', 'other'], 'cost_usd': [2.0, 0.0]}, "the 1 of 4 models with any spend; the rest as 'other'")
    """
    names = frame[key][~frame[key].isin(keep)]
    distinct = names.nunique()
    if distinct <= n:
        return frame, None
    totals = frame[~frame[key].isin(keep)].groupby(key, dropna=False)[weight].sum()
    # a value whose weight is 0 (a model nothing prices, in a spend chart) is never among the largest: n of them
    # tied at 0 would be picked by name alone, and shown as if they led the rest
    ranked = totals[totals > 0].sort_values(ascending=False, kind="stable")
    chosen = list(ranked.index[:n])
    top = set(chosen) | set(keep)
    shown = frame[frame[key].isin(top)]
    shown = shown.assign(_w=shown.groupby(key)[weight].transform("sum")).sort_values(
        "_w", ascending=False, kind="stable").drop(columns="_w")
    lead = (f"the {n} of {distinct:,} {what} with the highest {by_what}" if len(chosen) == n else
            f"the {len(chosen)} of {distinct:,} {what} with any {by_what}")
    if not fold:
        return shown, f"{lead}; the others are left out"
    rest = frame[~frame[key].isin(top)]
    folded = rest.groupby(list(by), dropna=False, sort=False)[list(fold)].sum().reset_index() if by else \
        rest[list(fold)].sum().to_frame().T
    folded[key] = OTHER
    out = pd.concat([shown, folded[[c for c in frame.columns if c in folded.columns]]], ignore_index=True)
    return out, f"{lead}; the rest as '{OTHER}'"


def thin_points(frame: pd.DataFrame, x: str, *, max_points: int = MAX_POINTS, sums: tuple[str, ...] | None = None,
                by: tuple[str, ...] = (), unit: str = "periods") -> tuple[pd.DataFrame, str | None]:
    """At most ``max_points`` rows over the x values ``x``: with ``sums`` (additive columns) every k
    consecutive x values merge into the first (a coarser grain, the sums added); without, every k-th x
    value is kept (sampled). Returns the frame and a note saying which, or None when it fitted.

    >>> f = pd.DataFrame({"period": [1, 2, 3, 4], "cost_usd": [1.0, 2.0, 3.0, 4.0]})
    >>> out, note = thin_points(f, "period", max_points=2, sums=("cost_usd",))
    >>> out.to_dict("list"), note
    ({'period': [1, 3], 'cost_usd': [3.0, 7.0]}, 'each point merges 2 periods (at most 2 points a chart)')
    """
    if len(frame) <= max_points or frame.empty:
        return frame, None
    xs = np.sort(frame[x].dropna().unique())
    k = math.ceil(len(frame) / max_points)
    if sums:
        start = pd.Series(xs[(np.arange(len(xs)) // k) * k], index=xs)
        merged = frame.assign(**{x: frame[x].map(start)})
        cols = [x, *by]
        first = [c for c in frame.columns if c not in cols and c not in sums]
        agg = {**{c: "sum" for c in sums}, **{c: "first" for c in first}}
        out = merged.groupby(cols, dropna=False, sort=True).agg(agg).reset_index()[list(frame.columns)]
        return out, f"each point merges {k} {unit} (at most {max_points:,} points a chart)"
    kept = set(xs[::k])
    return frame[frame[x].isin(kept)], f"one in every {k} of the {len(xs):,} {unit} shown (at most {max_points:,} points a chart)"


#: the longest line of a chart's title or subtitle, in characters: Vega cuts a longer line with an ellipsis at the
#: chart's width ("Share of requests by RTT (ms): green where escala…" at 1,280 px); a longer title wraps to more
#: lines instead
TITLE_LINE_CHARS = 48
#: the same for a chart beside another one (:func:`beside`): at 1,024 pixels such a chart's title cut after ~29
HALF_TITLE_LINE_CHARS = 28
#: where a word longer than a line (a model's name with its path and version) is broken: after one of these
WORD_BREAKS = "/-_"


def _lines(text: str, chars: int = TITLE_LINE_CHARS) -> str | list[str]:
    """``text`` as it fits a chart's title: itself when short, else lines of at most ``chars``, broken at spaces;
    a word longer than a line is broken after a ``/``, ``-`` or ``_`` (else anywhere), as textwrap would not.

    >>> _lines("meta/llama-2-13b-chat:f4e2de70d66816a838a89eeeb6219: total latency per day", 28)
    ['meta/llama-2-13b-', 'chat:f4e2de70d66816a838a89ee', 'eb6219: total latency per', 'day']
    """
    if len(text) <= chars:
        return text
    lines: list[str] = []
    for word in text.split():
        pieces = [p for p in re.split(f"(?<=[{re.escape(WORD_BREAKS)}])", word) if p] if len(word) > chars else [word]
        for k, piece in enumerate(q for p in pieces for q in textwrap.wrap(p, chars, break_on_hyphens=False)):
            glue = "" if k else " "            # a piece of the word before it joins without a space
            if lines and len(lines[-1]) + len(glue) + len(piece) <= chars:
                lines[-1] += glue + piece
            else:
                lines.append(piece)
    return text if len(lines) <= 1 else lines


def beside(chart: alt.TopLevelMixin, chars: int = HALF_TITLE_LINE_CHARS) -> alt.TopLevelMixin:
    """``chart`` with its title and subtitle wrapped to lines of at most ``chars``, for a chart drawn beside another
    (``st.columns(2)``; fewer ``chars`` in a narrower column): Vega cuts a title line wider than its chart.

    >>> beside(alt.Chart().properties(title="Mean queue wait against utilisation at c = 12 slots")).title.to_dict()
    {'text': ['Mean queue wait against', 'utilisation at c = 12 slots']}
    """
    title = chart.title
    if title is alt.Undefined:
        return chart
    spec = title.to_dict() if isinstance(title, alt.TitleParams) else {"text": title}
    for key in ("text", "subtitle"):
        if key in spec:
            spec[key] = _lines(" ".join(_as_list(spec[key])), chars)
    return chart.properties(title=alt.TitleParams.from_dict(spec))


def _as_list(lines: str | list[str]) -> list[str]:
    return lines if isinstance(lines, list) else [lines]


def _titled(title, *notes: str | None):
    """The chart's title (wrapped to lines that fit, :func:`_lines`), with the bounds applied to its data as a
    subtitle (said on screen)."""
    said = [line for n in notes if n for line in _as_list(_lines(n[0].upper() + n[1:] + "."))]
    text = _lines(title) if isinstance(title, str) else title
    return alt.TitleParams(text=text, subtitle=said) if said else (
        alt.TitleParams(text=text) if isinstance(text, list) else text)


def _log_scale(values) -> alt.Scale:
    """A log scale over the data with a margin, not widened to whole decades: Vega's nice log domain drew
    latencies of 1.2 to 1.7 s on an axis from 1 to 10 s, the lines along its floor."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype="float64")
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return alt.Scale(type="log")
    return alt.Scale(type="log", nice=False, domain=[float(v.min()) / 1.3, float(v.max()) * 1.3])


def _lone_points(long: pd.DataFrame, series: list[str], x: str) -> alt.OverlayMarkDef | bool:
    """Points on a line chart where a series has a single x value: a line needs two points, so a model seen in one
    hour (or one length bucket) would otherwise draw nothing and its panel look empty. Hollow, so that a legend
    drawing only the line's dash (no colour of its own) keeps its stroke."""
    if long.empty:
        return False
    alone = long.groupby(series, dropna=False)[x].nunique()
    return alt.OverlayMarkDef(size=40, filled=False) if bool((alone < 2).any()) else False


def _series_scale(series: list[str]) -> alt.Scale:
    """Colours for models (or tenants): the named ones from the palette, then the folded rest ('other') in a
    light grey of its own (with 10 named it took the first's blue), then the idle-capacity series, grey, last."""
    present = set(series)
    named = sorted(s for s in present if s not in (IDLE_TENANT, OTHER))
    tail = [(OTHER, OTHER_COLOR)] * (OTHER in present) + [(IDLE_TENANT, IDLE_COLOR)] * (IDLE_TENANT in present)
    domain = named + [name for name, _ in tail]
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(named))] + [color for _, color in tail]
    return alt.Scale(domain=domain, range=colors)


TIME_UNITS = {"hour": "yearmonthdatehours", "day": "yearmonthdate", "week": "yearweek", "month": "yearmonth"}


def _time_format(grain: str, periods=None, formats: dict | None = None, this_year: int | None = None) -> str:
    """The axis format of ``grain`` (in ``formats``, else :data:`GRAIN_FORMAT`), with the year where ``periods``
    fall in more than one year or in another year than this one (UTC): a store of three years' logs labelled its
    weeks Nov 12, Dec 17, Mar 02, Jan 04, and a model seen once in 2023 read 'Dec 19', as if this December.

    >>> _time_format("week", this_year=2026), _time_format("week", pd.to_datetime(["2026-11-30"]), this_year=2026)
    ('%b %d', '%b %d')
    >>> _time_format("week", pd.to_datetime(["2025-12-29", "2026-01-05"]), this_year=2026)
    '%Y-%m-%d'
    >>> _time_format("15min", pd.to_datetime(["2023-12-19 10:15"]), TIME_FORMAT, this_year=2026)
    '%Y-%m-%d %H:%M'
    """
    fmt = (formats or GRAIN_FORMAT).get(grain, "%b %d")
    if periods is None or "%Y" in fmt:
        return fmt
    years = set(pd.to_datetime(pd.Series(periods), errors="coerce").dropna().dt.year)
    if not years or years == {this_year or datetime.now(UTC).year}:
        return fmt
    return "%Y-%m-%d %H:%M" if "%H" in fmt else "%Y-%m-%d"


def _x_time(grain: str, field: str = "period", banded: bool = False, periods=None) -> alt.X:
    """A UTC time axis; ``banded`` bins it by the grain so that bars fill their hour/day/week; ``periods``: the
    times drawn, for the year in the labels where they span more than one (:func:`_time_format`)."""
    title, _ = GRAIN_TITLES.get(grain, GRAIN_TITLES["day"])
    fmt = _time_format(grain, periods)
    # hourly series span days: Vega picks the ticks, labelled on the 24-hour clock as every tooltip and table is
    # (its own labels read "03 PM"), a midnight by its day
    hourly = ("utchours(datum.value) == 0 && utcminutes(datum.value) == 0 ? utcFormat(datum.value, '%a %d') "
              ": utcFormat(datum.value, '%H:%M')")
    axis = alt.Axis(labelAngle=0, labelExpr=hourly) if grain == "hour" else alt.Axis(format=fmt, labelAngle=0)
    if banded:      # one band per hour/day/week, labelled under its middle
        return alt.X(f"{field}:O", timeUnit=alt.TimeUnitParams(unit=TIME_UNITS.get(grain, "yearmonthdate"), utc=True),
                     title=title, axis=alt.Axis(format=fmt, labelAngle=0, labelOverlap=True))
    return alt.X(f"{field}:T", title=title, axis=axis, scale=alt.Scale(type="utc"))


def usd_axis_format(values) -> str:
    """A d3 format for a dollar axis whose largest value is ``max(|values|)``: whole dollars from $20, cents from
    $0.20, and below that enough decimals that the ticks differ (a $0.03 fleet's axis read "$0" at every tick).

    >>> usd_axis_format([1200.0]), usd_axis_format([3.5]), usd_axis_format([0.031]), usd_axis_format([])
    ('$,.0f', '$,.2f', '$,.4~f', '$,.2f')
    """
    nums = pd.to_numeric(pd.Series(list(values), dtype="object"), errors="coerce").astype("float64").abs()
    top = float(nums[np.isfinite(nums)].max()) if np.isfinite(nums).any() else 0.0
    if top >= 20:
        return "$,.0f"
    if top >= 0.2 or top == 0:
        return "$,.2f"
    return f"$,.{min(8, math.ceil(-math.log10(top)) + 2)}~f"


# ---------------------------------------------------------------- spend

#: hourly money series of this many hours or more are drawn as areas (a bar an hour would be a hairline); fewer as bars
AREAS_FROM_HOURS = 48


def spend_over_time_mark(frame: pd.DataFrame, grain: str) -> str:
    """How an hour's or a day's money is drawn (:func:`spend_over_time`, :func:`gpu_cost`), for the caption beside
    it: "areas" for :data:`AREAS_FROM_HOURS` hours or more, else "bars", each its bucket: days and longer, and a
    few hours, where an area between two hours' totals draws a ramp no hour had (a fleet busy one hour and idle
    the next read as a slow fall through the hour)."""
    return "areas" if grain == "hour" and frame["period"].nunique() >= AREAS_FROM_HOURS else "bars"


def spend_over_time(frame: pd.DataFrame, grain: str, title: str = "Spend over time by model") -> alt.Chart:
    """Stacked bars of ``cost_usd`` per ``period`` and ``series`` (models + idle capacity): the
    :data:`MAX_SERIES` costliest models, the rest as 'other'; at most :data:`MAX_POINTS` bars."""
    sums = tuple(c for c in ("cost_usd", "requests") if c in frame)
    frame, top_note = keep_top(frame, "series", "cost_usd", MAX_SERIES, what="models", by_what="spend",
                               fold=sums, by=("period",), keep=(IDLE_TENANT,))
    frame, thin_note = thin_points(frame, "period", sums=sums, by=("series",), unit=f"{grain}s")
    title = _titled(title, top_note, thin_note)
    _, per = GRAIN_TITLES.get(grain, GRAIN_TITLES["day"])
    fmt = GRAIN_FORMAT.get(grain, "%b %d")
    banded = spend_over_time_mark(frame, grain) == "bars"
    mark = _chart(frame).mark_bar() if banded else _chart(frame).mark_area()
    stacked = frame.groupby("period")["cost_usd"].sum() if len(frame) else []
    return mark.encode(
        x=_x_time(grain, banded=banded, periods=frame["period"]),
        y=alt.Y("sum(cost_usd):Q", title=f"Spend (USD {per})", axis=alt.Axis(format=usd_axis_format(stacked))),
        color=alt.Color("series:N", title="Model", scale=_series_scale(list(frame["series"])),
                        legend=name_legend()),
        order=alt.Order("series:N"),
        tooltip=[_time_tip("period", "From (UTC)", fmt + (" %Y" if grain != "month" else "")),
                 alt.Tooltip("series:N", title="Model"),
                 alt.Tooltip("sum(cost_usd):Q", title="Spend (USD)", format="$,.2f"),
                 alt.Tooltip("sum(requests):Q", title="Requests", format=",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=320)


def top_tenants(table: pd.DataFrame, title: str = "Top tenants by spend") -> alt.Chart:
    """Horizontal bars of tenant spend, largest first, with share and change in the tooltip."""
    data = _with_tip_texts(table.assign(change_pct=table["change"] * 100, share_pct=table["share"] * 100),
                           {"previous_cost_usd": usd, "change_pct": lambda v: f"{v:+.1f}"})
    return _chart(data).mark_bar(color=PALETTE[0]).encode(
        y=alt.Y("tenant:N", sort="-x", title="Tenant", axis=name_axis()),
        x=alt.X("cost_usd:Q", title="Spend (USD)", axis=alt.Axis(format=usd_axis_format(data["cost_usd"]))),
        tooltip=[alt.Tooltip("tenant:N", title="Tenant"),
                 alt.Tooltip("cost_usd:Q", title="Spend (USD)", format="$,.2f"),
                 alt.Tooltip("share_pct:Q", title="Share of tenant spend (%)", format=".1f"),
                 _text_tip("previous_cost_usd", "Previous period (USD)"), _text_tip("change_pct", "Change (%)"),
                 alt.Tooltip("requests:Q", title="Requests", format=",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=max(140, 30 * len(data)))


def tenant_trend(trend: pd.DataFrame, grain: str, title: str = "Spend trend of the top tenants") -> alt.Chart:
    """One line per tenant: ``cost_usd`` per ``period`` (at most :data:`MAX_SERIES` tenants and
    :data:`MAX_POINTS` points)."""
    trend, top_note = keep_top(trend, "tenant", "cost_usd", MAX_SERIES, what="tenants", by_what="spend")
    trend, thin_note = thin_points(trend, "period", sums=("cost_usd",), by=("tenant",), unit=f"{grain}s")
    title = _titled(title, top_note, thin_note)
    _, per = GRAIN_TITLES.get(grain, GRAIN_TITLES["day"])
    return _chart(trend).mark_line(point=(grain != "hour") or _lone_points(trend, ["tenant"], "period")).encode(
        x=_x_time(grain, periods=trend["period"]),
        y=alt.Y("cost_usd:Q", title=f"Spend (USD {per})", axis=alt.Axis(format=usd_axis_format(trend["cost_usd"]))),
        color=alt.Color("tenant:N", title="Tenant", scale=_series_scale(list(trend["tenant"])),
                        legend=name_legend()),
        tooltip=[_time_tip("period", "From (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("tenant:N", title="Tenant"),
                 alt.Tooltip("cost_usd:Q", title="Spend (USD)", format="$,.2f")],
    ).properties(autosize=FIT_X, title=_titled(title), height=320)


def cost_heatmap(matrix: pd.DataFrame, title: str = "$ per 1M tokens by model and tenant") -> alt.Chart:
    """Model x tenant cells coloured by $ per 1M tokens (log colour scale), labelled with the value."""
    data = matrix.dropna(subset=["cost_per_1m_tokens"])
    data = data[data["cost_per_1m_tokens"] > 0]
    data, model_note = keep_top(data, "model", "cost_usd", MAX_ROWS, what="models", by_what="spend")
    data, tenant_note = keep_top(data, "tenant", "cost_usd", MAX_ROWS, what="tenants", by_what="spend")
    title = _titled(title, model_note, tenant_note)
    base = _chart(data).encode(
        # every column labelled: at -30 degrees Vega dropped every other tenant's name as overlapping
        x=alt.X("tenant:N", title="Tenant", axis=name_axis(labelAngle=-45, labelOverlap=False)),
        # model names run long ("claude-3-5-sonnet-20241022", "accounts/fireworks/models/llama-v2-13b-chat"): whole
        # up to NAME_CHARS characters, past them shortened in the middle
        y=alt.Y("model:N", title="Model", axis=name_axis()))
    tooltip = [alt.Tooltip("model:N", title="Model"), alt.Tooltip("tenant:N", title="Tenant"),
               alt.Tooltip("cost_per_1m_tokens:Q", title="$ per 1M tokens", format="$,.3f"),
               alt.Tooltip("cost_usd:Q", title="Spend (USD)", format="$,.2f"),
               alt.Tooltip("tokens:Q", title="Tokens", format=","),
               alt.Tooltip("requests:Q", title="Requests", format=",")]
    cells = base.mark_rect().encode(
        color=alt.Color("cost_per_1m_tokens:Q", title="$ per 1M tokens", scale=alt.Scale(type="log", scheme="oranges"),
                        legend=alt.Legend(format="$,.2f", values=log_legend_values(data["cost_per_1m_tokens"]))),
        tooltip=tooltip)
    labels = base.mark_text(fontSize=11).encode(
        text=alt.Text("cost_per_1m_tokens:Q", format="$,.2f"),
        color=alt.condition(f"datum.cost_per_1m_tokens > {_dark_cell_threshold(data)}", alt.value("white"), alt.value("black")),
        tooltip=tooltip)
    return (cells + labels).properties(autosize=FIT_X, title=_titled(title), height=max(160, 40 * data["model"].nunique()))


def log_legend_values(values) -> list[float]:
    """The labels of a log colour scale's legend over ``values``: the lowest and the highest, and the 1-2-5 steps
    between them at least 1.6x from either end and from each other (Vega labelled a gradient of $0.15 to $4.20 with
    "$1.00" alone, so the colours' range could not be read).

    >>> log_legend_values([0.15, 0.2, 4.2])
    [0.15, 0.5, 1.0, 2.0, 4.2]
    >>> log_legend_values([2.5, 2.5]), log_legend_values([])
    ([2.5], [])
    """
    v = [float(x) for x in values if x is not None and math.isfinite(float(x)) and float(x) > 0]
    if not v:
        return []
    lo, hi = min(v), max(v)
    if hi / lo < 1.6:
        return [lo] if lo == hi else [lo, hi]
    steps = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    out = [lo]
    for x in sorted(steps):
        if x / out[-1] >= 1.6 and hi / x >= 1.6:
            out.append(round(x, 12))
    return [*out, hi]


def _dark_cell_threshold(data: pd.DataFrame) -> float:
    """The 75th percentile of the cells' $ per 1M tokens: the darkest quarter of the heatmap (above it) is
    labelled in white, the rest in black.

    >>> _dark_cell_threshold(pd.DataFrame({"cost_per_1m_tokens": [1.0, 2.0, 3.0, 4.0, 5.0]}))
    4.0
    """
    return float(data["cost_per_1m_tokens"].quantile(0.75)) if len(data) else 0.0


#: the colours of token classes and of spend parts, in the order the caller's labels come (input shades first,
#: then output, fees, recorded costs, GPU time); a label past them takes the palette's next colour
CLASS_COLOURS = (PALETTE[0], "#9ecae9", "#1f3f66", PALETTE[1], PALETTE[5], PALETTE[6], PALETTE[2])


def _labelled_scale(labels: Sequence[str]) -> alt.Scale:
    """A colour scale over exactly ``labels`` (a label outside a scale's domain is drawn as nothing)."""
    colours = [CLASS_COLOURS[i] if i < len(CLASS_COLOURS) else PALETTE[i % len(PALETTE)] for i in range(len(labels))]
    return alt.Scale(domain=list(labels), range=colours)


def token_mix(tokens_long: pd.DataFrame, classes: Sequence[str], title: str = "Token mix by model") -> alt.Chart:
    """100 % stacked bars: each model's tokens by class; ``classes`` are the class labels in drawing order (the
    view's, :data:`finops.spend.costviews.TOKEN_CLASSES`)."""
    tokens_long, note = keep_top(tokens_long, "model", "tokens", MAX_ROWS, what="models", by_what="token count",
                                 fold=("tokens",), by=("token_class",))
    title = _titled(title, note)
    data = tokens_long.assign(share_pct=tokens_long["share"] * 100)
    return _chart(data).mark_bar().encode(
        y=alt.Y("model:N", title="Model", axis=name_axis()),
        x=alt.X("sum(tokens):Q", stack="normalize", title="Share of the model's tokens (%)",
                axis=alt.Axis(format="%")),
        # one column: two of "input (written to the prompt cache)" overflow a half-width chart and are cut
        color=alt.Color("token_class:N", title="Tokens", legend=alt.Legend(orient="bottom", columns=1, labelLimit=300),
                        scale=_labelled_scale(classes)),
        tooltip=[alt.Tooltip("model:N", title="Model"), alt.Tooltip("token_class:N", title="Tokens"),
                 alt.Tooltip("sum(tokens):Q", title="Tokens", format=","),
                 alt.Tooltip("share_pct:Q", title="Share (%)", format=".1f")],
    ).properties(autosize=FIT_X, title=_titled(title), height=max(140, 36 * data["model"].nunique()))


def cost_parts(cost_long: pd.DataFrame, parts: Sequence[str],
               title: str = "What each model's spend is made of") -> alt.Chart:
    """Stacked bars: each model's spend split into ``parts`` (the view's labels in drawing order,
    :data:`finops.spend.costviews.COST_PARTS`: token classes, fees, recorded costs and GPU time)."""
    cost_long, note = keep_top(cost_long, "model", "cost_usd", MAX_ROWS, what="models", by_what="spend",
                               fold=("cost_usd",), by=("part",))
    title = _titled(title, note)
    return _chart(cost_long).mark_bar().encode(
        y=alt.Y("model:N", title="Model", sort="-x", axis=name_axis()),
        x=alt.X("sum(cost_usd):Q", title="Spend (USD)",
                axis=alt.Axis(format=usd_axis_format(cost_long.groupby("model")["cost_usd"].sum()
                                                     if len(cost_long) else []))),
        color=alt.Color("part:N", title="Cost from", legend=alt.Legend(orient="bottom", columns=1, labelLimit=300),
                        scale=_labelled_scale(parts)),
        tooltip=[alt.Tooltip("model:N", title="Model"), alt.Tooltip("part:N", title="Cost from"),
                 alt.Tooltip("sum(cost_usd):Q", title="Spend (USD)", format="$,.2f")],
    ).properties(autosize=FIT_X, title=_titled(title), height=max(140, 36 * cost_long["model"].nunique()))


def cost_per_request(hist: pd.DataFrame, title: str = "Cost of one request, by model") -> alt.Chart:
    """One line per model over log-spaced cost bins: the share of the model's paid requests in each bin."""
    hist, note = keep_top(hist, "model", "requests", MAX_SERIES, what="models", by_what="request count")
    title = _titled(title, note)
    data = hist.assign(mid_usd=(hist["bin_lo_usd"] * hist["bin_hi_usd"]) ** 0.5, share_pct=hist["share"] * 100)
    lo = math.floor(math.log10(data["bin_lo_usd"].min())) if len(data) else -6
    hi = math.ceil(math.log10(data["bin_hi_usd"].max())) if len(data) else 0
    decades = [10.0 ** k for k in range(lo, hi + 1)]
    return _chart(data).mark_line(point=True, interpolate="monotone").encode(
        x=alt.X("mid_usd:Q", title="Cost of one request (USD, log scale)",
                scale=alt.Scale(type="log", domain=[decades[0], decades[-1]]),
                axis=alt.Axis(values=decades, format="$,~r", grid=True)),
        y=alt.Y("share_pct:Q", title="Share of the model's paid requests (%)"),
        color=alt.Color("model:N", title="Model", scale=_series_scale(list(data["model"])),
                        legend=name_legend()),
        tooltip=[alt.Tooltip("model:N", title="Model"),
                 alt.Tooltip("bin_lo_usd:Q", title="From (USD)", format="$,.6f"),
                 alt.Tooltip("bin_hi_usd:Q", title="To (USD)", format="$,.6f"),
                 alt.Tooltip("requests:Q", title="Requests", format=","),
                 alt.Tooltip("share_pct:Q", title="Share (%)", format=".1f")],
    ).properties(autosize=FIT_X, title=_titled(title), height=320)


def gpu_cost(series: pd.DataFrame, grain: str, model: str) -> alt.Chart:
    """Stacked areas for one self-hosted model: allocated (busy) vs idle GPU cost per bucket (stacked bars, each its
    bucket, where :func:`spend_over_time_mark` says so)."""
    _, per = GRAIN_TITLES.get(grain, GRAIN_TITLES["hour"])
    data = series[series["model"] == model].melt(
        id_vars=["period", "model", "utilization"], value_vars=["allocated_usd", "idle_usd"], var_name="part",
        value_name="cost_usd")
    data["part"] = data["part"].map({"allocated_usd": "allocated to requests", "idle_usd": "idle"})
    data["utilization_pct"] = data["utilization"] * 100
    data, note = thin_points(data, "period", sums=("cost_usd",), by=("part", "model"), unit=f"{grain}s")
    # an hour whose requests carry no timing has no utilisation: said in words, not drawn as "null"
    data["utilization_text"] = [f"{v:.1f} %" if v == v else "unknown (no service time)" for v in data["utilization_pct"]]
    banded = spend_over_time_mark(data, grain) == "bars"
    chart = _chart(data).mark_bar() if banded else _chart(data).mark_area()
    return chart.encode(
        x=_x_time(grain, banded=banded, periods=data["period"]),
        y=alt.Y("cost_usd:Q", stack=True, title=f"GPU cost (USD {per})",
                axis=alt.Axis(format=usd_axis_format(data.groupby("period")["cost_usd"].sum()))),
        color=alt.Color("part:N", title="GPU time", legend=alt.Legend(orient="bottom"),
                        scale=alt.Scale(domain=["allocated to requests", "idle"], range=[PALETTE[2], IDLE_COLOR])),
        order=alt.Order("part:N"),
        tooltip=[_time_tip("period", "From (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("part:N", title="GPU time"),
                 alt.Tooltip("cost_usd:Q", title="Cost (USD)", format="$,.2f"),
                 alt.Tooltip("utilization_text:N", title="Utilisation")],
    ).properties(autosize=FIT_X, title=_titled(f"{model}: allocated vs idle GPU cost", note), height=220)


def utilization(series: pd.DataFrame, grain: str, title: str = "GPU utilisation of the self-hosted fleet") -> alt.Chart:
    """One line per self-hosted model: busy share of paid GPU capacity, in %."""
    data = series.assign(utilization_pct=series["utilization"] * 100)
    data, top_note = keep_top(data, "model", "fleet_cost_usd", MAX_SERIES, what="self-hosted models",
                              by_what="fleet cost")
    data, thin_note = thin_points(data, "period", unit=f"{grain}s")
    title = _titled(title, top_note, thin_note)
    # an hour whose utilisation is unknown is no point of the line (Vega leaves nulls out)
    return _chart(data).mark_line(point=_lone_points(data.dropna(subset=["utilization_pct"]), ["model"],
                                                     "period")).encode(
        x=_x_time(grain),
        # a fleet idle in every hour drawn is 0 % throughout: a domain of [0, 0] labelled its axis "0.000000"
        y=alt.Y("utilization_pct:Q", title="Busy share of GPU capacity (%)",
                scale=alt.Scale(domainMin=0) if (data["utilization_pct"] > 0).any() else alt.Scale(domain=[0, 100])),
        color=alt.Color("model:N", title="Model", scale=_series_scale(list(data["model"])),
                        legend=name_legend()),
        tooltip=[_time_tip("period", "From (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("model:N", title="Model"),
                 alt.Tooltip("utilization_pct:Q", title="Utilisation (%)", format=".2f"),
                 alt.Tooltip("fleet_cost_usd:Q", title="Fleet cost (USD)", format="$,.2f"),
                 alt.Tooltip("idle_usd:Q", title="Idle (USD)", format="$,.2f")],
    ).properties(autosize=FIT_X, title=_titled(title), height=240)


def budget_burn(daily: pd.DataFrame, title: str) -> alt.Chart:
    """Cumulative spend of one tenant through a month: actual (line), forecast (dashed line + band),
    budget (red rule). ``daily`` has day, kind ('actual'/'forecast'), cumulative_usd, low_usd, high_usd,
    budget_usd."""
    x = alt.X("day:T", title="Day (UTC)", axis=alt.Axis(format="%b %d", labelAngle=0), scale=alt.Scale(type="utc"))
    tip = [_time_tip("day", "Day", "%Y-%m-%d"), alt.Tooltip("kind:N", title=""),
           alt.Tooltip("cumulative_usd:Q", title="Spend to date (USD)", format="$,.2f"),
           _text_tip("low_usd", "Forecast low (USD)"), _text_tip("high_usd", "Forecast high (USD)")]
    y_title = "Cumulative spend this month (USD)"
    base = _chart(_with_tip_texts(daily, {"low_usd": usd, "high_usd": usd}))
    band = base.transform_filter("datum.kind == 'forecast'").mark_area(opacity=0.2, color=PALETTE[1]).encode(
        x=x, y=alt.Y("low_usd:Q", title=y_title), y2="high_usd:Q", tooltip=tip)
    line = base.mark_line(point=True).encode(
        x=x, y=alt.Y("cumulative_usd:Q", title=y_title,
                     axis=alt.Axis(format=usd_axis_format([*daily["cumulative_usd"], *daily.get("high_usd", [])]))),
        color=alt.Color("kind:N", title="", scale=alt.Scale(domain=["actual", "forecast"],
                                                           range=[PALETTE[0], PALETTE[1]]),
                        legend=alt.Legend(orient="bottom")),
        strokeDash=alt.StrokeDash("kind:N", scale=alt.Scale(domain=["actual", "forecast"], range=[[1, 0], [5, 4]]),
                                  legend=None),
        tooltip=tip)
    layers = [band, line]
    budget = daily["budget_usd"].dropna()
    if len(budget):
        rule = _chart(pd.DataFrame({"budget_usd": [float(budget.iloc[0])]})).mark_rule(
            color="#d62728", strokeWidth=2).encode(
            y="budget_usd:Q", tooltip=[alt.Tooltip("budget_usd:Q", title="Budget (USD)", format="$,.2f")])
        layers.append(rule)
    return alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=260)


def budget_status(status: pd.DataFrame, title: str = "Forecast month-end spend against budget") -> alt.Chart:
    """Per tenant: spent so far (bar), forecast interval (error bar + point) and budget (tick)."""
    data, note = keep_top(status, "tenant", "forecast_usd", MAX_ROWS, what="tenants", by_what="forecast spend")
    data = _with_tip_texts(data, {"forecast_low_usd": usd, "forecast_high_usd": usd, "budget_usd": usd})
    title = _titled(title, note)
    y = alt.Y("tenant:N", title="Tenant", sort=alt.EncodingSortField("forecast_usd", order="descending"), axis=name_axis())
    tip = [alt.Tooltip("tenant:N", title="Tenant"),
           alt.Tooltip("spent_usd:Q", title="Spent so far (USD)", format="$,.2f"),
           alt.Tooltip("forecast_usd:Q", title="Forecast month end (USD)", format="$,.2f"),
           _text_tip("forecast_low_usd", "Forecast low (USD)"), _text_tip("forecast_high_usd", "Forecast high (USD)"),
           _text_tip("budget_usd", "Budget (USD)"),
           alt.Tooltip("status:N", title="Status")]
    x_title = "USD this month"
    spent = _chart(data).mark_bar(color=PALETTE[0], opacity=0.6).encode(
        y=y, x=alt.X("spent_usd:Q", title=x_title, axis=alt.Axis(format=usd_axis_format(
            data[["spent_usd", "forecast_usd", "forecast_high_usd", "budget_usd"]].to_numpy().ravel()))), tooltip=tip)
    interval = _chart(data).mark_rule(color=PALETTE[1], strokeWidth=2).encode(
        y=y, x=alt.X("forecast_low_usd:Q", title=x_title), x2="forecast_high_usd:Q", tooltip=tip)
    point = _chart(data).mark_point(filled=True, size=80).encode(
        y=y, x=alt.X("forecast_usd:Q", title=x_title),
        color=alt.Color("status:N", title="Status",
                        scale=alt.Scale(domain=["over budget", "forecast over budget", "at risk", "on track",
                                                "no budget"],
                                        range=["#7b1113", "#d62728", "#ff7f0e", "#2ca02c", "#7f7f7f"]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=tip)
    tick = _chart(data.dropna(subset=["budget_usd"])).mark_tick(color="#d62728", thickness=3, size=22).encode(
        y=y, x=alt.X("budget_usd:Q", title=x_title), tooltip=tip)
    return alt.layer(spent, interval, point, tick).properties(autosize=FIT_X, title=_titled(title), height=max(160, 34 * len(data)))


# ---------------------------------------------------------------- routing and latency

PERCENTILE_COLORS = {"P50": "#54a24b", "P95": "#f58518", "P99": "#d62728"}
#: each segment's colour, by its label (finops.store.SEGMENT_LABELS), in the order they stack
SEGMENT_COLORS = {"route": "#b279a2", "queue": "#e45756", "prefill": "#4c78a8", "decode": "#72b7b2",
                  "to first token": "#f58518", "after first token": "#54a24b", "service": "#4c78a8",
                  "other": "#b9bec7"}
SHARE_TITLES = {"request_share": ("requests", "requests"), "token_share": ("tokens", "tokens"),
                "spend_share": ("spend", "cost_usd")}
TIME_FORMAT = {"5min": "%H:%M", "15min": "%b %d %H:%M", "hour": "%b %d %H:%M", "day": "%b %d", "week": "%b %d"}


#: the pandas frequency of each chart grain (the periods date_trunc starts: weeks on Mondays, months on the 1st)
GRAIN_FREQ = {"5min": "5min", "15min": "15min", "hour": "h", "day": "D", "week": "W-MON", "month": "MS"}


def _periods_as_steps(mix: pd.DataFrame, grain: str) -> pd.DataFrame:
    """``mix`` (rows of period, series, ...) for an area drawn as steps, each period flat from its start to the
    next period's: a row of zeros for each series in each period between the first and the last that has no
    rows (no traffic then; an area over the periods alone joins the periods on either side of a gap), and the
    last period's rows again at its end, so that it has a width.

    >>> m = pd.DataFrame({"period": pd.to_datetime(["2026-01-01 00:00", "2026-01-01 03:00"]), "series": ["a", "a"],
    ...                   "requests": [2, 1], "request_share": [1.0, 1.0]})
    >>> _periods_as_steps(m, "hour")["requests"].tolist()
    [2, 0, 0, 1, 1]
    """
    freq = GRAIN_FREQ.get(grain)
    if freq is None or mix.empty or mix["period"].isna().all():
        return mix
    first, last = mix["period"].min(), mix["period"].max()
    periods = pd.date_range(first, last, freq=freq)
    if len(periods) > 20 * MAX_POINTS or not len(periods):
        return mix
    quiet = periods.difference(pd.DatetimeIndex(mix["period"].unique()))
    series = mix["series"].unique()
    pad = pd.DataFrame({"period": np.repeat(quiet.values, len(series)), "series": np.tile(series, len(quiet))})
    for c in mix.columns:
        if c not in pad:
            pad[c] = 0 if pd.api.types.is_numeric_dtype(mix[c]) else None
    pad = pad.astype({c: mix[c].dtype for c in mix.columns if pd.api.types.is_numeric_dtype(mix[c])})
    end = mix[mix["period"] == last].assign(period=last + pd.tseries.frequencies.to_offset(freq))
    return pd.concat([mix, pad[list(mix.columns)], end], ignore_index=True).sort_values(
        ["period", "series"], ignore_index=True)


def share_over_time(mix: pd.DataFrame, grain: str, measure: str = "spend_share", series_title: str = "Route",
                    title: str = "Share of spend by route") -> alt.Chart:
    """100 % stacked areas: each ``series``' share of ``measure`` per ``period``."""
    what, absolute = SHARE_TITLES[measure]
    sums = tuple(c for c in (measure, absolute) if c in mix)
    mix, top_note = keep_top(mix, "series", absolute, MAX_SERIES, what=series_title.lower() + "s", by_what=what,
                             fold=sums, by=("period",))
    mix = _periods_as_steps(mix, grain)
    mix, thin_note = thin_points(mix, "period", unit=f"{grain}s")
    title = _titled(title, top_note, thin_note)
    data = mix.assign(share_pct=mix[measure].fillna(0.0) * 100)
    return _chart(data).mark_area(interpolate="step-after").encode(
        x=alt.X("period:T", title=GRAIN_TITLES.get(grain, GRAIN_TITLES["day"])[0],
                axis=alt.Axis(format=_time_format(grain, data["period"]), labelAngle=0), scale=alt.Scale(type="utc")),
        # stacked shares of each period (100 %, or 0 where the period had none of the measure), not normalised
        # by the chart: a period with no traffic is drawn at 0, not bridged by its neighbours' areas
        y=alt.Y("sum(share_pct):Q", stack="zero", title=f"Share of {what} (%)",
                scale=alt.Scale(domain=[0, 100]), axis=alt.Axis(values=[0, 25, 50, 75, 100])),
        color=alt.Color("series:N", title=series_title, scale=_series_scale(list(data["series"])),
                        legend=name_legend(5)),
        tooltip=[_time_tip("period", "From (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("series:N", title=series_title),
                 alt.Tooltip("share_pct:Q", title=f"Share of {what} (%)", format=".1f"),
                 alt.Tooltip(f"{absolute}:Q", title=what.capitalize() + (" (USD)" if absolute == "cost_usd" else ""),
                             format="$,.2f" if absolute == "cost_usd" else ",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=260)


def share_by_split(mix: pd.DataFrame, split: str, measure: str = "spend_share", series_title: str = "Route",
                   title: str = "Share of spend by route per tenant") -> alt.Chart:
    """100 % stacked horizontal bars: per tenant (or tier), each ``series``' share of ``measure``."""
    what, absolute = SHARE_TITLES[measure]
    split_title = {"tenant": "Tenant", "sla_tier": "SLA tier"}.get(split, split)
    sums = tuple(c for c in (measure, absolute) if c in mix)
    mix, split_note = keep_top(mix, split, absolute, MAX_ROWS, what=split_title.lower() + "s", by_what=what)
    mix, top_note = keep_top(mix, "series", absolute, MAX_SERIES, what=series_title.lower() + "s", by_what=what,
                             fold=sums, by=(split,))
    title = _titled(title, split_note, top_note)
    data = mix.assign(share_pct=mix[measure] * 100)
    split_title = {"tenant": "Tenant", "sla_tier": "SLA tier"}.get(split, split)
    return _chart(data).mark_bar().encode(
        y=alt.Y(f"{split}:N", title=split_title),
        x=alt.X("share_pct:Q", stack="normalize", title=f"Share of the {split_title.lower()}'s {what} (%)",
                axis=alt.Axis(format="%")),
        color=alt.Color("series:N", title=series_title, scale=_series_scale(list(data["series"])),
                        legend=name_legend(5)),
        tooltip=[alt.Tooltip(f"{split}:N", title=split_title), alt.Tooltip("series:N", title=series_title),
                 alt.Tooltip("share_pct:Q", title=f"Share of {what} (%)", format=".1f"),
                 alt.Tooltip(f"{absolute}:Q", title=what.capitalize() + (" (USD)" if absolute == "cost_usd" else ""),
                             format="$,.2f" if absolute == "cost_usd" else ",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=max(120, 28 * data[split].nunique()))


def cache_savings(frame: pd.DataFrame, title: str = "Semantic-cache hit rate by model") -> alt.Chart:
    """Bars of the hit rate per model, labelled with what the hits saved: dollars at price-book prices
    for an API model; for a self-hosted one (paid by the hour) GPU time, with what it would be worth
    at the fleet's effective $ per 1M tokens if the fleet shrank to match."""
    def label(r) -> str:
        if r["kind"] == "self_hosted":
            v = r["saved_if_fleet_scaled_usd"]
            return "GPU time only" + ("" if pd.isna(v) else f" (≈ {usd(v)} if the fleet shrank)")
        # usd: the hits' $0.00022 read "$0.00 saved"; a model with no price saved nothing we can price
        return "no price" if pd.isna(r["saved_usd"]) else f"{usd(r['saved_usd'])} saved"

    frame, note = keep_top(frame, "model", "requests", MAX_ROWS, what="models", by_what="request count")
    title = _titled(title, note)
    data = frame.assign(hit_pct=frame["hit_rate"] * 100, label=frame.apply(label, axis=1),
                        priced=frame["kind"].map({"self_hosted": "self-hosted (paid by the hour)",
                                                  "api": "API (price book)"}).fillna("not in the price book"))
    tip = [alt.Tooltip("model:N", title="Model"), alt.Tooltip("cache_hits:Q", title="Cache hits", format=","),
           alt.Tooltip("requests:Q", title="Requests", format=","),
           alt.Tooltip("hit_pct:Q", title="Hit rate (%)", format=".1f"), alt.Tooltip("label:N", title="Saved")]
    base = _chart(data).encode(y=alt.Y("model:N", title="Model", axis=name_axis()),
                                  x=alt.X("hit_pct:Q", title="Requests served from the cache (%)",
                                          scale=alt.Scale(domain=[0, max(float(data["hit_pct"].max()) * 1.8, 1.0)])),
                                  tooltip=tip)
    bars = base.mark_bar().encode(color=alt.Color(
        # Vega cuts a legend label at 160 px by default: "self-hosted (paid by the hour)" read "self-hosted (paid by the …"
        "priced:N", title="Model", legend=alt.Legend(orient="bottom", labelLimit=300),
        scale=alt.Scale(domain=["API (price book)", "self-hosted (paid by the hour)", "not in the price book"],
                        range=[PALETTE[2], PALETTE[0], IDLE_COLOR])))
    text = base.mark_text(align="left", dx=4, fontSize=11).encode(text="label:N")
    return (bars + text).properties(autosize=FIT_X, title=_titled(title), height=max(120, 36 * len(data)))


def escalation_over_time(over: pd.DataFrame, grain: str, title: str = "Cascade escalation rate") -> alt.Chart:
    """Line of the escalation rate (%) per period."""
    data = over.dropna(subset=["escalation_rate"]).assign(rate_pct=lambda d: d["escalation_rate"] * 100)
    data, note = thin_points(data, "period", unit=f"{grain}s")
    title = _titled(title, note)
    return _chart(data).mark_line(point=True).encode(
        x=alt.X("period:T", title=GRAIN_TITLES.get(grain, GRAIN_TITLES["day"])[0],
                axis=alt.Axis(format=_time_format(grain, data["period"]), labelAngle=0), scale=alt.Scale(type="utc")),
        y=alt.Y("rate_pct:Q", title="Escalation rate (%)", scale=alt.Scale(domainMin=0)),
        tooltip=[_time_tip("period", "From (UTC)", "%Y-%m-%d"),
                 alt.Tooltip("rate_pct:Q", title="Escalation rate (%)", format=".1f"),
                 alt.Tooltip("escalations:Q", title="Escalations", format=","),
                 alt.Tooltip("cascade_requests:Q", title="Cascade rows", format=",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=220)


def prompt_lengths(by_length: pd.DataFrame, threshold: float, unit: str,
                   title: str = "Prompt length by model") -> alt.Chart:
    """Requests per power-of-two prompt-length bucket, one line per model (dashed: small models),
    and the threshold as a red rule: solid lines left of it are short prompts on a large model;
    dashed lines right of it are long prompts on a small one."""
    by_length, note = keep_top(by_length, "model", "requests", MAX_SERIES, what="models", by_what="request count")
    title = _titled(title, note)
    data = by_length.assign(lo=by_length["bucket_lo"].clip(lower=1),
                            hi=lambda d: (d["bucket_lo"] * 2).where(d["bucket_lo"] > 0, 8),
                            series=by_length["model"] + " (" + by_length["size_class"].astype(str) + ")")
    x_scale = alt.Scale(type="log", domain=[1, float(max(data["hi"].max() if len(data) else 2, threshold * 2, 2))])
    data["mid"] = (data["lo"] * data["hi"]) ** 0.5
    x = alt.X("mid:Q", title=f"Prompt length ({unit}, power-of-two buckets, log scale)", scale=x_scale,
              axis=alt.Axis(format=",.0f"))
    y = alt.Y("requests:Q", title="Requests per bucket")
    # three columns: four and the size class's legend beside them ran past a full-width chart
    color = alt.Color("series:N", title="Model (size class)", scale=_series_scale(list(data["series"])),
                      legend=name_legend(3, qualified=True))
    tooltip = [alt.Tooltip("model:N", title="Model"), alt.Tooltip("size_class:N", title="Size"),
               alt.Tooltip("bucket_lo:Q", title=f"From ({unit})", format=","),
               alt.Tooltip("hi:Q", title=f"Below ({unit})", format=","),
               alt.Tooltip("requests:Q", title="Requests", format=",")]
    # the lines carry the size class's dash and its legend, drawn as a dash (on a line with points the legend
    # draws a dot, both classes alike); the points are a layer of their own
    lines = _chart(data).mark_line().encode(
        x=x, y=y, color=color, tooltip=tooltip,
        strokeDash=alt.StrokeDash("size_class:N", title="Size class",
                                  legend=alt.Legend(orient="bottom", symbolType="stroke", symbolStrokeWidth=2,
                                                    symbolSize=300, symbolStrokeColor="#666"),
                                  scale=alt.Scale(domain=["large", "small"], range=[[1, 0], [5, 3]])))
    points = _chart(data).mark_point(filled=True, size=25).encode(x=x, y=y, color=color, tooltip=tooltip)
    rule = _chart(pd.DataFrame({"t": [max(threshold, 1)], "label": [f"threshold {threshold:,.0f} {unit}"]})
                     ).mark_rule(color="#d62728", strokeWidth=2).encode(
        x=alt.X("t:Q", scale=x_scale), tooltip=[alt.Tooltip("label:N", title="")])
    return alt.layer(lines, points, rule).properties(autosize=FIT_X, title=_titled(title), height=260)


def whatif_by_model(by_model: pd.DataFrame, title: str = "Spend by model: actual vs what-if") -> alt.Chart:
    """Grouped bars per model: actual (repriced) and counterfactual spend (the :data:`MAX_ROWS` costliest)."""
    by_model, note = keep_top(by_model, "model", "actual_usd", MAX_ROWS, what="models", by_what="actual spend",
                              fold=("actual_usd", "counterfactual_usd", "actual_calls", "counterfactual_calls"))
    title = _titled(title, note)
    data = by_model.melt(id_vars=["model", "actual_calls", "counterfactual_calls"],
                         value_vars=["actual_usd", "counterfactual_usd"], var_name="scenario", value_name="usd")
    data["scenario"] = data["scenario"].map({"actual_usd": "actual routing", "counterfactual_usd": "what-if"})
    data["calls"] = data["actual_calls"].where(data["scenario"] == "actual routing", data["counterfactual_calls"])
    return _chart(data).mark_bar().encode(
        y=alt.Y("model:N", title="Model", axis=name_axis()), yOffset=alt.YOffset("scenario:N", sort=["actual routing", "what-if"]),
        x=alt.X("usd:Q", title="Spend (USD)", axis=alt.Axis(format=usd_axis_format(data["usd"]))),
        color=alt.Color("scenario:N", title="", scale=alt.Scale(domain=["actual routing", "what-if"],
                                                               range=["#9ecae9", PALETTE[1]]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("model:N", title="Model"), alt.Tooltip("scenario:N", title=""),
                 alt.Tooltip("usd:Q", title="Spend (USD)", format="$,.2f"),
                 alt.Tooltip("calls:Q", title="Model calls", format=",.0f")],
    ).properties(autosize=FIT_X, title=_titled(title), height=max(140, 48 * data["model"].nunique()))


def marks_off_log_axis(hist: pd.DataFrame, marks: dict[str, float], scale: str) -> list[str]:
    """The percentiles of ``marks`` :func:`queue_histogram` draws no rule for: on a log scale, those left of its
    first drawn bin (a wait of 0, or between 0 and the lowest wait above it), more than 5 % below its edge.

    >>> h = pd.DataFrame({"lo": [0.0, 2700.0], "hi": [2700.0, 5410.0], "count": [4, 4]})
    >>> marks_off_log_axis(h, {"P50": 1350.0, "P95": 5410.0, "P99": 2650.0}, "log"), marks_off_log_axis(h, {"P50": 0.0}, "linear")
    (['P50'], [])
    """
    if scale != "log":
        return []
    drawn = hist["lo"][hist["lo"] > 0]
    lowest = float(drawn.min()) if len(drawn) else 0.0
    return [k for k, v in marks.items() if v is not None and not pd.isna(v) and not v >= lowest / 1.05 > 0]


def queue_histogram(hist: pd.DataFrame, marks: dict[str, float], scale: str, field_label: str = "queue_ms",
                    title: str = "Queue time") -> alt.Chart:
    """Bars of one group's histogram (``lo``, ``hi``, ``count``) with P50/P95/P99 rules.

    On a log scale the first bin (``[0, lowest)``: requests that did not wait) cannot be drawn;
    the caller reports it in words.
    """
    data = hist.copy()
    if scale == "log":
        data = data[data["lo"] > 0]
    data["mid"] = (data["lo"] + data["hi"]) / 2
    x_scale = alt.Scale(type="log" if scale == "log" else "linear", nice=False,
                        domain=[float(data["lo"].min()), float(data["hi"].max())] if len(data) else alt.Undefined)
    x_title = f"{field_label} ({'ms, log scale' if scale == 'log' else 'ms'})"
    # under 1 ms in significant digits: two places wrote a tick of 0.003 ms as "0" on a log axis
    x = alt.X("lo:Q", title=x_title, scale=x_scale, axis=alt.Axis(
        labelExpr="datum.value >= 1 ? format(datum.value, ',.0f') : format(datum.value, '.2~r')"))
    bars = _chart(data).mark_rect(color=PALETTE[0], opacity=0.85).encode(
        # whole requests: no tick between 0 and 1 (a model with 7 queued requests read 0.2, 0.4, ... requests)
        x=x, x2="hi:Q", y=alt.Y("count:Q", title="Requests", axis=alt.Axis(tickMinStep=1, format=",d")), y2=alt.datum(0),
        tooltip=[alt.Tooltip("lo:Q", title="From (ms)", format=",.1f"), alt.Tooltip("hi:Q", title="To (ms)", format=",.1f"),
                 alt.Tooltip("count:Q", title="Requests", format=",")])
    # a percentile left of a log axis (P50 of 1.35 s where half the requests did not wait and the axis starts at
    # the lowest wait above 0, 2.7 s) is not drawn: a rule outside the domain squeezed the plot and cut its title
    # to two letters. The caption gives every percentile. One at the edge (a sketch's, within 2 %) is drawn, clipped.
    off = set(marks_off_log_axis(hist, marks, scale))
    m = pd.DataFrame([{"percentile": k, "ms": v} for k, v in marks.items()
                      if v is not None and not pd.isna(v) and k not in off])
    if m.empty:
        return bars.properties(autosize=FIT_X, title=_titled(title), height=200)
    m["label"] = m["percentile"] + " " + m["ms"].map(lambda v: duration_ms(v, fine=True))
    color = alt.Color("percentile:N", title="Percentile", scale=alt.Scale(domain=list(PERCENTILE_COLORS),
                                                                          range=list(PERCENTILE_COLORS.values())),
                      legend=alt.Legend(orient="bottom"))
    rules = _chart(m).mark_rule(strokeWidth=2, strokeDash=[5, 3], clip=True).encode(
        x=alt.X("ms:Q", scale=x_scale, title=x_title), color=color, tooltip=[alt.Tooltip("label:N", title="")])
    return alt.layer(bars, rules).properties(autosize=FIT_X, title=_titled(title), height=200)


def segment_bars(seg: pd.DataFrame, title: str = "Where the time goes at P50, P95 and P99") -> alt.Chart:
    """Stacked horizontal bars: per model and percentile band, the mean ms of each segment."""
    order = list(SEGMENT_COLORS)
    seg = seg[seg["ms"] > 0.5]        # drop empty segments and float noise ("other" of -1e-11 ms)
    seg = seg.assign(segment=seg["segment"].map(lambda s: SEGMENT_LABELS.get(s, s)))
    # ranked by each model's requests with a total latency (those its percentiles are of), counted once: summed over
    # its rows, the requests in its bands ranked a model of 1 request with 9 rows (3 bands x 3 segments) above one of
    # 8 requests with 6
    models, note = keep_top(seg.drop_duplicates("grp")[["grp", "requests"]], "grp", "requests", MAX_ROWS // 3,
                            what="models", by_what="count of requests that log a total latency")
    if note:
        rank = {grp: i for i, grp in enumerate(models["grp"])}
        seg = seg[seg["grp"].isin(rank)].sort_values("grp", key=lambda g: g.map(rank), kind="stable")
    title = _titled(title, note)
    # the percentile first and a wide label: a long model name cut short must not hide which band a bar is
    data = seg.assign(row=seg["percentile"] + " · " + seg["grp"],
                      share_pct=seg["ms"] / seg["total_ms"].where(seg["total_ms"] > 0) * 100,
                      order=seg["segment"].map({s: i for i, s in enumerate(order)}))
    present = [s for s in order if s in set(data["segment"])]
    div, unit = _time_unit(data["total_ms"])
    data = data.assign(t=data["ms"] / div)
    # the axis to the longest stacked bar, rounded up to a tick: 'domainMin' alone turned Vega's rounding off and the
    # axis ended at the longest bar, its last tick before it (a bar of 6.12 s past the axis's "6")
    top = float(data.groupby("row")["t"].sum().max()) if len(data) else 0.0
    return _chart(data).mark_bar().encode(
        y=alt.Y("row:N", title="Percentile of total latency · model", sort=list(dict.fromkeys(data["row"])),
                axis=name_axis(46)),
        x=alt.X("t:Q", title=f"Mean time in the band ({unit})", stack="zero", axis=alt.Axis(format=",.3~r"),
                scale=alt.Scale(domain=[0, top], nice=True) if top > 0 else alt.Scale(domainMin=0)),
        color=alt.Color("segment:N", title="Segment", sort=present,
                        scale=alt.Scale(domain=present, range=[SEGMENT_COLORS[s] for s in present]),
                        legend=alt.Legend(orient="bottom")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("grp:N", title="Model"), alt.Tooltip("percentile:N", title="Band around"),
                 alt.Tooltip("segment:N", title="Segment"), alt.Tooltip("ms:Q", title="Mean (ms)", format=",.1f"),
                 alt.Tooltip("share_pct:Q", title="Share of total (%)", format=".1f"),
                 alt.Tooltip("total_ms:Q", title="Mean total latency of the band (ms)", format=",.1f"),
                 alt.Tooltip("requests_in_band:Q", title="Requests in the band", format=","),
                 alt.Tooltip("requests:Q", title="Requests with a total latency", format=",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=max(140, 22 * data["row"].nunique()))


def percentiles_over_time(over: pd.DataFrame, grain: str, field_label: str = "total_ms",
                          title: str = "Latency percentiles over time") -> alt.Chart:
    """Lines per model (colour) and percentile (dash), log-scaled ms (the :data:`MAX_SERIES` busiest models,
    at most :data:`MAX_POINTS` points)."""
    over, top_note = keep_top(over, "grp", "requests", MAX_SERIES, what="models", by_what="request count")
    over, thin_note = thin_points(over, "ts", max_points=MAX_POINTS // 3, unit=f"{grain} buckets")
    title = _titled(title, top_note, thin_note)
    long = over.melt(id_vars=["ts", "grp", "requests"], value_vars=["p50", "p95", "p99"], var_name="percentile",
                     value_name="ms")
    long["percentile"] = long["percentile"].str.upper()
    long = long[long["ms"] > 0]
    return _chart(long).mark_line(strokeWidth=1.5, point=_lone_points(long, ["grp", "percentile"], "ts")).encode(
        x=alt.X("ts:T", title="Time (UTC)", axis=alt.Axis(format=_time_format(grain, long["ts"], TIME_FORMAT),
                                                       labelAngle=0),
                scale=alt.Scale(type="utc")),
        y=alt.Y("ms:Q", title=f"{field_label} (ms, log scale)", scale=_log_scale(long["ms"])),
        color=alt.Color("grp:N", title="Model", scale=_series_scale(list(long["grp"])),
                        legend=name_legend()),
        strokeDash=alt.StrokeDash("percentile:N", title="Percentile", sort=["P99", "P95", "P50"],
                                  scale=alt.Scale(domain=["P99", "P95", "P50"], range=[[1, 0], [6, 3], [2, 2]])),
        tooltip=[_time_tip("ts", "From (UTC)", "%Y-%m-%d %H:%M"), alt.Tooltip("grp:N", title="Model"),
                 alt.Tooltip("percentile:N", title="Percentile"), alt.Tooltip("ms:Q", title="ms", format=",.0f"),
                 alt.Tooltip("requests:Q", title="Requests", format=",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=300)


def _time_unit(ms) -> tuple[float, str]:
    """(divisor, unit) for an axis of durations: seconds when the largest reaches 1,000 ms, else ms."""
    top = pd.to_numeric(pd.Series(ms), errors="coerce").max()
    return (1000.0, "s") if pd.notna(top) and top >= 1000 else (1.0, "ms")


PERCENTILE_STYLE = (("P99", "#e45756", [1, 0]), ("P95", "#f58518", [6, 3]), ("P50", "#4c78a8", [2, 2]))


def percentile_panel(over: pd.DataFrame, grain: str, what: str, title: str, height: int = 220) -> alt.Chart:
    """One model's P50, P95 and P99 of a latency over time (``over``: ts, requests, p50, p95, p99 in ms): three
    lines told apart by colour and dash alike, the legend drawing each line's style; seconds when its P99
    reaches 1,000 ms, else ms; log scale, so a spike stands out against the median."""
    long = over.melt(id_vars=["ts", "requests"], value_vars=["p50", "p95", "p99"], var_name="percentile",
                     value_name="ms")
    long["percentile"] = long["percentile"].str.upper()
    long = long[long["ms"] > 0]
    seconds = bool(len(long)) and float(long["ms"].max()) >= 1000
    long["value"] = long["ms"] / 1000.0 if seconds else long["ms"]
    unit = "s" if seconds else "ms"
    domain = [p for p, _, _ in PERCENTILE_STYLE]
    style = alt.Legend(orient="top", title=None, symbolType="stroke", symbolStrokeWidth=2.5, symbolSize=300)
    return _chart(long).mark_line(strokeWidth=1.6, point=_lone_points(long, ["percentile"], "ts")).encode(
        x=alt.X("ts:T", title="Time (UTC)", scale=alt.Scale(type="utc"),
                axis=alt.Axis(format=_time_format(grain, long["ts"], TIME_FORMAT), labelAngle=0)),
        y=alt.Y("value:Q", title=f"{what} ({unit}, log scale)", scale=_log_scale(long["value"]),
                axis=alt.Axis(format=",.3~r")),
        color=alt.Color("percentile:N", sort=domain, legend=style,
                        scale=alt.Scale(domain=domain, range=[c for _, c, _ in PERCENTILE_STYLE])),
        strokeDash=alt.StrokeDash("percentile:N", sort=domain, legend=style,
                                  scale=alt.Scale(domain=domain, range=[d for _, _, d in PERCENTILE_STYLE])),
        tooltip=[_time_tip("ts", "From (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("percentile:N", title="Percentile"),
                 alt.Tooltip("value:Q", title=f"{what} ({unit})", format=",.3~f"),
                 alt.Tooltip("requests:Q", title="Requests", format=",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=height)


def _not_drawn_on_log(zero: pd.DataFrame, unit: str, most: int = 3) -> str | None:
    """The note for the percentiles of 0 ms (``zero``: grp, bucket, percentile) a log axis cannot draw, naming the
    first ``most`` models and buckets.

    >>> _not_drawn_on_log(pd.DataFrame({"grp": ["gpt-4o"] * 2, "bucket": ["0–31"] * 2, "percentile": ["P50", "P95"]}),
    ...                   "prompt tokens")
    "not drawn on the log axis (0 ms): gpt-4o's P50 and P95 at 0–31 prompt tokens"
    """
    if zero.empty:
        return None
    where = [f"{grp}'s {' and '.join(g['percentile'])} at {bucket} {unit}"
             for (grp, bucket), g in zero.groupby(["grp", "bucket"], sort=False)]
    more = f" and {len(where) - most:,} more" if len(where) > most else ""
    # the model's name not first: the subtitle's first letter is capitalised
    return f"not drawn on the log axis (0 ms): {', '.join(where[:most])}{more}"


def latency_by_bucket(buckets: pd.DataFrame, unit: str, title: str, legend_columns: int = 4) -> alt.Chart:
    """P50 (solid) and P95 (dashed) total_ms per power-of-two length bucket, per model (the busiest);
    ``legend_columns`` models side by side under it (2 in a half-width column, :func:`name_legend`)."""
    buckets, note = keep_top(buckets, "grp", "requests", MAX_SERIES, what="models", by_what="request count")
    long = buckets.melt(id_vars=["grp", "bucket_lo", "bucket_hi", "bucket", "requests"],
                        value_vars=["total_ms_p50", "total_ms_p95"], var_name="percentile", value_name="ms")
    long["percentile"] = long["percentile"].map({"total_ms_p50": "P50", "total_ms_p95": "P95"})
    # a log axis has no 0: Vega drew a P50 of 0 ms (requests refused at once, LiteLLM's 429s) at the top of the axis.
    # Left out, and said which
    zero = long[long["ms"] <= 0]
    long = long[~(long["ms"] <= 0)].copy()
    title = _titled(title, note, _not_drawn_on_log(zero, unit))
    long["mid"] = (long["bucket_lo"].clip(lower=1) * long["bucket_hi"]) ** 0.5
    div, t_unit = _time_unit(long["ms"])
    long["t"] = long["ms"] / div
    return _chart(long).mark_line(strokeWidth=1.8, point=_lone_points(long.dropna(subset=["t"]), ["grp", "percentile"], "mid")).encode(
        x=alt.X("mid:Q", title=f"{unit} (bucket, log scale)", scale=alt.Scale(type="log"), axis=alt.Axis(format=",.0f")),
        y=alt.Y("t:Q", title=f"total latency ({t_unit}, log scale)", scale=_log_scale(long["t"]),
                axis=alt.Axis(format=",.3~r")),
        color=alt.Color("grp:N", title="Model", scale=_series_scale(list(long["grp"])),
                        legend=name_legend(legend_columns)),
        strokeDash=alt.StrokeDash("percentile:N", title="Percentile",
                                  scale=alt.Scale(domain=["P50", "P95"], range=[[1, 0], [6, 3]]),
                                  legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=2, symbolSize=300,
                                                    symbolStrokeColor="#666")),
        tooltip=[alt.Tooltip("grp:N", title="Model"), alt.Tooltip("bucket:N", title=f"{unit}"),
                 alt.Tooltip("percentile:N", title="Percentile"),
                 alt.Tooltip("ms:Q", title="total latency (ms)", format=",.0f"),
                 alt.Tooltip("requests:Q", title="Requests", format=",")],
    ).properties(autosize=FIT_X, title=_titled(title), height=260)


#: the fewest requests a concurrency level of :func:`decode_rate` needs to be drawn (a percentile of one or two
#: requests is noise)
DECODE_LEVEL_MIN_REQUESTS = 5


def decode_rate(frame: pd.DataFrame, title: str = "Decode speed against requests in service") -> alt.Chart:
    """Median decode tokens/s per concurrency level (line) with the P10–P90 band, per model; levels with fewer
    than :data:`DECODE_LEVEL_MIN_REQUESTS` requests left out."""
    data, note = keep_top(frame[frame["requests"] >= DECODE_LEVEL_MIN_REQUESTS], "grp", "requests", MAX_SERIES,
                          what="models", by_what="request count")
    data, thin_note = thin_points(data, "concurrency", unit="concurrency levels")
    title = _titled(title, note, thin_note)
    scale = _series_scale(list(data["grp"]))
    base = _chart(data).encode(
        x=alt.X("concurrency:Q", title="Requests of the model in service (mean over the minute it arrived)",
                axis=alt.Axis(tickMinStep=1, format="d")))
    tip = [alt.Tooltip("grp:N", title="Model"), alt.Tooltip("concurrency:Q", title="In service"),
           alt.Tooltip("tokens_per_s_p50:Q", title="Median tokens/s", format=",.1f"),
           alt.Tooltip("tokens_per_s_p10:Q", title="P10 tokens/s", format=",.1f"),
           alt.Tooltip("tokens_per_s_p90:Q", title="P90 tokens/s", format=",.1f"),
           alt.Tooltip("requests:Q", title="Requests", format=",")]
    # one colour encoding for both layers: a layer's legend=None hides the shared legend of the whole chart
    color = alt.Color("grp:N", title="Model (line: median; band: P10–P90)", scale=scale,
                      legend=name_legend(titleLimit=400, symbolOpacity=1))
    band = base.mark_area(opacity=0.15).encode(y=alt.Y("tokens_per_s_p10:Q", title="Decode tokens/s per request"),
                                               y2="tokens_per_s_p90:Q", color=color)
    line = base.mark_line(point=alt.OverlayMarkDef(size=20)).encode(y="tokens_per_s_p50:Q", tooltip=tip, color=color)
    return alt.layer(band, line).properties(autosize=FIT_X, title=_titled(title), height=280)


def slowest_traces(slow: pd.DataFrame, title: str = "The slowest requests, segment by segment") -> alt.Chart:
    """One stacked bar per request: route, queue, prefill and decode, or the time to its first token and after it
    (where only that is logged), or service, and the unlogged rest (:data:`finops.store.SEGMENT_EXPRS`)."""
    cols = {f"{name}_ms": SEGMENT_LABELS[name] for name, _ in SEGMENT_EXPRS}
    cols["other_ms"] = "other"
    data = slow.copy()
    for c in cols:
        if c not in data:
            data[c] = np.nan
    split = data["prefill_ms"].notna() | data["decode_ms"].notna() | data["first_token_ms"].notna()
    data["service_ms"] = data["service_ms"].where(~split)
    # the year where the requests fall in another year than this one, or in several (12-19 read as this December)
    when = "%Y-%m-%d %H:%M:%S" if _time_format("day", data["ts"]) != GRAIN_FORMAT["day"] else "%m-%d %H:%M:%S"
    data["label"] = [f"{i + 1}. {t:{when}} · {m}" for i, (t, m) in enumerate(zip(data["ts"], data["model"],
                                                                                 strict=True))]
    long = data.melt(id_vars=["label", "model", "total_ms", "request_id"], value_vars=list(cols),
                     var_name="segment", value_name="ms").dropna(subset=["ms"])
    long["segment"] = long["segment"].map(cols)
    long = long[long["ms"].abs() > 1e-9]
    order = list(SEGMENT_COLORS)
    present = [s for s in order if s in set(long["segment"])]
    long["order"] = long["segment"].map({s: i for i, s in enumerate(order)})
    div, unit = _time_unit(data["total_ms"])
    long["t"] = long["ms"] / div
    return _chart(long).mark_bar().encode(
        # no axis title: beside labels this long it was drawn over them; the subtitle says what a label is
        y=alt.Y("label:N", title=None, sort=list(data["label"]), axis=name_axis(50)),
        x=alt.X("t:Q", title=f"Time ({unit})", stack="zero", axis=alt.Axis(format=",.3~r")),
        color=alt.Color("segment:N", title="Segment", sort=present,
                        scale=alt.Scale(domain=present, range=[SEGMENT_COLORS[s] for s in present]),
                        legend=alt.Legend(orient="bottom")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("request_id:N", title="Request"), alt.Tooltip("model:N", title="Model"),
                 alt.Tooltip("segment:N", title="Segment"), alt.Tooltip("ms:Q", title="ms", format=",.1f"),
                 alt.Tooltip("total_ms:Q", title="Total latency (ms)", format=",.1f")],
    ).properties(autosize=FIT_X, title=_titled(title, "each bar is a request: its rank, arrival (UTC) and "
                                                                  "model"), height=max(140, 22 * len(data)))


# ---------------------------------------------------------------- cascade and edge

CASCADE_SERIES = ("every threshold", "Pareto frontier", "convex hull", "random routing", "small only",
                  "direct to large", "oracle cascade", "oracle router", "chosen threshold", "random at the floor")
CASCADE_COLORS = ("#b9bec7", PALETTE[0], PALETTE[1], "#7f7f7f", PALETTE[2], PALETTE[3], PALETTE[6], PALETTE[4],
                  "#d62728", "#d62728")
CASCADE_MAX_POINTS = 1500
PAYS_COLOR, LOSES_COLOR, FLOOR_COLOR = "#54a24b", "#e45756", "#d62728"
RTT_TITLE = "Network round trip edge ↔ cloud (ms)"


def _cascade_tooltip() -> list[alt.Tooltip]:
    return [alt.Tooltip("series:N", title="What"),
            alt.Tooltip("threshold:Q", title="Threshold τ", format=".4f"),
            alt.Tooltip("escalation_rate:Q", title="Escalated to the large model", format=".1%"),
            alt.Tooltip("avg_cost:Q", title="Average cost ($ per 1,000 requests)", format="$,.3f"),
            alt.Tooltip("avg_quality:Q", title="Quality (% correct)", format=".2%")]


def _policy_tooltip(what: str, share_title: str) -> list[alt.Tooltip]:
    """The tooltip of a policy's point (a baseline, the random share meeting the floor): its share of requests to
    the large model, cost and quality."""
    return [alt.Tooltip("series:N", title=what),
            alt.Tooltip("large_call_rate:Q", title=share_title, format=".1%"),
            alt.Tooltip("avg_cost:Q", title="Average cost ($ per 1,000 requests)", format="$,.3f"),
            alt.Tooltip("avg_quality:Q", title="Quality (% correct)", format=".2%")]


def cascade_frontier(curve: pd.DataFrame, frontier: pd.DataFrame, hull: pd.DataFrame, *,
                     chosen: dict | None = None, quality_floor: float | None = None,
                     baselines: pd.DataFrame | None = None, random_line: pd.DataFrame | None = None,
                     random_pick: dict | None = None,
                     title: str = "Cascade cost vs quality: every threshold, the Pareto frontier and its hull",
                     height: int = 380) -> alt.LayerChart:
    """Average cost ($ per 1,000 requests) against average quality (share correct) of a cascade.

    Every threshold is a faint point (thinned evenly to :data:`CASCADE_MAX_POINTS` when the curve
    is longer), the Pareto frontier a line, its convex hull a dashed line; ``chosen`` (a curve row
    as a dict) is a large red point, ``quality_floor`` a dashed horizontal rule, ``baselines``
    (name, large_call_rate, avg_cost, avg_quality) labelled diamonds and ``random_line`` a dotted line. An
    empty ``curve`` (an eval with no confidence) draws the baselines and the random line alone; ``random_pick``
    (large_call_rate, avg_cost, avg_quality: the random share of requests to the large model that meets the floor)
    is then a large red point on that line.
    """
    base = baselines.assign(series=baselines["name"]) if baselines is not None and len(baselines) else None
    present = {"every threshold", "Pareto frontier", "convex hull"} if len(curve) else set()
    present |= {"random routing"} if random_line is not None and len(random_line) else set()
    present |= set(base["series"]) if base is not None else set()
    present |= {"chosen threshold"} if chosen is not None else set()
    present |= {"random at the floor"} if random_pick is not None else set()
    domain = [s for s in CASCADE_SERIES if s in present]
    color = alt.Color("series:N", title=None,
                      scale=alt.Scale(domain=domain, range=[CASCADE_COLORS[CASCADE_SERIES.index(s)] for s in domain]),
                      legend=alt.Legend(orient="bottom", columns=5, symbolOpacity=1))
    x = alt.X("avg_cost:Q", title="Average cost ($ per 1,000 requests)", scale=alt.Scale(zero=False),
              axis=alt.Axis(format=usd_axis_format([*curve["avg_cost"], *(base["avg_cost"] if base is not None else [])])))
    y = alt.Y("avg_quality:Q", title="Quality (% correct)", scale=alt.Scale(zero=False), axis=alt.Axis(format=".0%"))
    step = max(1, math.ceil(len(curve) / CASCADE_MAX_POINTS))
    layers = [
        _chart(curve.iloc[::step].assign(series="every threshold")).mark_circle(size=28, opacity=0.35).encode(
            x=x, y=y, color=color, tooltip=_cascade_tooltip()),
        _chart(frontier.assign(series="Pareto frontier")).mark_line(point=alt.OverlayMarkDef(size=30)).encode(
            x=x, y=y, color=color, order="avg_cost:Q", tooltip=_cascade_tooltip()),
        _chart(hull.assign(series="convex hull")).mark_line(strokeDash=[6, 4], strokeWidth=2).encode(
            x=x, y=y, color=color, order="avg_cost:Q", tooltip=_cascade_tooltip()),
    ] if len(curve) else []          # no confidence to sweep: the baselines alone
    if "random routing" in present:
        layers.append(_chart(random_line.assign(series="random routing")).mark_line(strokeDash=[2, 3]).encode(
            x=x, y=y, color=color, order="avg_cost:Q",
            tooltip=[alt.Tooltip("series:N", title="What"),
                     alt.Tooltip("escalation_rate:Q", title="Escalated at random", format=".0%"),
                     alt.Tooltip("avg_cost:Q", title="Average cost ($ per 1,000 requests)", format="$,.3f"),
                     alt.Tooltip("avg_quality:Q", title="Quality (% correct)", format=".2%")]))
    if base is not None:
        tip = _policy_tooltip("Baseline", "Requests calling the large model")
        layers.append(_chart(base).mark_point(shape="diamond", size=120, filled=True, opacity=1).encode(
            x=x, y=y, color=color, tooltip=tip))
        for k, row in enumerate(base.to_dict("records")):   # stagger labels: oracles often coincide
            layers.append(_chart(pd.DataFrame([row])).mark_text(
                align="left", dx=9, dy=-9 if k % 2 == 0 else 11, fontSize=11, color="#444444").encode(
                x=x, y=y, text="series:N"))
    if quality_floor is not None:
        floor = pd.DataFrame({"avg_quality": [float(quality_floor)], "label": [f"quality floor {quality_floor:.1%}"]})
        layers.append(_chart(floor).mark_rule(color=FLOOR_COLOR, strokeDash=[4, 4]).encode(
            y=y, tooltip=[alt.Tooltip("avg_quality:Q", title="Quality floor", format=".2%")]))
        layers.append(_chart(floor).mark_text(align="left", baseline="bottom", dx=4, dy=-3, x=0, fontSize=11,
                                                 color=FLOOR_COLOR).encode(y=y, text="label:N"))
    if chosen is not None:
        pick = pd.DataFrame([{**chosen, "series": "chosen threshold", "label": f"threshold {chosen['threshold']:.4g}"}])
        layers.append(_chart(pick).mark_point(size=260, filled=True, opacity=0.9).encode(
            x=x, y=y, color=color, tooltip=_cascade_tooltip()))
        # below right of the point: under a frontier that rises to the right, clear of the floor's label (left)
        layers.append(_chart(pick).mark_text(align="left", baseline="top", dx=10, dy=8, fontSize=12, fontWeight="bold",
                                                color=FLOOR_COLOR).encode(x=x, y=y, text="label:N"))
    if random_pick is not None:
        share = random_pick["large_call_rate"]
        pick = pd.DataFrame([{**random_pick, "series": "random at the floor",
                              "label": f"{share:.1%} at random to the large model"}])
        layers.append(_chart(pick).mark_point(size=260, filled=True, opacity=0.9).encode(
            x=x, y=y, color=color, tooltip=_policy_tooltip("What", "Requests sent to the large model at random")))
        layers.append(_chart(pick).mark_text(align="left", baseline="top", dx=10, dy=8, fontSize=12, fontWeight="bold",
                                             color=FLOOR_COLOR).encode(x=x, y=y, text="label:N"))
    return alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=height)


def edge_net_benefit(curve: pd.DataFrame, *, break_even_ms: float | None = None,
                     markers: list[tuple[float, str]] | tuple = (),
                     title: str = "Net benefit of escalating one request to the cloud, by network RTT",
                     height: int = 300) -> alt.LayerChart:
    """``net_benefit_usd`` against ``rtt_ms`` (finops.cascade.edge.net_benefit_curve): green above zero
    (escalation pays), red below; a red rule at the break-even RTT and a blue one at each
    ``(rtt_ms, label)`` marker."""
    data = curve.assign(pays=curve["net_benefit_usd"].clip(lower=0), loses=curve["net_benefit_usd"].clip(upper=0))
    x = alt.X("rtt_ms:Q", title=RTT_TITLE, axis=alt.Axis(format=",.0f"), scale=alt.Scale(nice=False))
    y_title = "Net benefit of escalating ($ per request)"
    tip = [alt.Tooltip("rtt_ms:Q", title="RTT (ms)", format=",.0f"),
           alt.Tooltip("benefit_usd:Q", title="Quality gain worth ($ per request)", format="$.4f"),
           alt.Tooltip("cost_usd:Q", title="Cost of escalating ($ per request)", format="$.4f"),
           alt.Tooltip("net_benefit_usd:Q", title="Net benefit ($ per request)", format="$.4f"),
           alt.Tooltip("escalate:N", title="Escalate?")]
    layers = [
        _chart(data).mark_area(color=PAYS_COLOR, opacity=0.3).encode(
            x=x, y=alt.Y("pays:Q", title=y_title), y2=alt.datum(0)),
        _chart(data).mark_area(color=LOSES_COLOR, opacity=0.3).encode(
            x=x, y=alt.Y("loses:Q", title=y_title), y2=alt.datum(0)),
        _chart(data).mark_line(color="#333333", strokeWidth=2).encode(
            x=x, y=alt.Y("net_benefit_usd:Q", title=y_title,
                                                        axis=alt.Axis(format=usd_axis_format(data["net_benefit_usd"]))),
            tooltip=tip),
        _chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="#333333").encode(y="y:Q"),
    ]
    rules = [(float(r), str(label), "#4c78a8") for r, label in markers]
    if break_even_ms is not None:
        rules.append((float(break_even_ms), f"break-even {break_even_ms:,.0f} ms", FLOOR_COLOR))
    for k, (rtt, label, colour) in enumerate(sorted(rules)):   # labels at the top, staggered, right of their rule
        m = pd.DataFrame({"rtt_ms": [rtt], "label": [label]})
        layers.append(_chart(m).mark_rule(strokeDash=[4, 3], color=colour, strokeWidth=2).encode(
            x="rtt_ms:Q", tooltip=[alt.Tooltip("label:N", title="Marker"),
                                   alt.Tooltip("rtt_ms:Q", title="RTT (ms)", format=",.0f")]))
        right = rtt > 0.7 * float(curve["rtt_ms"].max())          # near the right edge: label on the left
        layers.append(_chart(m).mark_text(align="right" if right else "left", baseline="top", dx=-4 if right else 4,
                                             y=4 + 14 * (k % 3), fontSize=11, fontWeight="bold", color=colour).encode(
            x="rtt_ms:Q", text="label:N"))
    return alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=height)


def rtt_histogram(samples_ms, break_even_ms: float | None, *, always_pays: bool = False, bins: int = 60,
                  max_rtt_ms: float | None = None, title: str = "RTT distribution: where escalation pays",
                  height: int = 220) -> alt.LayerChart:
    """Histogram of RTT samples (share of requests per bin), coloured by whether escalation pays
    at that RTT. The break-even RTT is made a bin edge so that no bar straddles it; without one
    (``None``) every bar pays when ``always_pays``, else none does. Samples above ``max_rtt_ms``
    (default: the 99.9th percentile) are left off the axis but count in the shares."""
    import numpy as np

    x_all = np.asarray(samples_ms, dtype=float)
    top = float(max_rtt_ms) if max_rtt_ms is not None else float(np.quantile(x_all, 0.999))
    top = max(top, float(x_all.min()) + 1.0)
    edges = np.linspace(min(float(x_all.min()), 0.0), top, bins + 1)
    if break_even_ms is not None and edges[0] < break_even_ms < edges[-1]:
        edges = np.unique(np.append(edges, float(break_even_ms)))
    counts, edges = np.histogram(x_all[x_all <= top], bins=edges)
    hist = pd.DataFrame({"lo_ms": edges[:-1], "hi_ms": edges[1:], "share": counts / x_all.size})
    pays, loses = "escalation pays", "stay on the edge"
    if break_even_ms is None:
        hist["decision"] = pays if always_pays else loses
    else:
        hist["decision"] = np.where(hist["hi_ms"] <= break_even_ms + 1e-9, pays, loses)
    bars = _chart(hist).mark_bar(opacity=0.8).encode(
        x=alt.X("lo_ms:Q", title=RTT_TITLE, scale=alt.Scale(domain=[float(edges[0]), top], nice=False)),
        x2="hi_ms:Q",
        y=alt.Y("share:Q", title="Share of requests (%)", axis=alt.Axis(format=".1%")), y2=alt.datum(0),
        color=alt.Color("decision:N", title=None, scale=alt.Scale(domain=[pays, loses], range=[PAYS_COLOR, LOSES_COLOR]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("lo_ms:Q", title="From (ms)", format=",.0f"),
                 alt.Tooltip("hi_ms:Q", title="To (ms)", format=",.0f"),
                 alt.Tooltip("share:Q", title="Share of requests", format=".2%"),
                 alt.Tooltip("decision:N", title="Decision")])
    layers = [bars]
    if break_even_ms is not None and edges[0] < break_even_ms < top:
        layers.append(_chart(pd.DataFrame({"rtt_ms": [float(break_even_ms)]})).mark_rule(
            color=FLOOR_COLOR, strokeDash=[4, 3], strokeWidth=2).encode(
            x="rtt_ms:Q", tooltip=[alt.Tooltip("rtt_ms:Q", title="Break-even RTT (ms)", format=",.0f")]))
    return alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=height)


# ---------------------------------------------------------------- capacity

SLA_COLOR, CHOSEN_COLOR, NEED_COLOR, UNSTABLE_COLOR = "#d62728", PALETTE[0], PALETTE[2], "#e45756"


def _rule_x(value: float, label: str, color: str, y_field: str | None = None) -> list[alt.Chart]:
    """A dashed vertical rule at ``value`` with its label written up the rule."""
    m = pd.DataFrame({"x": [float(value)], "label": [label]})
    rule = _chart(m).mark_rule(color=color, strokeDash=[5, 3], strokeWidth=2).encode(
        x="x:Q", tooltip=[alt.Tooltip("label:N", title="Marker")])
    text = _chart(m).mark_text(angle=270, align="right", baseline="bottom", dx=-4, dy=-3, y=0, fontSize=11,
                                  color=color).encode(x="x:Q", text="label:N")
    return [rule, text]


def _rule_y(value: float, label: str, color: str) -> list[alt.Chart]:
    """A dashed horizontal rule at ``value`` with its label at the left, above the rule."""
    m = pd.DataFrame({"y": [float(value)], "label": [label]})
    return [_chart(m).mark_rule(color=color, strokeDash=[5, 3], strokeWidth=2).encode(
                y="y:Q", tooltip=[alt.Tooltip("label:N", title="Marker")]),
            _chart(m).mark_text(align="left", baseline="bottom", dx=4, dy=-3, x=0, fontSize=11,
                                   color=color).encode(y="y:Q", text="label:N")]


def _wait_unit(top_s: float) -> tuple[float, str]:
    """The factor and unit a queue-wait axis reads best in, from its top in seconds: s from 1 s, ms from
    1 ms, µs below (the axis never falls back to exponents such as 9e-7)."""
    if top_s >= 1:
        return 1.0, "s"
    if top_s >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def p99_wait_vs_replicas(curve: pd.DataFrame, *, slots_per_replica: int, chosen_replicas: int,
                         required_replicas: int | None = None, wait_sla_s: float | None = None,
                         title: str = "P99 queue wait against replicas", height: int = 300) -> alt.LayerChart:
    """P99 queue wait by replica count (finops.capacity.calculator.p99_wait_by_replicas); the unstable
    counts (ρ ≥ 1) are a red band, the SLA a red rule, the chosen and required counts blue and
    green rules. The y axis stops at 3 × the SLA so the knee shows; higher waits leave the plot. Waits read in
    s, ms or µs, whichever that top needs (``_wait_unit``)."""
    stable = curve[curve["stable"] & np.isfinite(curve["wait_p99_s"])].copy()
    finite = stable["wait_p99_s"]
    top = 3 * wait_sla_s if wait_sla_s else (float(finite.quantile(0.9)) if len(finite) else 1.0)
    top = max(top, 1e-3)
    factor, unit = _wait_unit(top)
    stable["wait_p99"] = stable["wait_p99_s"] * factor
    stable["wq"] = stable["wq_s"] * factor
    x_max = float(curve["replicas"].max()) + 0.5
    x = alt.X("replicas:Q", title=f"Replicas (c = replicas × {slots_per_replica:,} slots)",
              scale=alt.Scale(domain=[0.5, x_max], nice=False), axis=alt.Axis(tickMinStep=1, format="d"))
    y = alt.Y("wait_p99:Q", title=f"P99 queue wait ({unit})", scale=alt.Scale(domain=[0, top * factor], nice=False),
              axis=alt.Axis(format=",.3~r"))
    layers = []
    unstable = curve[~curve["stable"]]
    if len(unstable):
        band = pd.DataFrame({"x0": [0.5], "x1": [float(unstable["replicas"].max()) + 0.5],
                             "label": ["unstable: ρ ≥ 1, the queue grows without bound"]})
        layers.append(_chart(band).mark_rect(color=UNSTABLE_COLOR, opacity=0.15).encode(
            x="x0:Q", x2="x1:Q", tooltip=[alt.Tooltip("label:N", title="Region")]))
        layers.append(_chart(band).mark_text(align="left", baseline="top", dx=4, dy=4, y=0, fontSize=11,
                                                color=UNSTABLE_COLOR).encode(x="x0:Q", text=alt.value("unstable")))
    layers.append(_chart(stable).mark_line(point=alt.OverlayMarkDef(size=18), clip=True, color=PALETTE[0]).encode(
        x=x, y=y, tooltip=[alt.Tooltip("replicas:Q", title="Replicas"), alt.Tooltip("servers:Q", title="Slots c"),
                           alt.Tooltip("utilization:Q", title="Utilisation ρ", format=".1%"),
                           alt.Tooltip("wait_p99:Q", title=f"P99 queue wait ({unit})", format=",.4~r"),
                           alt.Tooltip("wq:Q", title=f"Mean queue wait ({unit})", format=",.4~r")]))
    if wait_sla_s:
        layers += _rule_y(wait_sla_s * factor, f"P99 wait SLA {number(wait_sla_s * factor)} {unit}", SLA_COLOR)
    layers += _rule_x(chosen_replicas, f"your replicas: {chosen_replicas}", CHOSEN_COLOR)
    if required_replicas is not None and required_replicas != chosen_replicas:
        layers += _rule_x(required_replicas, f"required with redundancy: {required_replicas}", NEED_COLOR)
    return alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=height)


def wait_vs_utilization(curve: pd.DataFrame, *, current_rho: float | None = None,
                        current_wq_s: float | None = None, band: tuple[float, float] = (0.6, 0.75),
                        title: str = "Mean queue wait against utilisation", height: int = 300) -> alt.LayerChart:
    """Mean queue wait against ρ at a fixed fleet (finops.capacity.calculator.wait_by_utilization): the
    sweet-spot band shaded green, ρ = 1 a red rule, the current ρ a point (or a note when ≥ 1).
    The y axis stops at the wait at ρ = 0.95 so the blow-up reads as one; it reads in s, ms or µs,
    whichever that top needs (``_wait_unit``), never in exponents."""
    data = curve[np.isfinite(curve["wq_s"])].copy()
    top = float(np.interp(0.95, data["utilization"], data["wq_s"])) if len(data) else 1.0
    top = max(top, 1e-6)
    factor, unit = _wait_unit(top)
    data["wq"] = data["wq_s"] * factor
    data["wait_p99"] = data["wait_p99_s"] * factor
    x = alt.X("utilization:Q", title="Utilisation ρ = λ / (c μ)", scale=alt.Scale(domain=[0, 1.02], nice=False),
              axis=alt.Axis(format=".0%"))
    y = alt.Y("wq:Q", title=f"Mean queue wait ({unit})", scale=alt.Scale(domain=[0, top * factor], nice=False),
              axis=alt.Axis(format=",.3~r"))
    sweet = pd.DataFrame({"x0": [band[0]], "x1": [band[1]], "label": [f"sweet spot {band[0]:.2g}–{band[1]:.2g}"]})
    layers = [
        _chart(sweet).mark_rect(color=NEED_COLOR, opacity=0.18).encode(
            x="x0:Q", x2="x1:Q", tooltip=[alt.Tooltip("label:N", title="Band")]),
        _chart(sweet).mark_text(align="left", baseline="top", dx=3, dy=4, y=0, fontSize=11, color="#2f6f2a").encode(
            x="x0:Q", text="label:N"),
        _chart(data).mark_line(clip=True, color=PALETTE[0], strokeWidth=2).encode(
            x=x, y=y, tooltip=[alt.Tooltip("utilization:Q", title="Utilisation ρ", format=".1%"),
                               alt.Tooltip("arrival_rate_per_s:Q", title="λ (req/s)", format=",.4~r"),
                               alt.Tooltip("wq:Q", title=f"Mean queue wait ({unit})", format=",.4~r"),
                               alt.Tooltip("wait_p99:Q", title=f"P99 queue wait ({unit})", format=",.4~r")]),
    ]
    layers += _rule_x(1.0, "ρ = 1: unstable beyond", UNSTABLE_COLOR)
    if current_rho is not None and current_wq_s is not None and current_rho < 1 and math.isfinite(current_wq_s):
        you = pd.DataFrame({"utilization": [current_rho], "wq": [min(current_wq_s, top) * factor],
                            "label": [f"you: ρ = {current_rho:.0%}" if current_rho >= 0.005 else "you: ρ < 1%"],
                            "wait": [current_wq_s * factor]})
        layers.append(_chart(you).mark_point(size=140, filled=True, color=SLA_COLOR).encode(
            x=x, y=y, tooltip=[alt.Tooltip("utilization:Q", title="Your ρ", format=".1%"),
                               alt.Tooltip("wait:Q", title=f"Mean queue wait ({unit})", format=",.4~r")]))
        left = current_rho < 0.2                    # near the y axis the label reads to the right of the point
        layers.append(_chart(you).mark_text(align="left" if left else "right", dx=9 if left else -9, dy=-9,
                                               fontSize=12, fontWeight="bold", color=SLA_COLOR)
                      .encode(x=x, y=y, text="label:N"))
    return alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=height)


def loadtest_fit(points: pd.DataFrame, *, p99_target_s: float, per_instance_qps: float | None,
                 title: str = "Load test: latency against throughput of one instance",
                 height: int = 300) -> alt.LayerChart:
    """P50 and P99 end-to-end latency (s) against req/s per instance (finops.capacity.loadtest.fit_loadtest's
    points); the P99 target a red rule, the fitted per-instance throughput a green rule."""
    long = points.melt(id_vars=[c for c in ("qps", "concurrency", "source", "qps_basis") if c in points],
                       value_vars=["p50_s", "p99_s"], var_name="series", value_name="latency_s").dropna(
        subset=["latency_s"])
    long["series"] = long["series"].map({"p50_s": "P50 latency", "p99_s": "P99 latency"})
    layers = [_chart(long).mark_line(point=alt.OverlayMarkDef(size=50)).encode(
        x=alt.X("qps:Q", title="Throughput per instance (req/s)", scale=alt.Scale(zero=True)),
        y=alt.Y("latency_s:Q", title="End-to-end latency (s)", scale=alt.Scale(zero=True)),
        color=alt.Color("series:N", title=None, scale=alt.Scale(domain=["P50 latency", "P99 latency"],
                                                                range=[PALETTE[0], PALETTE[1]]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("series:N", title="What"), alt.Tooltip("qps:Q", title="req/s per instance", format=",.3~r"),
                 alt.Tooltip("latency_s:Q", title="Latency (s)", format=",.3~r"),
                 alt.Tooltip("concurrency:Q", title="Concurrency", format=",.3~r"),
                 alt.Tooltip("qps_basis:N", title="QPS from"), alt.Tooltip("source:N", title="Source")])]
    layers += _rule_y(p99_target_s, f"P99 target {p99_target_s:g} s", SLA_COLOR)
    if per_instance_qps is not None:
        layers += _rule_x(per_instance_qps, f"one instance: {number(per_instance_qps, 3)} req/s", NEED_COLOR)
    return alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=height)


def qps_forecast(history: pd.Series, plan: pd.DataFrame, *, interval: float = 0.9, history_days: int = 14,
                 title: str = "Served QPS: history and forecast", height: int = 280) -> alt.LayerChart:
    """The last ``history_days`` of hourly QPS (a grey line), the forecast (blue) and its
    prediction interval (a blue band)."""
    hist = history[history.index >= history.index.max() - pd.Timedelta(days=history_days)]
    h = pd.DataFrame({"ts": hist.index, "qps": hist.to_numpy(), "series": "observed (your logs)"})
    f = plan.reset_index().assign(series="forecast")
    domain, colors = ["observed (your logs)", "forecast"], ["#7f7f7f", PALETTE[0]]
    color = alt.Color("series:N", title=None, scale=alt.Scale(domain=domain, range=colors),
                      legend=alt.Legend(orient="bottom"))
    x = _x_time("hour", "ts")
    y = alt.Y("qps:Q", title="Served requests per second (req/s)", scale=alt.Scale(zero=True))
    tip = [_time_tip("ts", "Hour (UTC)", "%Y-%m-%d %H:%M"),
           alt.Tooltip("qps:Q", title="req/s", format=",.3~r")]
    return alt.layer(
        _chart(f).mark_area(opacity=0.2, color=PALETTE[0]).encode(
            x=x, y=alt.Y("qps_lo:Q", title="Served requests per second (req/s)"), y2="qps_hi:Q",
            tooltip=tip[:1] + [alt.Tooltip("qps_lo:Q", title=f"{interval:.0%} interval from (req/s)", format=",.3~r"),
                               alt.Tooltip("qps_hi:Q", title="to (req/s)", format=",.3~r")]),
        _chart(h).mark_line(strokeWidth=1.5, point=_lone_points(h, ["series"], "ts")).encode(
            x=x, y=y, color=color, tooltip=tip),
        _chart(f).mark_line(strokeWidth=2, point=_lone_points(f, ["series"], "ts")).encode(
            x=x, y=y, color=color, tooltip=tip),
    ).properties(autosize=FIT_X, title=_titled(title), height=height)


def replica_plan(plan: pd.DataFrame, *, title: str = "Replicas per hour", height: int = 220) -> alt.Chart:
    """Replicas per forecast hour (with redundancy) at the point forecast and at the interval's top."""
    long = plan.reset_index().melt(id_vars=["ts"], value_vars=["replicas", "replicas_at_qps_hi"],
                                   var_name="series", value_name="n")
    names = {"replicas": "forecast", "replicas_at_qps_hi": "upper bound"}
    long["series"] = long["series"].map(names)
    return _chart(long).mark_line(interpolate="step-after", point=_lone_points(long, ["series"], "ts")).encode(
        x=_x_time("hour", "ts"),
        y=alt.Y("n:Q", title="Replicas (with redundancy)", scale=alt.Scale(zero=True), axis=alt.Axis(tickMinStep=1)),
        color=alt.Color("series:N", title=None, scale=alt.Scale(domain=list(names.values()),
                                                                range=[PALETTE[0], PALETTE[1]]),
                        legend=alt.Legend(orient="bottom")),
        strokeDash=alt.StrokeDash("series:N", legend=None, scale=alt.Scale(domain=list(names.values()),
                                                                          range=[[1, 0], [4, 3]])),
        tooltip=[_time_tip("ts", "Hour (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("series:N", title="Sized"), alt.Tooltip("n:Q", title="Replicas")],
    ).properties(autosize=FIT_X, title=_titled(title), height=height)


def billed_vs_planned(hours: pd.DataFrame, *, title: str = "Replicas billed against the plan, per hour",
                      height: int = 220) -> alt.Chart:
    """Replicas the fleet was billed for against the replicas the plan needs, per hour
    (:class:`finops.capacity.plans.PlanComparison`'s ``hours``), the short hours marked red."""
    frame, note = thin_points(hours.reset_index(), "ts", max_points=MAX_POINTS // 2, unit="hours")
    title = _titled(title, note)
    long = frame.melt(id_vars=["ts", "short"], value_vars=["replicas_billed", "replicas_planned"],
                      var_name="series", value_name="n")
    # billed by the schedule or, without one, while the model served traffic: the caption below says which
    names = {"replicas_billed": "billed", "replicas_planned": "plan (sizing rule)"}
    long["series"] = long["series"].map(names)
    # one hour of a fleet (a model served once) is a point: a line of one point draws nothing
    lines = _chart(long).mark_line(interpolate="step-after", point=_lone_points(long, ["series"], "ts")).encode(
        x=_x_time("hour", "ts"),
        y=alt.Y("n:Q", title="Replicas", scale=alt.Scale(zero=True), axis=alt.Axis(tickMinStep=1)),
        color=alt.Color("series:N", title=None, scale=alt.Scale(domain=list(names.values()),
                                                                range=[PALETTE[0], PALETTE[1]]),
                        legend=alt.Legend(orient="bottom")),
        # the plan dashed over a wider billed line: where they agree (most hours) both stay visible
        strokeDash=alt.StrokeDash("series:N", legend=None, scale=alt.Scale(domain=list(names.values()),
                                                                          range=[[1, 0], [4, 3]])),
        strokeWidth=alt.StrokeWidth("series:N", legend=None, scale=alt.Scale(domain=list(names.values()),
                                                                            range=[3.5, 1.5])),
        tooltip=[_time_tip("ts", "Hour (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("series:N", title="Replicas"), alt.Tooltip("n:Q", title="Replicas", format=",.3~r")])
    short = _chart(frame[frame["short"]]).mark_tick(color="#d62728", thickness=2).encode(
        x=_x_time("hour", "ts"), y=alt.Y("replicas_planned:Q"),
        tooltip=[_time_tip("ts", "Short hour (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("replicas_billed:Q", title="Billed", format=",.3~r"),
                 alt.Tooltip("replicas_planned:Q", title="Needed", format=",.3~r")])
    return alt.layer(lines, short).properties(autosize=FIT_X, title=_titled(title), height=height)


AUTOSCALE_PANELS = (
    ("ready_capacity_per_s", "Ready capacity (req/s)", "Arrivals (black) and ready capacity"),
    ("queue_len", "Queue length (requests)", "Queue length"),
    ("p99_wait_s", "P99 queue wait (s)", "P99 queue wait"),
    ("shed_per_s", "Shed requests (req/s)", "Shed lowest-tier requests"),
)


def autoscale_timeline(timeline: pd.DataFrame, *, wait_sla_s: float | None = None, height: int = 200) -> list:
    """Four charts over the simulation's time axis (finops.capacity.plans.simulate_policies' timeline),
    one line per policy: ready capacity with the arrival rate in black, queue length, P99 wait
    (the SLA a red rule; unbounded waits are left out) and shed requests."""
    policies = list(dict.fromkeys(timeline["policy"]))
    color = alt.Color("policy:N", title="Policy", legend=alt.Legend(orient="bottom", columns=2, labelLimit=260),
                      scale=alt.Scale(domain=policies, range=[PALETTE[i % len(PALETTE)] for i in range(len(policies))]))
    x = alt.X("t_s:Q", title="Time (s)", scale=alt.Scale(nice=False))
    data = timeline.replace([np.inf, -np.inf], np.nan)
    out = []
    for field, y_title, title in AUTOSCALE_PANELS:
        tip = [alt.Tooltip("policy:N", title="Policy"), alt.Tooltip("t_s:Q", title="t (s)"),
               alt.Tooltip(f"{field}:Q", title=y_title, format=",.3~r"),
               alt.Tooltip("ready_replicas:Q", title="Ready replicas", format=",.3~r")]
        layers = [_chart(data.dropna(subset=[field])).mark_line(strokeWidth=1.6).encode(
            x=x, y=alt.Y(f"{field}:Q", title=y_title, axis=alt.Axis(format=",.3~r")), color=color, tooltip=tip)]
        if field == "ready_capacity_per_s":
            lam = data[data["policy"] == policies[0]]
            layers.append(_chart(lam).mark_line(color="black", strokeWidth=2.2, strokeDash=[6, 3]).encode(
                x=x, y="arrival_rate_per_s:Q",
                tooltip=[alt.Tooltip("t_s:Q", title="t (s)"),
                         alt.Tooltip("arrival_rate_per_s:Q", title="Arrivals λ (req/s)", format=",.3~r")]))
        if field == "p99_wait_s" and wait_sla_s:
            layers += _rule_y(wait_sla_s, f"SLA {wait_sla_s:g} s", SLA_COLOR)
        out.append(alt.layer(*layers).properties(autosize=FIT_X, title=_titled(title), height=height))
    return out


# ---------------------------------------------------------------- the engine's own series (vLLM, scraped)

#: the width every y axis of the engine view takes (labels and title), so that panels stacked one under
#: another put the same instant at the same x
ENGINE_Y_EXTENT = 70
ENGINE_PANEL_HEIGHT = 120


def time_domain(*frames: pd.DataFrame, since=None, until=None, x: str = "ts") -> list[dict] | None:
    """A time axis's domain (two Vega-Lite date-times, UTC): ``[since, until)`` where given, else the earliest and
    latest ``x`` of ``frames``; None without any time."""
    values = pd.concat([pd.to_datetime(fr[x]) for fr in frames if fr is not None and len(fr) and x in fr],
                       ignore_index=True) if any(fr is not None and len(fr) for fr in frames) else pd.Series([])
    lo = pd.Timestamp(since) if since is not None else (values.min() if len(values) else None)
    hi = pd.Timestamp(until) if until is not None else (values.max() if len(values) else None)
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return None
    return [alt.DateTime(year=t.year, month=t.month, date=t.day, hours=t.hour, minutes=t.minute, seconds=t.second,
                         utc=True).to_dict() for t in (pd.Timestamp(lo), pd.Timestamp(hi))]


def _engine_lines(long: pd.DataFrame, grain: str, title, y_title: str, domain: list[dict] | None, *,
                  value_format: str, colors: tuple[str, ...], y_domain: list[float] | None = None,
                  bars: bool = False) -> alt.Chart:
    """One panel of the engine view: ``long`` (ts, series, value) as lines (or bars) on the shared time axis."""
    x_scale = alt.Scale(type="utc", domain=domain) if domain else alt.Scale(type="utc")
    names = list(dict.fromkeys(long["series"]))
    base = _chart(long)
    mark = base.mark_bar(opacity=0.8, clip=True) if bars else base.mark_line(strokeWidth=1.6, point=len(long) <= 40,
                                                                             clip=True)
    return mark.encode(
        x=alt.X("ts:T", title="Time (UTC)", scale=x_scale,
                axis=alt.Axis(format=_time_format(grain, long["ts"], TIME_FORMAT), labelAngle=0)),
        y=alt.Y("value:Q", title=y_title,
                scale=alt.Scale(domain=y_domain) if y_domain else alt.Scale(zero=True, nice=True),
                axis=alt.Axis(format=value_format, minExtent=ENGINE_Y_EXTENT, maxExtent=ENGINE_Y_EXTENT)),
        color=alt.Color("series:N", title=None, sort=names,
                        scale=alt.Scale(domain=names, range=list(colors[:len(names)])),
                        legend=alt.Legend(orient="top")),
        tooltip=[_time_tip("ts", "From (UTC)", "%Y-%m-%d %H:%M"),
                 alt.Tooltip("series:N", title="Series"), alt.Tooltip("value:Q", title=y_title, format=value_format)],
    ).properties(autosize=FIT_X, title=_titled(title), height=ENGINE_PANEL_HEIGHT)


def _long(frame: pd.DataFrame, columns: dict[str, str], scale: float = 1.0) -> pd.DataFrame:
    cols = [c for c in columns if c in frame]
    if frame.empty or not cols:
        return pd.DataFrame(columns=["ts", "series", "value"])
    long = frame[["ts", *cols]].melt(id_vars=["ts"], value_vars=cols, var_name="series", value_name="value")
    long = long.dropna(subset=["value"])
    long["value"] = long["value"].astype(float) * scale
    long["series"] = long["series"].map(columns)
    return long


def engine_panels(model: str, engine_frame: pd.DataFrame, ttft: pd.DataFrame, total: pd.DataFrame, grain: str,
                  domain: list[dict] | None) -> list[alt.Chart]:
    """The engine view of one model, as panels on one time axis (``domain``, :func:`time_domain`): the request
    P99s (``ttft`` and ``total``: rows of :func:`finops.latency.stats.over_time` for the model; seconds when the
    slowest reaches 1,000 ms), running and waiting requests, KV-cache usage (%), the prefix-cache hit rate (%)
    and preemptions per ``grain`` (``engine_frame``: rows of :func:`finops.ingest.engine.engine_over_time` for
    the model). A panel without data is left out; each is thinned to :data:`MAX_POINTS` points."""
    out: list[alt.Chart] = []
    per = GRAIN_TITLES.get(grain, (None, f"per {grain}"))[1]
    p99 = pd.concat([fr[["ts", "p99"]].assign(series=name) for fr, name in
                     ((ttft, "Time to first token P99"), (total, "Total latency P99")) if fr is not None and len(fr)],
                    ignore_index=True) if (len(ttft) or len(total)) else pd.DataFrame(columns=["ts", "p99", "series"])
    p99 = p99.dropna(subset=["p99"])
    if len(p99):
        p99, note = thin_points(p99, "ts", max_points=MAX_POINTS // 2, unit=f"{grain} buckets")
        seconds = float(p99["p99"].max()) >= 1000
        long = pd.DataFrame({"ts": p99["ts"], "series": p99["series"],
                             "value": p99["p99"].astype(float) / (1000.0 if seconds else 1.0)})
        unit = "s" if seconds else "ms"
        out.append(_engine_lines(long, grain, _titled(f"{model}: request latency P99 {per} ({unit})", note),
                                 f"P99 ({unit})", domain, value_format=",.2f" if seconds else ",.0f",
                                 colors=("#f58518", "#e45756")))
    if engine_frame is None or engine_frame.empty:
        return out
    eng, note = thin_points(engine_frame.sort_values("ts"), "ts", max_points=MAX_POINTS // 2,
                            unit=f"{grain} buckets")
    panels = (
        ({"running": "Running (batch)", "waiting": "Waiting (queue)"}, 1.0,
         f"{model}: requests in the engine, mean {per}", "Requests", ",.1f", None, False, ("#4c78a8", "#e45756")),
        ({"kv_cache_pct_mean": "Mean", "kv_cache_pct_max": "Fullest scrape"}, 1.0,
         f"{model}: KV-cache usage {per} (%)", "KV cache used (%)", ",.0f", [0.0, 100.0], False,
         ("#54a24b", "#e45756")),
        ({"prefix_hit_rate": "Hit rate"}, 100.0, f"{model}: prefix-cache hit rate {per} (% of queried tokens)",
         "Hit rate (%)", ",.1f", [0.0, 100.0], False, ("#72b7b2",)),
        ({"preemptions": "Preemptions"}, 1.0, f"{model}: requests preempted {per}", "Preemptions", ",.0f", None,
         True, ("#b279a2",)),
    )
    for columns, scale, title, y_title, fmt, y_domain, bars, colors in panels:
        long = _long(eng, columns, scale)
        if long.empty:
            continue
        out.append(_engine_lines(long, grain, _titled(title, note), y_title, domain, value_format=fmt,
                                 colors=colors, y_domain=y_domain, bars=bars))
    return out
