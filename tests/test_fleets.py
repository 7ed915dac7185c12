"""Self-hosted fleets against hand-worked numbers: the schedule bills the hours a fleet ran (and the
traffic span where none is declared), scaling is billed per hour, idle policies charge idle out to the
cent, the FOCUS export follows the policy, input and output $ per 1M tokens of a fleet.

The book (tests/helpers.add_test_models): gpu-model, self-hosted, 2 replicas x 1 GPU x $2 per GPU-hour and
1 slot a replica unless a schedule says otherwise; api-model $1 / $4 / $0.25 per 1M input / output / cached."""
from datetime import datetime
from decimal import Decimal

import pandas as pd
import pytest

from finops import store
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame, ingest_path
from finops.spend import costviews, exports, fleets, pricing
from finops.spend import report as spend
from helpers import DATA, add_test_models, march, spend_frame

HOUR_MS = 3.6e6
IDLE = spend.IDLE_TENANT


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    add_test_models(c)
    yield c
    c.close()


def _gpu(rid, ts, tenant="a", service_ms=60_000.0, tier="standard"):
    return (rid, ts, tenant, tier, "gpu-model", 100, 10, 0, service_ms, service_ms, None, False, "ok", None, None)


def _api(rid, ts, tenant="a"):
    # 1M uncached input tokens: $1 + $0.001 a request
    return (rid, ts, tenant, "standard", "api-model", 1_000_000, 0, 0, 50.0, 50.0, None, False, "ok", None, None)


def _period(model="gpu-model", starts="2026-03-01", ends="2026-03-04", replicas=2, **more):
    return {"model": model, "starts_at": starts, "ends_at": ends, "replicas": replicas, **more}


def _bill(con, f, policy=None) -> Decimal:
    """The whole bill of ``f`` as the exact decimal sum of the costed rows."""
    sql_text, params = spend.costed(con, f, idle_policy=policy)
    return con.execute(f"SELECT sum(cost_usd) FROM ({sql_text})", params).fetchall()[0][0]


def _gpu_bill(con, f, policy=None) -> Decimal:
    sql_text, params = spend.costed(con, f, idle_policy=policy)
    return con.execute(f"SELECT sum(cost_usd) FROM ({sql_text}) WHERE model = 'gpu-model'", params).fetchall()[0][0]


# ---------------------------------------------------------------- the schedule bills the hours a fleet ran

def test_a_declared_fleet_is_billed_its_hours_and_no_other(con):
    """2 replicas x 1 GPU x $2 for 3 days (1-3 March), requests on 1 and 3 March, the store running to 5 March:
    72 h x 2 GPUs = 144 GPU-hours = $288, idle on the 3 days and on none other."""
    fleets.save_schedule(con, pd.DataFrame([_period()]))
    ingest_frame(con, spend_frame([_gpu("g1", march(1, 10)), _gpu("g2", march(3, 15)),
                                   _api("p1", march(5, 9))]))
    # the store's span is its traffic's widened to the declared periods: all data bills the 3 days too
    everything = costviews.period_of(con, Filters())
    assert (everything.since, everything.until) == (datetime(2026, 3, 1), datetime(2026, 3, 5, 10))
    assert _gpu_bill(con, Filters()) == _gpu_bill(con, everything) == Decimal("288")
    whole = Filters(since=datetime(2026, 2, 27), until=datetime(2026, 3, 7))
    assert _gpu_bill(con, whole) == Decimal("288")
    summary = costviews.gpu_fleet(con, whole).summary.set_index("model")
    assert summary.loc["gpu-model", "gpu_hours"] == 144 and summary.loc["gpu-model", "hours_billed"] == 72
    assert summary.loc["gpu-model", "billed_by"] == "declared"
    by_day = spend.report(con, whole, by=["day", "tenant"])
    idle_days = by_day[by_day.tenant == IDLE].set_index("day")["cost_usd"]
    # each request holds a slot 1 minute: 1/60 of 1 replica-hour of the day's 48, $2 x 1/60 allocated
    busy = 2.0 / 60
    assert idle_days.to_dict() == pytest.approx({pd.Timestamp(2026, 3, 1): 96 - busy, pd.Timestamp(2026, 3, 2): 96.0,
                                                 pd.Timestamp(2026, 3, 3): 96 - busy})
    # a period of one day inside the schedule: that day's 48 GPU-hours
    assert _gpu_bill(con, Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 3))) == Decimal("96")


def test_without_a_schedule_a_fleet_is_billed_from_its_first_to_its_last_hour_of_traffic(con):
    ingest_frame(con, spend_frame([_gpu("g1", march(2, 10, 30)), _gpu("g2", march(2, 13, 59)),
                                   _api("p1", march(1, 9)), _api("p2", march(4, 9))]))
    whole = costviews.period_of(con, Filters())
    # 10:00 to 14:00: 4 hours x $4 (nothing on 1, 3 or 4 March although the period covers them)
    assert _gpu_bill(con, whole) == Decimal("16")
    util = pricing.fleet_utilization(con, whole.since, whole.until)
    assert util["hour"].tolist() == [pd.Timestamp(2026, 3, 2, h) for h in (10, 11, 12, 13)]
    assert set(util["billed_by"]) == {"traffic"}
    basis = fleets.billing_basis(con).set_index("model")
    assert basis.loc["gpu-model", "billed_by"] == "traffic" and basis.loc["gpu-model", "how"] == fleets.TRAFFIC_NOTE


@pytest.mark.parametrize("second, hours", [
    (march(3, 10), 25),          # 23 silent hours between (11:00 to 09:00 next day): one period, 10:00 to 11:00 next day
    (march(3, 11), 26),          # 24 silent hours: still one period (TRAFFIC_GAP_HOURS)
    (march(3, 12), 2),           # 25 silent hours: two periods of an hour each
    (march(20, 9), 2),           # 18 days apart (logs of two months): each request's hour, not the days between
])
def test_without_a_schedule_a_long_silence_ends_the_fleets_period(con, second, hours):
    """A fleet billed by its traffic is taken to run through a silence of up to TRAFFIC_GAP_HOURS hours (a night,
    a quiet day), not through a longer one: one request of January loaded beside November's billed every hour
    between, $227,970 of idle on the 3-day sample fleet against $2,160."""
    assert pricing.TRAFFIC_GAP_HOURS == 24
    ingest_frame(con, spend_frame([_gpu("g1", march(2, 10, 30)), _gpu("g2", second)]))
    whole = costviews.period_of(con, Filters())
    assert _gpu_bill(con, whole) == Decimal(4 * hours)          # 2 GPUs x $2 an hour
    util = pricing.fleet_utilization(con, whole.since, whole.until)
    assert len(util) == hours and set(util["billed_by"]) == {"traffic"}
    assert util["hour"].min() == pd.Timestamp(2026, 3, 2, 10) and util["hour"].max() == pd.Timestamp(second).floor("h")


def test_litellm_rows_from_2024_leave_the_sample_period_unchanged(con):
    """The issue's case: 8 LiteLLM requests dated 2024 loaded into the sample store stretch the default period to
    two years; the sample's self-hosted fleets are billed only while they served traffic."""
    from finops.sample import demo

    demo.build_demo(con, days=2)
    before_period = costviews.period_of(con, Filters())
    before = _bill(con, before_period)
    ingest_path(con, DATA / "litellm_spendlogs.csv", None)
    after_period = costviews.period_of(con, Filters())
    assert after_period.since.year == 2024 and after_period.until == before_period.until
    assert _bill(con, before_period) == before                       # the sample's own period: to the digit
    litellm = _bill(con, Filters(since=datetime(2024, 1, 1), until=datetime(2025, 1, 1)))
    assert _bill(con, after_period) == before + litellm              # plus the 8 requests, nothing else
    in_2024 = spend.report(con, Filters(since=datetime(2024, 1, 1), until=datetime(2025, 1, 1)), by=["model"])
    assert not set(in_2024["model"]) & {"llama-3.1-8b", "llama-3.1-70b"}
    assert pricing.fleet_utilization(con, datetime(2024, 1, 1), datetime(2025, 1, 1)).empty
    # the Overview's headline over the two years: the sample's spend and idle, plus the 8 requests' cost
    k = costviews.kpis_with_change(con, Filters())
    assert k.current.spend_usd == pytest.approx(float(before + litellm), abs=1e-9)
    assert k.idle_usd == pytest.approx(costviews.kpis_with_change(con, before_period).idle_usd, abs=1e-9)


def test_a_fleet_scaled_from_2_to_6_replicas_is_billed_2_before_and_6_after(con):
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2026-03-02 08:00", ends="2026-03-02 12:00", replicas=2),
                                            _period(starts="2026-03-02 12:00", ends="", replicas=6)]))
    ingest_frame(con, spend_frame([_gpu("g1", march(2, 9)), _api("p1", march(2, 15, 30))]))
    util = pricing.fleet_utilization(con, datetime(2026, 3, 2, 8), datetime(2026, 3, 2, 16)).set_index("hour")
    cost = util["fleet_cost_usd"]
    assert cost.tolist() == [4.0] * 4 + [12.0] * 4                   # 2 x $2 to 12:00, 6 x $2 from then on
    assert util["replicas"].tolist() == [2.0] * 4 + [6.0] * 4
    # the open-ended period runs on: the next day costs 24 x $12
    assert _gpu_bill(con, Filters(since=datetime(2026, 3, 3), until=datetime(2026, 3, 4))) == Decimal("288")


def test_a_change_inside_an_hour_bills_each_part_of_the_hour(con):
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2026-03-02 10:00", ends="2026-03-02 14:30", replicas=2),
                                            _period(starts="2026-03-02 14:30", ends="2026-03-02 16:00", replicas=6)]))
    ingest_frame(con, spend_frame([_gpu("g1", march(2, 14, 40), service_ms=HOUR_MS)]))
    util = pricing.fleet_utilization(con, datetime(2026, 3, 2, 14), datetime(2026, 3, 2, 15)).set_index("hour")
    row = util.loc[pd.Timestamp(2026, 3, 2, 14)]
    # half an hour of 2 replicas and half of 6: 4 replica-hours, $8; capacity 4 slot-hours, 1 of them busy
    assert (row.fleet_cost_usd, row.gpu_hours, row.replicas) == (8.0, 4.0, 4.0)
    assert row.utilization == pytest.approx(0.25) and row.allocated_usd == pytest.approx(2.0)


def test_periods_at_two_sites_add_up_at_their_own_rates(con):
    fleets.save_schedule(con, pd.DataFrame([
        _period(starts="2026-03-02 10:00", ends="2026-03-02 11:00", replicas=3, site="cloud"),
        _period(starts="2026-03-02 10:00", ends="2026-03-02 11:00", replicas=1, site="edge", gpu_hour_usd=0.5,
                gpus_per_replica=2)]))
    ingest_frame(con, spend_frame([_gpu("g1", march(2, 10))]))
    row = pricing.fleet_utilization(con, datetime(2026, 3, 2, 10), datetime(2026, 3, 2, 11)).iloc[0]
    # 3 x 1 GPU x $2 + 1 x 2 GPUs x $0.5 = $7 for 5 GPU-hours: a blended $1.40 per GPU-hour
    assert (row.fleet_cost_usd, row.gpu_hours, row.gpu_hour_usd) == (7.0, 5.0, pytest.approx(1.4))


def test_requests_outside_the_declared_schedule_carry_no_gpu_cost_and_are_counted(con):
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2026-03-02 10:00", ends="2026-03-02 11:00")]))
    ingest_frame(con, spend_frame([_gpu("g1", march(2, 10)), _gpu("g2", march(2, 12)), _gpu("g3", march(2, 12, 5))]))
    f = Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 3))
    assert _gpu_bill(con, f) == Decimal("4")
    summary = costviews.gpu_fleet(con, f).summary.set_index("model")
    assert summary.loc["gpu-model", "unbilled_requests"] == 2
    assert fleets.unbilled_requests(con, f.since, f.until).to_dict("records") == [{"model": "gpu-model", "requests": 2}]


# ---------------------------------------------------------------- idle policies

@pytest.fixture()
def two_tenants(con):
    """12 hours of 2 replicas (24 GPU-hours, $48); tenant a busy 7 slot-hours, b 3: 10 busy GPU-hours, 14 idle."""
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2026-03-02 00:00", ends="2026-03-02 12:00")]))
    rows = [_gpu(f"a{h}", march(2, h, 5), "a", HOUR_MS, "premium") for h in range(7)]
    rows += [_gpu(f"b{h}", march(2, h, 6), "b", HOUR_MS, "batch") for h in range(3)]
    ingest_frame(con, spend_frame(rows))
    return con


DAY = Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 3))


@pytest.mark.parametrize(("policy", "expected"), [
    # a $14 and b $6 of busy time; idle $28 ...
    ("apart", {"a": 14.0, "b": 6.0, IDLE: 28.0}),
    # ... spread 7 : 3 by busy time
    ("usage", {"a": 14.0 + 0.7 * 28, "b": 6.0 + 0.3 * 28}),
    # ... by reservations of 0.5 (a) and 1.5 (b) replicas: a quarter and three quarters
    ("reservations", {"a": 14.0 + 7.0, "b": 6.0 + 21.0}),
    # ... all to the platform team
    ("centre:platform", {"a": 14.0, "b": 6.0, "platform": 28.0}),
])
def test_each_idle_policy_charges_the_hand_sums_and_adds_up_to_the_bill(two_tenants, policy, expected):
    con = two_tenants
    fleets.save_reservations(con, pd.DataFrame([{"model": "gpu-model", "tenant": "a", "replicas": 0.5},
                                                {"model": "gpu-model", "tenant": "b", "replicas": 1.5}]))
    p = pricing.IdlePolicy.parse(policy)
    by_tenant = spend.report(con, DAY, by=["tenant"], idle_policy=p).set_index("tenant")["cost_usd"]
    assert by_tenant.to_dict() == pytest.approx(expected, abs=1e-9)
    assert _bill(con, DAY, p) == Decimal("48")                       # 24 GPU-hours x $2, to the digit
    sb = costviews.showback(con, DAY, idle_policy=p)
    assert sb.cost_usd.sum() == pytest.approx(48.0, abs=1e-9)
    assert (IDLE in set(sb.tenant)) == (p.kind == "apart")


def test_a_tenant_filter_keeps_the_tenants_share_of_idle(two_tenants):
    usage = pricing.IdlePolicy("usage")
    a = Filters(since=DAY.since, until=DAY.until, tenants=("a",))
    assert spend.report(two_tenants, a, by=[], idle_policy=usage).cost_usd.iloc[0] == pytest.approx(33.6)
    # kept apart, a tenant's view has no idle at all (as before)
    assert spend.report(two_tenants, a, by=[], idle_policy=pricing.KEEP_APART).cost_usd.iloc[0] == pytest.approx(14.0)
    # the share is of all traffic: a tier filter keeps b's batch share only
    batch = Filters(since=DAY.since, until=DAY.until, sla_tiers=("batch",))
    assert spend.report(two_tenants, batch, by=[], idle_policy=usage).cost_usd.iloc[0] == pytest.approx(6.0 + 8.4)


def test_idle_of_an_hour_splits_into_twelve_place_shares_that_add_up_exactly(con):
    # three tenants equally busy: a third of each hour's idle each, the last taking the rounding rest
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2026-03-02 10:00", ends="2026-03-02 11:00", replicas=1,
                                                    gpu_hour_usd=1.0)]))
    ingest_frame(con, spend_frame([_gpu(f"{t}1", march(2, 10, i), t, 60_000.0) for i, t in enumerate("xyz")]))
    text, params = spend.costed(con, DAY, idle_policy=pricing.IdlePolicy("usage"))
    shares = con.execute(f"SELECT tenant, cost_usd FROM ({text}) WHERE charge = 'idle_share' ORDER BY tenant",
                         params).fetchall()
    idle = Decimal(1) - Decimal(3) * Decimal(1) / Decimal(60)       # $1 less 3 busy minutes at $1 an hour
    assert [t for t, _ in shares] == ["x", "y", "z"]
    assert shares[0][1] == shares[1][1] == (idle / 3).quantize(Decimal("1e-12"))
    assert sum(v for _, v in shares) == idle


def test_a_fleet_nobody_can_be_charged_for_keeps_its_idle_apart(con):
    # declared for a day without traffic: under "usage" there are no shares to spread by
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2026-03-02", ends="2026-03-03")]))
    ingest_frame(con, spend_frame([_api("p1", march(2, 9))]))
    rep = spend.report(con, DAY, by=["tenant"], idle_policy=pricing.IdlePolicy("usage")).set_index("tenant")
    assert rep.loc[IDLE, "cost_usd"] == pytest.approx(96.0)


def test_focus_under_spread_by_usage_has_no_idle_row_and_bills_the_fleet(two_tenants):
    focus = exports.focus_frame(two_tenants, DAY, idle_policy=pricing.IdlePolicy("usage"))
    assert exports.check_focus(focus) == []
    tenants = {__import__("json").loads(t)["tenant"] for t in focus["Tags"]}
    assert tenants == {"a", "b"}
    assert focus["BilledCost"].sum() == pytest.approx(48.0, abs=1e-9)
    shared = focus[focus["SkuPriceId"] == "gpu-model/gpu_hour_idle"].set_index("ChargeDescription")
    assert shared["PricingQuantity"].to_dict() == pytest.approx({
        "Idle GPU capacity of gpu-model charged to tenant a (premium tier)": 9.8,     # 0.7 of 14 GPU-hours
        "Idle GPU capacity of gpu-model charged to tenant b (batch tier)": 4.2})
    kept = exports.focus_frame(two_tenants, DAY, idle_policy=pricing.KEEP_APART)
    assert kept["BilledCost"].sum() == pytest.approx(48.0, abs=1e-9)
    assert (kept["ChargeDescription"] == "Idle GPU capacity of gpu-model (paid for, used by no request)").sum() == 1


def test_the_default_policy_is_a_setting_every_report_follows(two_tenants):
    con = two_tenants
    assert fleets.default_policy(con) == pricing.KEEP_APART
    before = store.data_version(con)
    fleets.set_default_policy(con, "centre:platform")
    assert store.data_version(con) > before
    assert fleets.default_policy(con) == pricing.IdlePolicy("centre", "platform")
    assert costviews.showback_by_tenant(costviews.showback(con, DAY)).set_index("tenant").loc[
        "platform", "cost_usd"] == pytest.approx(28.0)
    with pytest.raises(InputError, match="unknown idle policy"):
        fleets.set_default_policy(con, "evenly")
    with pytest.raises(InputError, match="name the cost centre"):
        fleets.set_default_policy(con, "centre:")


# ---------------------------------------------------------------- editing and loading the schedule

@pytest.mark.parametrize(("row", "message"), [
    (_period(model="api-model"), "not a self-hosted model"),
    (_period(ends="2026-02-01"), "ends .* before it starts"),
    (_period(replicas=2.5), "replicas 2.5 must be a whole number"),
    (_period(replicas=None), "needs its number of replicas"),
    (_period(starts="soon"), "from 'soon' is not a date"),
    (_period(gpu_hour_usd=-1), "gpu_hour_usd -1 must be a number"),
    (_period(source="guessed"), "source must be declared or inferred"),
    # a year mistyped (2206 for 2026) billed every hour to it: 180 years of GPUs, every page's period stretched
    (_period(ends="2206-03-04"), r"ends 2206-03-04 00:00, outside 2015-01-01 to \d{4}-\d\d-\d\d, the times the store "
                                 r"takes \(set FINOPS_TS_MIN / FINOPS_TS_MAX to widen\)"),
    (_period(starts="1000-01-01"), "starts 1000-01-01 00:00, outside 2015-01-01 to"),
])
def test_a_bad_period_is_refused_with_its_row_and_field(con, row, message):
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2025-01-01", ends="2025-02-01")]))
    with pytest.raises(InputError, match=message) as err:
        fleets.save_schedule(con, pd.DataFrame([row]))
    assert err.value.row == 1
    assert len(fleets.schedule(con)) == 1                            # the schedule is as it was


def test_overlapping_periods_at_one_site_are_refused_and_at_two_sites_allowed(con):
    with pytest.raises(InputError, match="two periods of gpu-model overlap"):
        fleets.save_schedule(con, pd.DataFrame([_period(ends=""), _period(starts="2026-03-10", ends="2026-03-11")]))
    n = fleets.save_schedule(con, pd.DataFrame([_period(site="cloud"), _period(site="edge")]))
    assert n == 2


def test_a_schedule_csv_loads_once_and_replaces_the_models_it_names(con, tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text("model,from,to,replicas,gpus_per_replica,gpu_hour_usd,gpu_type,site\n"
                    "gpu-model,2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,2,,,L4,cloud\n"
                    "gpu-model,2026-03-02T00:00:00Z,,6,1,2.5,L4,cloud\n")
    assert fleets.load_schedule_csv(con, path) == 2
    assert fleets.load_schedule_csv(con, path) == 2                  # again: the same two periods, no more
    s = fleets.schedule(con)
    assert len(s) == 2 and s["replicas"].tolist() == [2, 6] and s["gpu_type"].tolist() == ["L4", "L4"]
    assert pd.isna(s["ends_at"].iloc[1]) and s["source"].tolist() == ["declared", "declared"]
    ingest_frame(con, spend_frame([_gpu("g1", march(2, 10))]))
    # 1 March: 24 h x 2 x $2 (the book's GPUs and rate); 2 March: 24 h x 6 x $2.50
    assert _gpu_bill(con, Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 3))) == Decimal(96 + 360)
    bad = tmp_path / "bad.csv"
    bad.write_text("model,replicas\ngpu-model,2\n")
    with pytest.raises(InputError, match="missing: starts_at"):
        fleets.load_schedule_csv(con, bad)


def test_periods_are_inferred_from_the_replica_ids_per_site_and_hour(con):
    rows = [("i1", march(2, 10, 1), "gpu-model", "r0", "cloud"), ("i2", march(2, 10, 2), "gpu-model", "r1", "cloud"),
            ("i3", march(2, 11, 1), "gpu-model", "r0", "cloud"), ("i4", march(2, 11, 9), "gpu-model", "r1", "cloud"),
            ("i5", march(2, 12, 1), "gpu-model", "r0", "cloud"),            # r1 unseen at 12:00
            ("i6", march(2, 10, 3), "gpu-model", "r9", "edge"),
            ("i7", march(2, 10, 4), "api-model", "x", "cloud")]                 # not self-hosted
    ingest_frame(con, pd.DataFrame(rows, columns=["request_id", "ts", "model", "replica", "site"]))
    inferred = fleets.infer_schedule(con)
    got = [(r.site, r.starts_at.hour, r.ends_at.hour, r.replicas) for r in inferred.itertuples(index=False)]
    assert got == [("cloud", 10, 12, 2), ("cloud", 12, 13, 1), ("edge", 10, 11, 1)]
    assert set(inferred["source"]) == {"inferred"} and set(inferred["model"]) == {"gpu-model"}
    assert fleets.apply_inferred(con) == 3
    assert fleets.billing_basis(con).set_index("model").loc["gpu-model", "billed_by"] == "inferred"
    # 10:00 3 replicas, 11:00 2, 12:00 1: 6 replica-hours x $2
    assert _gpu_bill(con, DAY) == Decimal("12")
    # a declared schedule is never overwritten by inference
    fleets.save_schedule(con, pd.DataFrame([_period()]))
    assert fleets.apply_inferred(con) == 0 and set(fleets.schedule(con)["source"]) == {"declared"}


def test_reservations_are_checked(con):
    with pytest.raises(InputError, match="not a self-hosted model"):
        fleets.save_reservations(con, pd.DataFrame([{"model": "api-model", "tenant": "a", "replicas": 1}]))
    with pytest.raises(InputError, match="above 0"):
        fleets.save_reservations(con, pd.DataFrame([{"model": "gpu-model", "tenant": "a", "replicas": 0}]))
    with pytest.raises(InputError, match="reserves gpu-model twice"):
        fleets.save_reservations(con, pd.DataFrame([{"model": "gpu-model", "tenant": "a", "replicas": 1}] * 2))
    assert fleets.save_reservations(con, pd.DataFrame([{"model": "gpu-model", "tenant": "a", "replicas": 2}])) == 1


# ---------------------------------------------------------------- $ per 1M input and output tokens

def test_a_fleets_cost_splits_into_input_and_output_by_prefill_and_decode(con):
    """Hour 10: 2 replicas ($4), busy 1.5 of 2 slot-hours: $3 allocated, $1 idle. r1 (1M in, 0.5M out) holds a
    slot an hour, 1/4 of it prefill: $2 of which $0.50 input. r2 (400k in, 100k out) half an hour, untimed
    split: estimated 400k / (400k + 4 x 100k) = 1/2 prefill: $1, $0.50 input."""
    fleets.save_schedule(con, pd.DataFrame([_period(starts="2026-03-02 10:00", ends="2026-03-02 11:00")]))
    frame = pd.DataFrame([
        ("r1", march(2, 10, 1), "gpu-model", 1_000_000, 500_000, 0.9e6, 2.7e6, None),
        ("r2", march(2, 10, 2), "gpu-model", 400_000, 100_000, None, None, 1.8e6),
        # api-model: 1M input of which 200k cached ($0.85), 500k output ($2)
        ("p1", march(2, 10, 3), "api-model", 1_000_000, 500_000, None, None, 50.0)],
        columns=["request_id", "ts", "model", "input_tokens", "output_tokens", "prefill_ms", "decode_ms", "service_ms"])
    frame["cached_input_tokens"] = [0, 0, 200_000]
    ingest_frame(con, frame)
    t = costviews.token_class_prices(con, DAY).set_index("model")
    assert list(t.columns) == list(costviews.TOKEN_CLASS_COLUMNS)[1:]
    gpu = t.loc["gpu-model"]
    assert (gpu.input_tokens, gpu.output_tokens) == (1_400_000, 600_000)
    assert gpu.input_usd_per_1m == pytest.approx(1.0 / 1.4)          # $0.50 + $0.50 over 1.4M
    assert gpu.output_usd_per_1m == pytest.approx(2.0 / 0.6)         # $1.50 + $0.50 over 0.6M
    # the $1 idle split 1 : 2 like the busy cost
    assert gpu.input_usd_per_1m_with_idle == pytest.approx((1.0 + 1 / 3) / 1.4)
    assert gpu.output_usd_per_1m_with_idle == pytest.approx((2.0 + 2 / 3) / 0.6)
    assert gpu.split_measured_share == pytest.approx(2 / 3)          # r1's hour of the 1.5 busy
    assert "estimated from tokens" in gpu.basis
    api = t.loc["api-model"]
    assert (api.input_usd_per_1m, api.output_usd_per_1m) == (pytest.approx(0.85), pytest.approx(4.0))
    assert api.kind == "api" and pd.isna(api.split_measured_share)
