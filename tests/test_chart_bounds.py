"""finops.charts' bounds (issue 17): the top series kept, the rest folded or left out, and long series thinned,
each with the note the chart shows as its subtitle."""
import pandas as pd
import pytest

from finops import charts
from finops.schema import IDLE_TENANT


def _spend(models=25, periods=3):
    rows = [(p, f"m{m}", float(m + 1), 1) for p in range(periods) for m in range(models)]
    rows += [(p, IDLE_TENANT, 0.5, 0) for p in range(periods)]
    return pd.DataFrame(rows, columns=["period", "series", "cost_usd", "requests"])


def test_the_costliest_series_are_kept_the_rest_folded_per_period_and_the_total_kept():
    frame = _spend()
    out, note = charts.keep_top(frame, "series", "cost_usd", 10, what="models", by_what="spend",
                                fold=("cost_usd", "requests"), by=("period",), keep=(IDLE_TENANT,))
    assert set(out["series"]) == {f"m{m}" for m in range(15, 25)} | {charts.OTHER, IDLE_TENANT}
    assert out["cost_usd"].sum() == frame["cost_usd"].sum() and out["requests"].sum() == frame["requests"].sum()
    assert (out["series"] == charts.OTHER).sum() == 3                      # one 'other' per period
    assert note == "the 10 of 25 models with the highest spend; the rest as 'other'"


def test_series_that_cannot_be_summed_are_left_out_and_said():
    frame = _spend().rename(columns={"cost_usd": "fleet_cost_usd"})
    out, note = charts.keep_top(frame, "series", "fleet_cost_usd", 5, what="models", by_what="fleet cost")
    assert out["series"].nunique() == 5 and charts.OTHER not in set(out["series"])
    assert note.endswith("the others are left out")


def test_a_long_series_is_merged_into_a_coarser_grain_or_sampled():
    frame = pd.DataFrame({"period": range(12_000), "cost_usd": 1.0, "utilization": 0.5})
    merged, note = charts.thin_points(frame, "period", sums=("cost_usd",), unit="hours")
    assert len(merged) <= charts.MAX_POINTS and merged["cost_usd"].sum() == 12_000
    assert note == f"each point merges 3 hours (at most {charts.MAX_POINTS:,} points a chart)"
    sampled, note = charts.thin_points(frame, "period", unit="hours")
    assert len(sampled) == 4_000 and note.startswith("one in every 3 of the 12,000 hours shown")
    short, note = charts.thin_points(frame.head(10), "period")
    assert len(short) == 10 and note is None


def test_the_spend_chart_says_its_bounds_in_its_subtitle():
    spec = charts.spend_over_time(_spend(), "day", title="Spend per day").to_dict()
    assert " ".join(spec["title"]["subtitle"]) == "The 10 of 25 models with the highest spend; the rest as 'other'."
    assert charts.spend_over_time(_spend(models=3), "day", title="Spend").to_dict()["title"] == "Spend"


def test_a_long_title_wraps_to_lines_that_fit_beside_another_chart():
    """Vega cuts a title longer than the chart with an ellipsis: at 1,280 px the Cascade page's RTT histogram
    read "Share of requests by RTT (ms): green where escala…". A title longer than TITLE_LINE_CHARS is lines."""
    title = "Share of requests by RTT (ms): green where escalation pays"
    lines = charts._titled(title).to_dict()["text"]
    assert lines == ["Share of requests by RTT (ms): green where", "escalation pays"]
    assert all(len(line) <= charts.TITLE_LINE_CHARS for line in lines)
    spec = charts.spend_over_time(_spend(models=3), "day", title=title).to_dict()
    assert spec["title"]["text"] == lines


def test_a_chart_beside_another_wraps_shorter_and_breaks_a_long_model_name():
    """Half the page at 1,024 px has room for ~29 characters of title: "Token mix by model (share of tokens,…" was
    cut at 1,100. A model's name longer than a line (Replicate's names carry a 64-character version) was cut too,
    as textwrap leaves a long word whole: it breaks after a '/', '-' or '_', else anywhere, and loses no character."""
    chart = charts.beside(charts.spend_over_time(_spend(models=3), "day", title="Token mix by model (share of tokens, %)"))
    assert chart.to_dict()["title"]["text"] == ["Token mix by model (share of", "tokens, %)"]
    name = "meta/llama-2-13b-chat:f4e2de70d66816a838a89eeeb621910adffb0dd0baba3976c96980970978018d"
    over = pd.DataFrame({"ts": pd.to_datetime(["2023-12-19"]), "grp": [name], "p50": [1.0], "p95": [2.0],
                         "p99": [3.0], "requests": [150]})
    lines = charts.beside(charts.percentile_panel(over, "day", "total latency", title=f"{name}: total latency per day")
                          ).to_dict()["title"]["text"]
    assert all(len(line) <= charts.HALF_TITLE_LINE_CHARS for line in lines)
    assert lines[0] == "meta/llama-2-13b-"                     # broken after its last '-' that fits
    assert "".join(lines[:-2]) + " ".join(lines[-2:]) == f"{name}: total latency per day"


def test_segment_bars_name_the_percentile_before_the_model_so_a_cut_name_keeps_it():
    # LLMPerf's models: three names sharing their first 20 characters, each at P50, P95 and P99
    models = [f"accounts/fireworks/models/llama-v2-{s}-chat" for s in ("7b", "13b", "70b")]
    seg = pd.DataFrame([(m, p, "other", 1000.0, 1000.0, 10, 1000) for m in models for p in ("P50", "P95", "P99")],
                       columns=["grp", "percentile", "segment", "ms", "total_ms", "requests_in_band", "requests"])
    spec = charts.segment_bars(seg).to_dict()
    rows = spec["encoding"]["y"]["sort"]
    assert rows[0] == "P50 · accounts/fireworks/models/llama-v2-7b-chat" and len(set(r[:3] for r in rows)) == 3
    assert spec["encoding"]["y"]["axis"]["labelLimit"] >= 300


def test_segment_bars_keep_the_models_with_the_most_requests_and_an_axis_past_the_longest_bar():
    """The explore store's 'Where the time goes' ranked models by their band rows' requests_in_band summed over
    segments: a model of 1 request with three segments (3 bands x 3 rows x 1 = 9) above `slow`, 8 requests that
    queued, with two (3 x 2 x 1 = 6), and Llama (10 requests, 1 segment: 3). Its axis ended at its longest bar, the
    last tick ("6") before it: a bar of 6.12 s ran past it."""
    ones = [(f"one-{i:02d}", 1, p, s, 1000.0) for i in range(10) for p in ("P50", "P95", "P99")
            for s in ("to first token", "after first token", "other")]
    slow = [("slow", 8, "P50", "service", 2706.6)] + [("slow", 8, p, s, ms) for p in ("P95", "P99")
                                                      for s, ms in (("queue", 5411.8), ("service", 2706.2))]
    llama = [("Llama-3.1-8B-Instruct", 10, p, "after first token", 2000.0) for p in ("P50", "P95", "P99")]
    seg = pd.DataFrame(ones + slow + llama, columns=["grp", "requests", "percentile", "segment", "ms"])
    seg["total_ms"] = seg.groupby(["grp", "percentile"])["ms"].transform("sum")
    seg["requests_in_band"] = 1
    chart = charts.segment_bars(seg)
    spec = chart.to_dict()
    shown = {row.split(" · ", 1)[1] for row in spec["encoding"]["y"]["sort"]}
    assert len(shown) == 10 and {"slow", "Llama-3.1-8B-Instruct"} <= shown      # and 8 of the 10 of 1 request
    assert spec["encoding"]["y"]["sort"][:3] == [f"{p} · Llama-3.1-8B-Instruct" for p in ("P50", "P95", "P99")]
    assert " ".join(spec["title"]["subtitle"]) == ("The 10 of 12 models with the highest count of requests that "
                                                   "log a total latency; the others are left out.")
    # slow's P95 bar: 5,411.8 + 2,706.2 ms = 8.118 s, the longest; the axis reaches past it, to a tick
    assert spec["encoding"]["x"]["scale"] == {"domain": [0, 8.118], "nice": True}
    ticks = [float(t) for t in _svg_texts(chart) if t.replace(".", "", 1).isdigit()]
    assert max(ticks) >= 8.118, ticks


def test_latency_by_bucket_leaves_a_0_ms_percentile_off_its_log_axis_and_says_so():
    """The explore store's gpt-4o at 0–31 prompt tokens: one LiteLLM 429 of total_ms 0, so P50 and P95 of 0 ms,
    which Vega drew at the top of the log axis (about 10 s)."""
    buckets = pd.DataFrame({"grp": ["gpt-4o", "gpt-4o", "gpt-4o-mini"], "bucket_lo": [0, 1024, 512],
                            "bucket_hi": [32, 2048, 1024], "bucket": ["0–31", "1,024–2,047", "512–1,023"],
                            "requests": [1, 1, 2], "total_ms_p50": [0.0, 1503.0, 1625.0],
                            "total_ms_p95": [0.0, 1503.0, 2016.35]})
    spec = charts.latency_by_bucket(buckets, "prompt tokens", title="Latency by prompt length").to_dict()
    drawn = next(iter(spec["datasets"].values()))
    assert sorted(r["ms"] for r in drawn) == [1503.0, 1503.0, 1625.0, 2016.35]
    assert {r["bucket"] for r in drawn if r["grp"] == "gpt-4o"} == {"1,024–2,047"}
    assert " ".join(spec["title"]["subtitle"]) == ("Not drawn on the log axis (0 ms): gpt-4o's P50 and P95 at 0–31 "
                                                   "prompt tokens.")
    # the axis over the values drawn (in s, from 1,503 ms): 1.503 / 1.3 to 2.01635 * 1.3
    assert spec["encoding"]["y"]["scale"]["domain"] == pytest.approx([1.503 / 1.3, 2.01635 * 1.3])


def test_series_tied_at_zero_are_not_picked_as_the_largest():
    # 19 LLMPerf runs nothing prices ($0) beside one priced model: the 10 "highest spend" were 9 of the $0 runs,
    # picked by name, each in the legend as if it led the 10 others
    rows = [(p, f"run{m:02d}", 0.0, 150) for p in range(2) for m in range(19)] + [(p, "gpt-4o", 40.0, 9000)
                                                                                 for p in range(2)]
    frame = pd.DataFrame(rows, columns=["period", "series", "cost_usd", "requests"])
    out, note = charts.keep_top(frame, "series", "cost_usd", 10, what="models", by_what="spend",
                                fold=("cost_usd", "requests"), by=("period",))
    assert set(out["series"]) == {"gpt-4o", charts.OTHER}
    assert out.loc[out.series == charts.OTHER, "requests"].sum() == 19 * 150 * 2     # nothing lost
    assert note == "the 1 of 20 models with any spend; the rest as 'other'"


def test_a_fleet_of_cents_in_one_hour_draws_bars_and_points_with_ticks_that_differ():
    # the ecosystem fixtures: $0.093 in one hour; an hourly area had no width, a line no point, every tick "$0"
    one_hour = pd.Timestamp("2025-03-04 14:00")
    spend = pd.DataFrame({"period": [one_hour] * 3, "series": ["gpt-4o", "o3-mini", "claude-3-5-sonnet"],
                          "cost_usd": [0.031, 0.0097, 0.0088], "requests": [3, 2, 1]})
    spec = charts.spend_over_time(spend, "hour").to_dict()
    assert spec["mark"]["type"] == "bar"
    assert spec["encoding"]["y"]["axis"]["format"] == "$,.4~f"          # the stacked hour: $0.0495
    trend = pd.DataFrame({"period": [one_hour] * 2, "tenant": ["bob", "team-legal"], "cost_usd": [0.004, 0.02]})
    spec = charts.tenant_trend(trend, "hour").to_dict()
    assert spec["mark"]["point"] and spec["encoding"]["y"]["axis"]["format"] == "$,.4~f"
    two_hours = pd.concat([spend, spend.assign(period=one_hour + pd.Timedelta(hours=1))])
    assert charts.spend_over_time(two_hours, "hour").to_dict()["mark"]["type"] == "bar"
    two_days = pd.concat([spend.assign(period=one_hour + pd.Timedelta(hours=h)) for h in range(48)])
    assert charts.spend_over_time_mark(two_days.iloc[:-3], "hour") == "bars"         # 47 hours
    assert charts.spend_over_time(two_days, "hour").to_dict()["mark"]["type"] == "area"


def test_the_folded_rest_has_a_grey_of_its_own_not_the_first_models_colour():
    frame = _spend(models=12, periods=1)
    scale = charts.spend_over_time(frame, "day").to_dict()["encoding"]["color"]["scale"]
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    assert colours[charts.OTHER] == charts.OTHER_COLOR and colours[IDLE_TENANT] == charts.IDLE_COLOR
    named = [c for s, c in colours.items() if s not in (charts.OTHER, IDLE_TENANT)]
    assert len(named) == 10 and charts.OTHER_COLOR not in named and charts.IDLE_COLOR not in named


def test_the_heatmap_labels_every_tenant_and_long_model_names_whole():
    matrix = pd.DataFrame({"model": ["claude-3-5-sonnet-20241022", "openai/gpt-4o-mini"] * 5,
                           "tenant": [f"team-{i}" for i in range(10)], "requests": 1, "tokens": 1000,
                           "cost_usd": 0.01, "cost_per_1m_tokens": 2.5})
    for layer in charts.cost_heatmap(matrix).to_dict()["layer"]:           # the cells and their labels
        enc = layer["encoding"]
        assert enc["x"]["axis"]["labelOverlap"] is False and enc["y"]["axis"]["labelLimit"] >= 240


def test_the_heatmap_legend_labels_its_range_not_one_value():
    """The log colour legend of $0.15 to $4.20 per 1M tokens was labelled "$1.00" alone: it labels both ends and the
    1-2-5 steps between them."""
    matrix = pd.DataFrame({"model": ["a", "b", "c"], "tenant": ["t"] * 3, "requests": 1, "tokens": 1000,
                           "cost_usd": 0.01, "cost_per_1m_tokens": [0.15, 0.2, 4.2]})
    cells = charts.cost_heatmap(matrix).to_dict()["layer"][0]["encoding"]["color"]
    assert cells["legend"]["values"] == [0.15, 0.5, 1.0, 2.0, 4.2] and cells["legend"]["format"] == "$,.2f"


LONG_MODELS = ["accounts/fireworks/models/llama-v2-13b-chat", "accounts/fireworks/models/llama-v2-70b-chat",
               "meta/llama-2-7b-chat:13c3cdee13ee059ab779f0291d29054dab00a47dad8261375654de5540165fb0", "gpt-4o"]


def _svg_texts(chart) -> list[str]:
    """The text Vega draws for ``chart`` (rendered to SVG by vl-convert, no browser)."""
    import html
    import re

    import vl_convert
    svg = vl_convert.vegalite_to_svg(chart.properties(width=500).to_json())
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def _shortened(label: str, name: str) -> bool:
    """Whether ``label`` is ``name`` whole or its start and end around "…" (never cut at the end alone)."""
    if label == name:
        return True
    head, sep, tail = label.partition("…")
    return bool(sep and head and tail and name.startswith(head) and name.endswith(tail))


def test_long_model_and_tenant_names_keep_their_start_and_end_apart_on_the_axes():
    """The LLMPerf providers' model names (three Fireworks models, a Replicate model with its version hash) were
    all cut at the end by Vega's label limit: three bars of the Token mix read "accounts/firewor…"."""
    long = pd.DataFrame([(m, c, t) for m in LONG_MODELS for c, t in (("input (uncached)", 80), ("output", 20))],
                        columns=["model", "token_class", "tokens"]).assign(share=lambda d: d["tokens"] / 100)
    tenants = ["team-search-and-recommendations-eu-west", "team-search-and-recommendations-us-east"]
    matrix = pd.DataFrame({"model": LONG_MODELS[:2] * 2, "tenant": tenants * 2, "requests": 1, "tokens": 1000,
                           "cost_usd": 0.01, "cost_per_1m_tokens": [0.2, 0.9, 0.3, 0.6]})
    cost_long = long.rename(columns={"token_class": "part", "tokens": "cost_usd"})
    for chart, names in ((charts.token_mix(long, ["input (uncached)", "output"]), LONG_MODELS),
                         (charts.cost_parts(cost_long, ["input (uncached)", "output"]), LONG_MODELS),
                         (charts.cost_heatmap(matrix), LONG_MODELS[:2] + tenants)):
        texts = _svg_texts(chart)
        for name in names:
            drawn = [t for t in texts if _shortened(t, name)]
            assert len(drawn) >= 1, (name, texts)
            assert all(len(t) <= charts.NAME_CHARS for t in drawn)
        # each name drawn once, told apart from every other
        labels = [next(t for t in texts if _shortened(t, n)) for n in names]
        assert len(set(labels)) == len(names), labels
    assert "gpt-4o" in _svg_texts(charts.token_mix(long, ["input (uncached)", "output"]))


def test_long_model_names_in_a_legend_keep_their_start_and_end_apart():
    """The same names in the Latency page's length charts' legends: cut at the end ("accounts/fireworks/mod…"
    twice) and set four columns wide in a half-width chart, so the third column was cut off the canvas."""
    buckets = pd.DataFrame([{"grp": m, "bucket_lo": lo, "bucket_hi": 2 * lo, "bucket": f"{lo}-{2 * lo}", "requests": 10,
                             "total_ms_p50": 900.0, "total_ms_p95": 2100.0} for m in LONG_MODELS for lo in (256, 512)])
    chart = charts.latency_by_bucket(buckets, "prompt tokens", "Latency by prompt length", legend_columns=2)
    assert chart.to_dict()["encoding"]["color"]["legend"]["columns"] == 2
    texts = _svg_texts(chart)
    labels = [next((t for t in texts if _shortened(t, m)), None) for m in LONG_MODELS]
    assert None not in labels and len(set(labels)) == len(LONG_MODELS), (labels, texts)
    assert all(len(t) <= charts.LEGEND_NAME_CHARS for t in labels)
    assert labels[0] == "accounts/fir…v2-13b-chat"            # Vega's truncate: 24 characters, "…" in the middle


def test_a_model_and_its_size_class_in_a_legend_shorten_the_name_and_keep_the_class():
    """The Routing page's prompt-length chart labels its lines "model (size class)": shortened as one text, the three
    Fireworks models of unknown size all read "accounts/fir…t (unknown)"."""
    by_length = pd.DataFrame([{"model": m, "size_class": "large" if m == "gpt-4o" else "unknown", "bucket_lo": lo,
                               "requests": 5} for m in LONG_MODELS for lo in (256, 512)])
    texts = _svg_texts(charts.prompt_lengths(by_length, 550, "prompt tokens"))
    drawn = [t for t in texts if t.endswith((" (large)", " (unknown)"))]
    assert "gpt-4o (large)" in drawn and "accounts/fir…v2-13b-chat (unknown)" in drawn, drawn
    assert len(set(drawn)) == len(LONG_MODELS)
    for name, label in zip(sorted(LONG_MODELS), sorted(drawn), strict=True):
        head, _, qualifier = label.rpartition(" (")
        assert _shortened(head, name) and qualifier in ("large)", "unknown)")


def test_the_cache_savings_legend_shows_its_labels_whole():
    # Vega's default legend labelLimit (160 px) cut "self-hosted (paid by the hour)" to "self-hosted (paid by the …"
    frame = pd.DataFrame({"model": ["gpt-4o", "llama-3.1-70b"], "kind": ["api", "self_hosted"], "requests": [100, 200],
                          "cache_hits": [10, 40], "hit_rate": [0.1, 0.2], "saved_usd": [12.08, None],
                          "saved_if_fleet_scaled_usd": [None, 2075.0]})
    spec = charts.cache_savings(frame).to_dict()
    bars = next(layer for layer in spec["layer"] if "color" in layer.get("encoding", {}))
    legend = bars["encoding"]["color"]["legend"]
    assert legend["labelLimit"] >= 300
    assert "self-hosted (paid by the hour)" in bars["encoding"]["color"]["scale"]["domain"]


def test_the_queue_histogram_counts_whole_requests():
    # seven queued requests in bins of one: Vega put ticks at 0.2, 0.4, ... requests
    hist = pd.DataFrame({"lo": [0.0, 30.0, 90.0], "hi": [30.0, 90.0, 200.0], "count": [247352, 1, 1]})
    spec = charts.queue_histogram(hist, {"P50": 0.0, "P95": 0.0, "P99": 0.0}, "log").to_dict()
    axis = spec["encoding"]["y"]["axis"]
    assert axis["tickMinStep"] == 1 and axis["format"] == ",d"


def test_prompt_length_chart_draws_the_size_class_as_a_dash_in_its_legend():
    # a line with points draws its legend's symbol as a dot, solid and dashed alike: the dash is on a line of its
    # own, the points in another layer
    frame = pd.DataFrame({"model": ["a", "a", "b", "b"], "size_class": ["large", "large", "small", "small"],
                          "bucket_lo": [64, 128, 64, 128], "requests": [10, 20, 30, 5]})
    spec = charts.prompt_lengths(frame, 100, "prompt tokens").to_dict()
    [dashed] = [layer for layer in spec["layer"] if "strokeDash" in layer.get("encoding", {})]
    assert dashed["mark"] == {"type": "line"} or dashed["mark"] == "line"
    assert dashed["encoding"]["strokeDash"]["legend"]["symbolType"] == "stroke"
    assert dashed["encoding"]["strokeDash"]["scale"]["range"] == [[1, 0], [5, 3]]
    assert any(layer["mark"].get("type") == "point" for layer in spec["layer"] if isinstance(layer["mark"], dict))


def test_decode_rate_chart_keeps_its_model_legend():
    # the band's colour once said legend=None, which hid the legend of the whole layered chart: four models'
    # lines and no way to tell them apart
    frame = pd.DataFrame({"grp": ["a", "a", "b"], "concurrency": [1, 2, 1], "requests": [9, 9, 9],
                          "tokens_per_s_p10": [10.0, 8.0, 30.0], "tokens_per_s_p50": [12.0, 9.0, 33.0],
                          "tokens_per_s_p90": [14.0, 10.0, 36.0]})
    spec = charts.decode_rate(frame).to_dict()
    colours = [layer["encoding"]["color"] for layer in spec["layer"]]
    assert len(colours) == 2 and all(c.get("legend") is not None and c["field"] == "grp" for c in colours)


def test_no_chart_or_table_number_switches_to_exponents():
    """d3's ``g`` (',.3~g') draws 1,234 req/s as 1.23e+3 and Streamlit's printf '%.3g' a table's 1,000 replicas as
    1e+03: axes and tooltips use '~r' (significant digits, decimal notation), tables 'localized' or fixed places."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    d3 = re.findall(r'format="([^"%]*)"', (root / "finops" / "charts.py").read_text())
    assert d3 and not [f for f in d3 if re.fullmatch(r"[$,.\d~]*g", f)]
    # printf g in the pages: only where the field's bound fits its digits (1,000,000 req/s in %.7g)
    g = {(p.stem, m[1], m[0]) for p in sorted((root / "views").glob("*.py"))
         for m in re.findall(r'"([^"]+)",[^"]*?format="(%\.\d+g)"', p.read_text())}
    # and the two tables' arrival rates: one request in an hour is 0.0002778 req/s, which 'localized' (at most 3
    # places) showed as 0 beside the calculator's λ of 0.0003
    assert g == {("capacity", "%.7g", "Arrivals per second"), ("capacity", "%.4g", "Arrivals per second"),
                 ("capacity", "%.4g", "Served (req/s)"), ("capacity", "%.4g", "P99 wait SLA (s)"),
                 ("capacity", "%.4g", "Mean service time (s)"), ("capacity", "%.4g", "Requests per second per slot"),
                 ("capacity", "%.3g", "Service-time variability (std / mean)"),
                 ("capacity", "%.3g", "Arrival burstiness (std / mean gap)"),
                 ("capacity", "%.8g", "Tokens per request (input + output)"),
                 ("cascade", "%.4g", "Confidence threshold")}            # 1M, 3,600, 3,600, 1,000, 10, 10, 10M, 1


def test_a_dollar_axis_of_cents_reads_cents_not_zero_dollars_at_every_tick():
    """A tenant's $0.57 month drew the budget chart's axis as "$0" at every tick (a fixed '$,.0f'): every dollar
    axis takes its places from what it draws (charts.usd_axis_format), none is fixed."""
    import re
    from pathlib import Path

    import pandas as pd

    from finops import charts
    source = (Path(__file__).resolve().parent.parent / "finops" / "charts.py").read_text()
    assert not re.findall(r'Axis\(format="\$', source)
    status = pd.DataFrame({"tenant": ["default"], "spent_usd": [0.0106], "forecast_usd": [0.5657],
                           "forecast_low_usd": [0.0182], "forecast_high_usd": [0.57], "budget_usd": [None],
                           "status": ["no budget"]})
    spec = charts.budget_status(status).to_dict()
    assert spec["layer"][0]["encoding"]["x"]["axis"]["format"] == "$,.2f"
    tiny = status.assign(spent_usd=0.001, forecast_usd=0.03, forecast_low_usd=0.002, forecast_high_usd=0.031)
    assert charts.budget_status(tiny).to_dict()["layer"][0]["encoding"]["x"]["axis"]["format"] == "$,.4~f"
    big = status.assign(budget_usd=1_500.0)
    assert charts.budget_status(big).to_dict()["layer"][0]["encoding"]["x"]["axis"]["format"] == "$,.0f"


def test_a_percentile_left_of_the_log_axis_is_not_drawn_and_the_rest_are_clipped():
    # 'slow' of the real tools' files: 4 of 8 requests did not wait, the axis starts at 2,700 ms, P50 is 1,350 ms
    # (between a 0 and a 2,700 ms wait): its rule, left of the plot, squeezed the chart and cut its title to "st"
    hist = pd.DataFrame({"lo": [0.0, 2700.0, 4000.0], "hi": [2700.0, 4000.0, 5410.0], "count": [4, 2, 2]})
    spec = charts.queue_histogram(hist, {"P50": 1350.0, "P95": 5410.0, "P99": 2650.0}, "log").to_dict()
    rules = spec["layer"][1]
    drawn = {r["percentile"]: r["label"] for r in spec["datasets"][rules["data"]["name"]]}
    assert drawn == {"P95": "P95 5.41 s", "P99": "P99 2.65 s"}      # 2,650 ms: within 2 % of the edge, kept
    assert rules["mark"]["clip"] is True
    sub_ms = charts.queue_histogram(hist.assign(lo=[0.0, 0.1, 0.2], hi=[0.1, 0.2, 0.4]), {"P50": 0.126}, "log")
    [label] = [r["label"] for d in sub_ms.to_dict()["datasets"].values() for r in d if "label" in r]
    assert label == "P50 0.126 ms"                                  # was "P50 0 ms"


def _temporal_defs(node, path=""):
    """Every field definition of a time in a Vega-Lite spec (temporal, or banded by a time unit): (where, it)."""
    if isinstance(node, dict):
        if "field" in node and (node.get("type") == "temporal" or "timeUnit" in node):
            yield path, node
        for k, v in node.items():
            yield from _temporal_defs(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _temporal_defs(v, f"{path}[{i}]")


def _tooltip_fields(node, data=None):
    """(dataset name, field) of every tooltip of a Vega-Lite spec, each with the dataset its layer draws."""
    if isinstance(node, dict):
        if isinstance(node.get("data"), dict) and "name" in node["data"]:
            data = node["data"]["name"]
        tips = node.get("encoding", {}).get("tooltip", [])
        for t in tips if isinstance(tips, list) else [tips]:
            if isinstance(t, dict) and "field" in t:
                yield data, t["field"]
        for v in node.values():
            yield from _tooltip_fields(v, data)
    elif isinstance(node, list):
        for v in node:
            yield from _tooltip_fields(v, data)


@pytest.mark.parametrize("page", ["overview", "cost", "budgets", "routing", "latency", "percentiles",
                                  "capacity"])
def test_every_chart_draws_its_times_in_utc_and_no_null_in_any_browser(demo_db, page):
    """The store's times are naive UTC; sent naive, Vega read them in the viewer's zone: in Tokyo or Berlin every
    day's spend was drawn on the day before under an axis saying 'Day (UTC)'. Every time a page's charts send is
    a UTC instant, every time axis has a UTC scale (or a UTC time unit) and every time in a tooltip a UTC unit."""
    import json

    import pyarrow as pa

    from helpers import run_page
    at = run_page(demo_db, f"views/{page}.py")
    assert not at.exception, [e.value for e in at.exception]
    charts_seen = at.get("vega_lite_chart")
    assert charts_seen
    for el in charts_seen:
        frames = {named.name: pa.ipc.open_stream(named.data.data).read_all() for named in el.proto.datasets}
        for frame in frames.values():
            naive = [f.name for f in frame.schema if pa.types.is_timestamp(f.type) and f.type.tz != "UTC"]
            assert not naive, (page, naive)
        spec = json.loads(el.proto.spec)
        # and no tooltip writes 'null' (a tenant's previous period where the store holds none, a tenant's budget
        # where none is set): such a value is a text column, — where there is none
        for data, field in _tooltip_fields(spec, spec.get("data", {}).get("name")):
            if data in frames and field in frames[data].column_names:
                assert frames[data][field].null_count == 0, (page, spec.get("title"), field)
        for where, d in _temporal_defs(spec):
            unit = d.get("timeUnit")
            utc_unit = isinstance(unit, dict) and unit.get("utc") or isinstance(unit, str) and unit.startswith("utc")
            assert utc_unit or d.get("scale", {}).get("type") == "utc", (page, where, d)
            # formatType 'time' writes a UTC time unit's labels in the viewer's zone (Los Angeles: a day early)
            assert d.get("axis", {}).get("formatType") != "time", (page, where, d)


def test_a_fleet_seen_for_one_hour_is_drawn_as_points_not_an_empty_panel():
    # a self-hosted model of the real tools' files served one request: its plan-against-billed chart, its GPU
    # utilisation and its forecast's replicas had one hour each, which a line draws as nothing
    hours = pd.DataFrame({"ts": [pd.Timestamp("2026-01-05 09:00")], "short": [False], "replicas_billed": [3.0],
                          "replicas_planned": [2.0]}).set_index("ts")
    spec = charts.billed_vs_planned(hours).to_dict()
    assert spec["layer"][0]["mark"]["point"]
    util = pd.DataFrame({"period": [pd.Timestamp("2026-01-05")], "model": ["m"], "utilization": [0.4],
                         "fleet_cost_usd": [10.0]})
    assert charts.utilization(util, "day").to_dict()["mark"]["point"]
    two = pd.concat([hours, hours.set_index(hours.index + pd.Timedelta(hours=1))])
    assert charts.billed_vs_planned(two).to_dict()["layer"][0]["mark"].get("point", False) is False


def test_the_cache_savings_labels_read_what_the_hits_saved_to_the_cent_or_below():
    # one gpt-4o-mini cache hit saved $0.00022: the label read "$0.00 saved"; an unpriced API model "$0.00 saved"
    frame = pd.DataFrame({"model": ["gpt-4o-mini", "acme-7b", "gpt-4o", "llama-3.1-70b"],
                          "kind": ["api", "api", "api", "self_hosted"], "requests": [3, 5, 100, 200],
                          "cache_hits": [1, 1, 10, 40], "hit_rate": [1 / 3, 0.2, 0.1, 0.2],
                          "saved_usd": [0.0002187, None, 1208.5, None], "saved_if_fleet_scaled_usd": [None, None, None, 2075.0]})
    labels = {r["model"]: r["label"] for d in charts.cache_savings(frame).to_dict()["datasets"].values() for r in d}
    assert labels == {"gpt-4o-mini": "$0.00022 saved", "acme-7b": "no price", "gpt-4o": "$1,208.50 saved",
                      "llama-3.1-70b": "GPU time only (≈ $2,075.00 if the fleet shrank)"}


def test_the_slowest_requests_carry_the_year_where_it_is_not_this_one():
    # the slowest requests of a store of three years' logs read "12-19 11:23:37", as if this December
    from datetime import UTC, datetime
    slow = pd.DataFrame({"ts": pd.to_datetime(["2023-12-19 11:23:37", f"{datetime.now(UTC).year}-01-05 09:00:01"]),
                         "model": ["a", "b"], "request_id": ["r1", "r2"], "total_ms": [4500.0, 4000.0],
                         **{c: [None, None] for c in ("route_ms", "queue_ms", "prefill_ms", "decode_ms")},
                         "service_ms": [4000.0, 3000.0], "other_ms": [500.0, 1000.0]})
    labels = {r["label"] for d in charts.slowest_traces(slow).to_dict()["datasets"].values() for r in d}
    assert "1. 2023-12-19 11:23:37 · a" in labels
    this_year = slow.iloc[[1]].reset_index(drop=True)
    labels = {r["label"] for d in charts.slowest_traces(this_year).to_dict()["datasets"].values() for r in d}
    assert labels == {"1. 01-05 09:00:01 · b"}


def test_a_log_queue_axis_labels_a_tick_under_a_millisecond_in_significant_digits():
    # waits from 0.001 ms to 50 ms: d3's '.2~f' wrote the 0.003 ms tick as "0" on the log axis (log(0) is no tick)
    hist = pd.DataFrame({"lo": [0.0, 0.001, 0.01, 1.0], "hi": [0.001, 0.01, 1.0, 50.0], "count": [3, 1, 5, 9]})
    spec = charts.queue_histogram(hist, {}, "log").to_dict()
    expr = (spec["layer"][0] if "layer" in spec else spec)["encoding"]["x"]["axis"]["labelExpr"]
    assert "format(datum.value, '.2~r')" in expr and "~f" not in expr


def test_a_narrow_band_of_latencies_fills_its_log_axis():
    # P50 to P99 between 1.2 and 1.7 s drew on an axis from 1 to 10 s (Vega's nice log domain: whole decades),
    # the three lines along its floor; the axis spans the data and a margin of 1.3x either side
    over = pd.DataFrame({"ts": pd.date_range("2026-11-20", periods=3, freq="h"), "requests": [30, 30, 30],
                         "p50": [1200.0, 1250.0, 1210.0], "p95": [1600.0, 1650.0, 1500.0], "p99": [1700.0, 1690.0, 1650.0]})
    y = charts.percentile_panel(over, "hour", "total latency", "t").to_dict()["encoding"]["y"]
    assert y["scale"]["type"] == "log" and y["scale"]["nice"] is False
    assert y["scale"]["domain"] == pytest.approx([1.2 / 1.3, 1.7 * 1.3])            # seconds
    empty = charts.percentile_panel(over.assign(p50=0.0, p95=0.0, p99=0.0), "hour", "total latency", "t").to_dict()
    assert "domain" not in empty["encoding"]["y"]["scale"]                          # nothing to draw: no domain


def test_an_hourly_axis_reads_the_24_hour_clock_and_a_fleet_billed_by_traffic_is_not_called_scheduled():
    # Vega's own labels of an hourly axis read "03 PM" beside tooltips and tables of "15:00"; the billed line was
    # "billed (schedule)" for a fleet with no schedule, billed while it served traffic
    hours = pd.DataFrame({"ts": pd.date_range("2026-11-20", periods=3, freq="h"), "replicas_billed": [4, 4, 4],
                          "replicas_planned": [2, 2, 2], "short": [False] * 3}).set_index("ts")
    spec = charts.billed_vs_planned(hours).to_dict()
    x = spec["layer"][0]["encoding"]["x"]
    assert "utcFormat(datum.value, '%H:%M')" in x["axis"]["labelExpr"] and x["scale"]["type"] == "utc"
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["billed", "plan (sizing rule)"]


def test_a_fleet_billed_for_one_hour_draws_its_cost_as_a_bar():
    """The Mooncake trace's hour of a self-hosted model: an area over one hour has no width, and the chart of its
    $80 (allocated vs idle) was empty. One bucket is a stacked bar. Its schedule's second hour was idle: drawn as
    areas, the two hours made a ramp from $80 allocated to $80 idle through the hour, so a few hours are bars too,
    each its hour's full $80 (areas from 48 hours on)."""
    import re

    import vl_convert

    one = pd.DataFrame({"period": [pd.Timestamp(2025, 1, 1)], "model": ["kimi-k1"], "fleet_cost_usd": [80.0],
                        "allocated_usd": [80.0], "idle_usd": [0.0], "utilization": [float("nan")]})
    chart = charts.gpu_cost(one, "hour", "kimi-k1")
    assert chart.to_dict()["mark"]["type"] == "bar"
    svg = vl_convert.vegalite_to_svg(chart.properties(width=500).to_json())
    widths = [float(w) for w in re.findall(r'<g class="mark-rect role-mark[^"]*"[^>]*>.*?<path[^>]*d="M[^"]*?h([\d.]+)',
                                           svg, flags=re.S)]
    assert widths and max(widths) > 10, widths
    assert "Utilisation: unknown (no service time)" in svg and "null" not in svg
    idle = one.assign(period=pd.Timestamp(2025, 1, 1, 1), allocated_usd=0.0, idle_usd=80.0, utilization=0.0)
    two = pd.concat([one, idle], ignore_index=True)
    chart = charts.gpu_cost(two, "hour", "kimi-k1")
    assert chart.to_dict()["mark"]["type"] == "bar"
    svg = vl_convert.vegalite_to_svg(chart.properties(width=500).to_json())
    bars = re.findall(r'<path[^>]*aria-label="[^"]*Cost \(USD\): \$80\.00[^"]*"[^>]*d="M[\d.]+,[\d.]+h([\d.]+)v([\d.]+)',
                      svg)
    assert len(bars) == 2 and all(float(w) > 100 for w, _ in bars), bars       # each hour's band, full height
    assert bars[0][1] == bars[1][1]
    day = pd.concat([idle.assign(period=pd.Timestamp(2025, 1, 1) + pd.Timedelta(hours=h)) for h in range(48)],
                    ignore_index=True)
    assert charts.gpu_cost(day, "hour", "kimi-k1").to_dict()["mark"]["type"] == "area"
