"""Who may do what: roles from an ID token's claims, the rights of each role, and tenant scopes.

Pure functions over plain data (the dashboard hands in ``st.user``'s claims; nothing here knows Streamlit).

- A **role** comes from one claim of the ID token (``groups`` unless configured), a list of group names:
  the highest role any of them maps to wins. *viewer* reads; *engineer* also uploads, follows logs and
  deletes batches; *admin* also edits prices, aliases, fleets, budgets, alert rules, quality floors and
  settings (:data:`RIGHTS` is the table).
- A **tenant scope** comes from another claim (``tenants`` unless configured): when the token carries it,
  the person sees only those tenants' rows, whatever the URL or the sidebar asks (:meth:`Access.scope`),
  and only reads (every write touches data all tenants share). Without it, every tenant.
- Without auth configured the dashboard is one person's local tool: :data:`LOCAL` holds every right.

Write functions of ``finops`` call :func:`require` first: the dashboard sets who is acting
(:func:`acting`) for each script run, so a page that shows a write control to the wrong person is still
refused. The command line and library callers act as :data:`LOCAL` (whoever can run the CLI can write
the store file anyway).

>>> cfg = RoleConfig()
>>> a = access_for({"email": "ana@example.com", "groups": ["finops-viewer"], "tenants": ["acme"]}, cfg)
>>> a.role, a.tenants, a.can("read"), a.can("upload")
('viewer', ('acme',), True, False)
>>> access_for({"groups": ["finops-viewer", "finops-admin"]}, cfg).role
'admin'
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

from finops.errors import InputError

ROLES: tuple[str, ...] = ("viewer", "engineer", "admin")       #: lowest first; each holds the rights below it

#: action -> (the lowest role that may do it, what it is, in words for a refusal)
RIGHTS: dict[str, tuple[str, str]] = {
    "read": ("viewer", "read the dashboard"),
    "upload": ("engineer", "load log files into the store"),
    "follow": ("engineer", "follow a live log"),
    "delete_batch": ("engineer", "delete a loaded batch"),
    "ack_alerts": ("engineer", "acknowledge, snooze or reopen alerts"),
    "deliver_alerts": ("engineer", "deliver alerts now"),
    "edit_prices": ("admin", "edit the price book"),
    "edit_aliases": ("admin", "edit model aliases"),
    "edit_fleets": ("admin", "edit the self-hosted fleets (schedule, reservations, idle policy)"),
    "edit_budgets": ("admin", "edit budgets"),
    "edit_alert_rules": ("admin", "edit alert rules and SLA targets"),
    "edit_quality_floors": ("admin", "edit quality floors"),
    "edit_settings": ("admin", "change the store's settings (the readiness checklist's ticks among them)"),
    "edit_delivery": ("admin", "edit alert delivery targets"),
    "sync_prices": ("admin", "sync the price catalogue"),
}


class AccessDenied(InputError):
    """A write the acting person's role does not allow (a sentence, shown like any input error)."""


@dataclass(frozen=True)
class RoleConfig:
    """How claims map to roles and tenant scopes (the ``[roles]`` section of ``.streamlit/secrets.toml``)."""
    claim: str = "groups"                   #: the ID-token claim listing the person's groups
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: {
        "viewer": ("finops-viewer",), "engineer": ("finops-engineer",), "admin": ("finops-admin",)})
    tenants_claim: str = "tenants"          #: the claim listing the tenants a person may see (absent: all)
    default_role: str | None = None         #: the role of a logged-in person in no mapped group (None: no access)

    @classmethod
    def from_mapping(cls, section: Mapping | None) -> RoleConfig:
        """``[roles]`` as read from secrets.toml: ``claim``, ``viewer``/``engineer``/``admin`` (a group name or
        a list), ``tenants_claim``, ``default_role``; anything left out keeps its default.

        >>> c = RoleConfig.from_mapping({"claim": "roles", "admin": "ops", "default_role": "viewer"})
        >>> c.claim, c.groups["admin"], c.groups["viewer"], c.default_role
        ('roles', ('ops',), ('finops-viewer',), 'viewer')
        """
        section = dict(section or {})
        unknown = set(section) - {"claim", "tenants_claim", "default_role", *ROLES}
        if unknown:
            raise InputError(f"[roles] in secrets.toml: unknown key(s) {', '.join(sorted(unknown))}; the keys are "
                             f"claim, tenants_claim, default_role, {', '.join(ROLES)}")
        base = cls()
        groups = {role: tuple(_names(section[role])) if role in section else base.groups[role] for role in ROLES}
        default = section.get("default_role") or None
        if default is not None and default not in ROLES:
            raise InputError(f"[roles] default_role must be one of {', '.join(ROLES)} or empty, not {default!r}")
        return cls(claim=str(section.get("claim") or base.claim), groups=groups,
                   tenants_claim=str(section.get("tenants_claim") or base.tenants_claim), default_role=default)


@dataclass(frozen=True)
class Access:
    """What one person may do and see."""
    role: str | None                        #: None: logged in, but no group grants access
    tenants: tuple[str, ...] | None = None  #: None: every tenant; else only these
    user: str = ""                          #: who, for the sidebar (email, else name, else subject)
    local: bool = False                     #: single-user local mode (no login configured)

    def can(self, action: str) -> bool:
        """Whether this role may do ``action`` (a key of :data:`RIGHTS`; an unknown action is refused).

        A tenant-scoped login only reads, whatever its role: every write (a load, a price, a budget table)
        touches data every tenant shares.

        >>> Access("engineer").can("delete_batch"), Access("engineer").can("edit_prices"), Access(None).can("read")
        (True, False, False)
        >>> Access("admin", tenants=("acme",)).can("edit_prices"), Access("admin", tenants=("acme",)).can("read")
        (False, True)
        """
        if action not in RIGHTS or self.role not in ROLES:
            return False
        if self.tenants is not None and action != "read":
            return False
        return ROLES.index(self.role) >= ROLES.index(RIGHTS[action][0])

    @property
    def scoped(self) -> bool:
        return self.tenants is not None

    def visible_tenants(self, tenants: Iterable[str]) -> list[str]:
        """Of ``tenants``, those this person may see, in their order."""
        return [t for t in tenants if self.tenants is None or t in self.tenants]

    def scope(self, asked: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The tenants a query filters on for a person who asked for ``asked`` (empty: all they may see),
        and those of ``asked`` left out because they are outside the scope.

        An unscoped person gets what they asked; a scoped one never gets an empty tuple (which would mean
        every tenant), only tenants of their scope.

        >>> Access("viewer", tenants=("a", "b")).scope(["b", "zz"])
        (('b',), ('zz',))
        >>> Access("viewer", tenants=("a", "b")).scope(["zz"])
        (('a', 'b'), ('zz',))
        >>> Access("viewer").scope([])
        ((), ())
        """
        asked = tuple(asked)
        if self.tenants is None:
            return asked, ()
        inside = tuple(t for t in asked if t in self.tenants)
        outside = tuple(t for t in asked if t not in self.tenants)
        return (inside or self.tenants), outside

    def describe(self) -> str:
        """One line for the sidebar."""
        if self.local:
            return "local mode, no login"
        who = self.user or "signed in"
        seen = "all tenants" if self.tenants is None else "tenants " + ", ".join(self.tenants)
        return f"{who} · {self.role or 'no role'} · {seen}"


LOCAL = Access("admin", None, user="", local=True)


def _names(value) -> list[str]:
    """A claim's value as a list of names: a list, or one string (space- or comma-separated)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in value.replace(",", " ").split() if p]
    if isinstance(value, Iterable) and not isinstance(value, Mapping):
        return [str(v) for v in value if v is not None and str(v) != ""]
    return [str(value)]


def role_for(groups: Iterable[str], config: RoleConfig) -> str | None:
    """The highest role any of ``groups`` maps to, else the configured default (None: no access).

    >>> role_for(["x", "finops-engineer"], RoleConfig()), role_for(["x"], RoleConfig())
    ('engineer', None)
    """
    groups = set(groups)
    for role in reversed(ROLES):
        if groups & set(config.groups.get(role, ())):
            return role
    return config.default_role


def access_for(claims: Mapping, config: RoleConfig) -> Access:
    """A logged-in person's :class:`Access` from their ID token's claims.

    The tenants claim, when present, scopes the person to the tenants it lists (an empty list: none, and
    the dashboard says so); when absent, every tenant.
    """
    role = role_for(_names(claims.get(config.claim)), config)
    tenants = tuple(dict.fromkeys(_names(claims.get(config.tenants_claim)))) if config.tenants_claim in claims \
        else None
    user = str(claims.get("email") or claims.get("name") or claims.get("sub") or "")
    return Access(role, tenants, user=user)


# ---------------------------------------------------------------- who is acting, for the write functions

_acting: ContextVar[Access | None] = ContextVar("finops_acting", default=None)


def current() -> Access:
    """Who is acting in this thread: what the dashboard set with :func:`act_as` / :func:`acting`, else
    :data:`LOCAL` (the command line, scripts, tests)."""
    return _acting.get() or LOCAL


def act_as(who: Access) -> None:
    """Set who is acting for the rest of this thread's work (the dashboard does it first in every run)."""
    _acting.set(who)


@contextlib.contextmanager
def acting(who: Access) -> Iterator[Access]:
    """Act as ``who`` inside the block, then as before."""
    token = _acting.set(who)
    try:
        yield who
    finally:
        _acting.reset(token)


def system() -> contextlib.AbstractContextManager[Access]:
    """The dashboard's own writes (building the sample store on its first start), whoever is visiting."""
    return acting(replace(LOCAL, user="finops"))


def require(action: str) -> None:
    """Refuse ``action`` unless the acting person may do it (:class:`AccessDenied`, a sentence).

    >>> with acting(Access("viewer", user="ana")):
    ...     require("edit_prices")
    Traceback (most recent call last):
    ...
    finops.access.AccessDenied: ana is a viewer and may not edit the price book; ask an admin.
    """
    who = current()
    if who.can(action):
        return
    need, what = RIGHTS.get(action, ("admin", action))
    name = who.user or "this login"
    role = f"is {'an' if (who.role or '')[:1] in 'aeiou' and who.role else 'a'} {who.role}" if who.role \
        else "has no role"
    raise AccessDenied(f"{name} {role} and may not {what}; ask {'an' if need[0] in 'aeiou' else 'a'} {need}.")
