"""One unit cost, named (issue 13): every page's data function and the CLI give each model the same billed,
allocated and fully loaded $ per 1M tokens for the same filters."""
import json

import pytest

from finops import store
from finops.cli import main
from finops.filters import Filters
from finops.sample.demo import build_demo
from finops.spend import costviews, routing
from finops.spend import report as spend


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = tmp_path_factory.mktemp("units") / "sample.duckdb"
    con = store.connect(path)
    build_demo(con, days=2, seed=7)
    yield con, path
    con.close()


def test_every_page_and_the_cli_quote_the_same_unit_costs(sample, capsys):
    con, path = sample
    f = costviews.period_of(con, Filters())
    units = spend.unit_costs(con, f).set_index("model")
    assert set(units["kind"]) == {"api", "self_hosted"}
    # the Cost page's heatmap, "all tenants" column: billed (API) or allocated (self-hosted)
    wide = costviews.cost_matrix_wide(costviews.cost_matrix(con, f)).set_index("model")["all tenants"]
    # the Routing page's repricing of self-hosted traffic: fully loaded
    effective = routing.effective_prices(con, f).set_index("model")
    # spend per model (the CLI's report and the Overview's groups), idle inside its model: fully loaded
    by_model = spend.report(con, f, by=["model"]).set_index("model")["cost_per_1m_tokens"]
    assert main(["report", "--db", str(path), "--unit-costs", "--json"]) == 0
    cli = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    # the spend beside the unit costs is the requests' own (idle apart), named apart from `report`'s cost_usd,
    # which holds a self-hosted fleet's idle inside its model (both were "cost_usd" in the CLI's JSON)
    busy = spend.report(con, f, by=["model"], include_idle=False).set_index("model")["cost_usd"]
    with_idle = spend.report(con, f, by=["model"]).set_index("model")["cost_usd"]
    assert "cost_usd" not in units.columns
    for model, u in units.iterrows():
        assert cli[model]["request_cost_usd"] == pytest.approx(busy[model], rel=1e-12)
        if u.kind == "self_hosted":
            assert cli[model]["request_cost_usd"] < with_idle[model]
        usage = u.billed_usd_per_1m if u.kind == "api" else u.allocated_usd_per_1m
        assert wide[model] == pytest.approx(usage, rel=1e-12), model
        assert cli[model]["billed_usd_per_1m" if u.kind == "api" else "allocated_usd_per_1m"] == pytest.approx(usage)
        if u.kind == "self_hosted":
            assert u.fully_loaded_usd_per_1m > u.allocated_usd_per_1m         # idle costs something
            assert effective.loc[model, "input_usd_per_1m"] == pytest.approx(u.fully_loaded_usd_per_1m, rel=1e-12)
            assert by_model[model] == pytest.approx(u.fully_loaded_usd_per_1m, rel=1e-12)
            assert cli[model]["fully_loaded_usd_per_1m"] == pytest.approx(u.fully_loaded_usd_per_1m)
        else:
            assert by_model[model] == pytest.approx(usage, rel=1e-12)


def test_a_tenant_filter_changes_the_allocated_cost_not_the_fully_loaded_one(sample):
    con, _ = sample
    f = costviews.period_of(con, Filters())
    tenant = store.distinct_values(con, "tenant")[0]
    whole = spend.unit_costs(con, f).set_index("model")
    one = spend.unit_costs(con, Filters(since=f.since, until=f.until, tenants=(tenant,))).set_index("model")
    for model in one.index[one["kind"] == "self_hosted"]:
        assert one.loc[model, "fully_loaded_usd_per_1m"] == pytest.approx(whole.loc[model, "fully_loaded_usd_per_1m"])
        assert one.loc[model, "served_tokens"] < whole.loc[model, "served_tokens"]


def test_two_builds_of_the_sample_store_give_byte_identical_reports(tmp_path, capsys):
    outs = []
    for name in ("a", "b"):
        db = tmp_path / f"{name}.duckdb"
        con = store.connect(db)
        build_demo(con, days=2, seed=7)
        con.close()
        assert main(["report", "--db", str(db), "--by", "model,tenant", "--json"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
