"""Plain helpers the dashboard needs that are not Streamlit code: store versioning, period labels."""
from __future__ import annotations

from datetime import date, datetime, time, timedelta

import duckdb

from finops.filters import Filters


def data_version(con: duckdb.DuckDBPyConnection) -> tuple:
    """Changes whenever a load, a deletion or a price-book edit changes what queries return."""
    b = con.execute("SELECT count(*), coalesce(max(batch_id), 0), coalesce(sum(rows_ingested), 0) "
                    "FROM batches").fetchall()[0]
    p = con.execute("SELECT count(*), coalesce(sum(hash(prices::VARCHAR)), 0) FROM prices").fetchall()[0]
    return (*b, *p)


def filters_for(start: date | None, end: date | None, tenants=(), models=(), tiers=()) -> Filters:
    """Sidebar values -> Filters. The end date is inclusive for people, exclusive in SQL."""
    since = datetime.combine(start, time()) if start else None
    until = datetime.combine(end, time()) + timedelta(days=1) if end else None
    return Filters(since=since, until=until, tenants=tuple(tenants), models=tuple(models), sla_tiers=tuple(tiers))
