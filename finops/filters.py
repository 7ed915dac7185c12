"""Filters shared by the sidebar, the CLI and every analysis.

``Filters.where()`` returns a ``(sql, params)`` pair: values are always bound
parameters, only fixed column names enter the SQL text.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta

from finops.errors import InputError


@dataclass(frozen=True)
class Filters:
    since: datetime | None = None      # inclusive, UTC
    until: datetime | None = None      # exclusive, UTC
    tenants: tuple[str, ...] = field(default_factory=tuple)
    models: tuple[str, ...] = field(default_factory=tuple)
    sla_tiers: tuple[str, ...] = field(default_factory=tuple)
    #: the tenants are a login's scope, not a choice: no analysis reads beyond them (:meth:`fleet`)
    scoped: bool = False

    def fleet(self) -> Filters:
        """The filters a shared fleet's load is read with (its replicas, queue and slots serve every tenant):
        without the tenant and tier choices, so capacity is judged on the whole fleet's traffic of the period
        and models. A login's scope is never widened: a scoped ``Filters`` keeps its tenants, and what it reads
        is that scope's share of the fleet.

        >>> Filters(tenants=("acme",), sla_tiers=("premium",)).fleet().tenants
        ()
        >>> Filters(tenants=("acme",), scoped=True).fleet().tenants
        ('acme',)
        """
        return replace(self, sla_tiers=()) if self.scoped else replace(self, tenants=(), sla_tiers=())

    def where(self, ts_col: str = "ts", prefix: str = "") -> tuple[str, list]:
        """SQL condition (never empty: ``TRUE`` when unfiltered) and its parameters.

        ``prefix`` qualifies the columns, e.g. ``"r."``.
        """
        parts: list[str] = []
        params: list = []
        if self.since is not None:
            parts.append(f"{prefix}{ts_col} >= ?")
            params.append(self.since)
        if self.until is not None:
            parts.append(f"{prefix}{ts_col} < ?")
            params.append(self.until)
        for col, values in (("tenant", self.tenants), ("model", self.models),
                            ("sla_tier", self.sla_tiers)):
            if values:
                parts.append(f"{prefix}{col} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
        return (" AND ".join(parts) if parts else "TRUE"), params

    def shifted_back(self) -> Filters:
        """The previous period of equal length (for period-over-period deltas)."""
        if self.since is None or self.until is None:
            raise ValueError("a previous period needs both since and until")
        span = self.until - self.since
        return replace(self, since=self.since - span, until=self.since)


#: the years a time typed by a person may fall in (:func:`utc_time`)
TIME_YEARS = (1900, 2999)


def utc_time(text: str, field: str = "time") -> datetime:
    """An ISO date or date and time as the store holds times, naive UTC: an offset (``Z``, ``+02:00``) converted,
    none taken as UTC. Text that is no ISO time raises InputError naming ``field``.

    >>> utc_time("2025-01-01T10:00:00+02:00"), utc_time("2025-01-01")
    (datetime.datetime(2025, 1, 1, 8, 0), datetime.datetime(2025, 1, 1, 0, 0))
    """
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{text.strip()!r} is not an ISO date and time (e.g. 2025-01-01T00:00:00)",
                         field=field) from None
    if not TIME_YEARS[0] <= value.year <= TIME_YEARS[1]:
        # a window's arithmetic (a day added to --until, a baseline before --since) left datetime's years 1 to 9999
        raise InputError(f"{text.strip()!r} is outside the years {TIME_YEARS[0]} to {TIME_YEARS[1]}", field=field)
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo is not None else value


def filters_for(start: date | None, end: date | None, tenants=(), models=(), tiers=(), scoped: bool = False) -> Filters:
    """Sidebar values -> Filters. The end date is inclusive for people, exclusive in SQL; ``scoped``: the
    tenants are the login's scope (:attr:`Filters.scoped`)."""
    since = datetime.combine(start, time()) if start else None
    until = datetime.combine(end, time()) + timedelta(days=1) if end else None
    return Filters(since=since, until=until, tenants=tuple(tenants), models=tuple(models), sla_tiers=tuple(tiers),
                   scoped=scoped)
