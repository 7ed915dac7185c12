"""A tenant-scoped login sees nothing other tenants did: its alerts, diagnosis and incidents on the shared
store equal those of a store that holds only its tenant's requests.

The independent side is built by deleting every other tenant's rows from a copy of the sample store and
writing its rollups and derived tables again; nothing of the scoped code path runs there (the filters are
not scoped). What a scoped login is not shown at all (rules on the fleet's own GPU hours and engine
scrapes, the fleet's share of an incident, capacity sizing) is checked apart.
"""
from __future__ import annotations

import shutil
from dataclasses import replace

import pandas as pd
import pytest

from finops import store
from finops.filters import Filters
from finops.latency import diagnose as diag
from finops.ops import alerts, incidents

TENANT = "acme-support"          # the sample's largest tenant, with traffic on every model and both incidents


@pytest.fixture(scope="module")
def stores(demo_db, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scope")
    shared, alone = folder / "shared.duckdb", folder / "alone.duckdb"
    shutil.copy(demo_db, shared)
    shutil.copy(demo_db, alone)
    con = store.connect(str(alone))
    assert con.execute("SELECT count(*) FROM requests WHERE tenant = ?", [TENANT]).fetchone()[0] > 10_000
    con.execute("DELETE FROM requests WHERE tenant IS DISTINCT FROM ?", [TENANT])
    store.rebuild_rollups(con)
    for table, *_ in store.DERIVED:
        store.rebuild_derived(con, table)
    store.bump_data_version(con)
    yield store.connect(str(shared)), con


def _alert_rows(frame: pd.DataFrame) -> list[tuple]:
    keep = frame[~frame["rule"].isin(alerts.FLEET_RULES)]
    return sorted((r.rule, r.model, r.tenant, pd.Timestamp(r.window_start), pd.Timestamp(r.window_end),
                   round(float(r.value), 9), r.severity) for r in keep.itertuples(index=False))


SCOPED = Filters(tenants=(TENANT,), scoped=True)
ALONE = Filters(tenants=(TENANT,))


def test_scoped_alerts_equal_those_of_a_store_of_the_tenant_alone(stores):
    shared, alone = stores
    got = alerts.open_alerts(shared, SCOPED)
    assert not got["rule"].isin(alerts.FLEET_RULES).any()
    assert _alert_rows(got) == _alert_rows(alerts.open_alerts(alone, ALONE))
    assert len(got)                               # the tenant was hit by the sample's incidents
    # unscoped, the same tenant filter is a choice: the fleet rules stay
    unscoped = alerts.open_alerts(shared, ALONE)
    assert unscoped["rule"].isin(alerts.FLEET_RULES).any()


def _finding_rows(findings) -> list[tuple]:
    return sorted((fd.layer, fd.model, fd.severity, str(fd.metrics.get("window_start")),
                   str(fd.metrics.get("window_end")), fd.metrics.get("requests")) for fd in findings)


def test_scoped_diagnosis_reads_only_the_tenant_and_sizes_nothing(stores):
    shared, alone = stores
    scoped = diag.diagnose(shared, SCOPED, window="hour")
    assert _finding_rows(scoped) == _finding_rows(diag.diagnose(alone, ALONE, window="hour"))
    queue = [fd for fd in scoped if fd.layer == "queue"]
    assert queue, "the 11-23 outage queues the tenant's requests"
    for fd in queue:
        assert fd.metrics["slots_needed_at_rho_0_7"] is None
        assert "your tenants' requests only" in fd.evidence and "slots in all" not in fd.action
    # the same filter, unscoped: the queue is read on the whole fleet and sized
    fleet = [fd for fd in diag.diagnose(shared, ALONE, window="hour") if fd.layer == "queue"]
    assert fleet and all(fd.metrics["requests"] >= 1 for fd in fleet)
    assert any(fd.metrics["slots_needed_at_rho_0_7"] for fd in fleet)


def test_scoped_incidents_equal_those_of_the_tenant_alone_without_fleet_shares(stores):
    shared, alone = stores
    got = incidents.incidents(shared, SCOPED)
    want = incidents.incidents(alone, ALONE)

    def rows(items):
        return [(i.model, i.start, i.end, i.severity, i.cause, i.requests, i.affected, i.failed, i.over_sla,
                 tuple(i.tenants)) for i in items]

    assert rows(got) == rows(want) and got
    assert all(i.fleet_share is None for i in got)
    assert not any("of the fleet's requests" in e for i in got for e in i.evidence)
    assert all(set(i.tenants) <= {TENANT} for i in got)
    outage = [i for i in got if i.cause == "replica_outage"]
    assert outage and outage[0].title == "2 of 3 llama-3.1-70b replicas served nothing from 13:00 to 15:00"


def test_a_scope_survives_the_filters_being_narrowed():
    f = replace(SCOPED, since=pd.Timestamp("2026-11-23").to_pydatetime(), sla_tiers=("premium",))
    assert f.scoped and f.fleet().tenants == (TENANT,) and f.fleet().sla_tiers == ()
    assert diag.fleet_filters(f) == f.fleet()
