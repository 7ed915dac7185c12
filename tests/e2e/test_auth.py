"""Login through a real OpenID Connect provider on 127.0.0.1 (oidc-provider-mock), roles and tenant scopes,
in the browser: a viewer finds no write control (nor by URL), a tenant-scoped viewer's Overview total is
that tenant's ``python -m finops report``, an admin gets the price editor."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from urllib.parse import quote

import httpx
import pytest
from browser import exceptions_on, shoot, wait_ready
from playwright.sync_api import expect

from finops import store
from finops.fmt import usd
from helpers import ROOT

pytestmark = pytest.mark.e2e

WRITE_BUTTONS = ("Save", "Delete", "Load ", "Add the source", "Remove", "Start", "Stop", "Reset to the bundled", "Infer periods", "Use these columns",
                 "Send a test", "Deliver this period", "Acknowledge", "Snooze", "Reopen")


def _user(issuer: str, sub: str, **claims) -> str:
    """Register ``sub`` with its ID-token claims at the provider."""
    r = httpx.put(f"{issuer}/users/{quote(sub)}", json={"email": f"{sub}@example.com", **claims}, timeout=10)
    assert r.status_code == 204, r.text
    return sub


def _log_in(pg, base: str, sub: str, path: str = "") -> None:
    pg.goto(f"{base}/{path}")
    wait_ready(pg)
    pg.get_by_role("button", name="Log in").click()
    pg.get_by_placeholder("sub").fill(sub)            # the provider's own login form
    pg.get_by_role("button", name="Authorize").click()
    pg.wait_for_url(f"{base}/**", timeout=30_000)
    wait_ready(pg)
    assert "Sign in to see" not in pg.inner_text("[data-testid='stMain']")


def _write_controls(pg) -> list[str]:
    """What on the page would write: uploaders, form submit buttons, buttons named as a write."""
    found = [f"uploader: {u.inner_text()[:40]}" for u in pg.locator("[data-testid='stFileUploader']").all()]
    found += [f"form submit: {b.inner_text()}" for b in pg.locator("[data-testid='stFormSubmitButton']").all()]
    main = pg.locator("[data-testid='stMain']")
    found += [f"button: {b.inner_text()}" for b in main.get_by_role("button").all()
              if b.inner_text().strip().startswith(WRITE_BUTTONS)]
    return found


def test_without_login_only_the_login_shows(auth_server, page):
    page.goto(f"{auth_server}/data")
    wait_ready(page)
    assert page.get_by_role("button", name="Log in").count() == 1
    shoot(page, "auth-login")
    assert page.locator("[data-testid='stSidebarNav']").count() == 0
    assert page.locator("[data-testid='stFileUploader']").count() == 0
    assert exceptions_on(page) == []


def test_viewer_finds_no_write_control_on_any_page_nor_by_url(auth_server, oidc_provider, page):
    sub = _user(oidc_provider, "vera", groups=["finops-viewer"])
    _log_in(page, auth_server, sub)
    assert "vera@example.com · viewer · all tenants" in page.inner_text("[data-testid='stSidebar']")
    for path in ("data", "budgets", "cascade", "cascade?source=upload", "capacity", "latency", "incidents",
                 "alerts", "readiness"):
        page.goto(f"{auth_server}/{path}")
        wait_ready(page)
        assert exceptions_on(page) == [], path
        assert _write_controls(page) == [], path
        if path == "readiness":      # the checklist reads, its ticks cannot be changed
            boxes = page.locator("[data-testid='stMain'] [data-testid='stCheckbox'] input").all()
            assert boxes and all(b.is_disabled() for b in boxes)
    page.goto(f"{auth_server}/data")
    wait_ready(page)
    assert "Price book" in page.inner_text("[data-testid='stMain']")        # reads it
    assert page.get_by_text("loading logs is for engineers").count() == 1


def test_tenant_scoped_viewer_sees_their_tenant_total_and_no_other(auth_server, oidc_provider, page, demo_db,
                                                                   tmp_path):
    con = store.connect(demo_db, read_only=True)
    tenants = store.distinct_values(con.cursor(), "tenant")
    lo, hi = store.time_span(con.cursor())
    con.close()
    mine, other = tenants[0], tenants[-1]
    sub = _user(oidc_provider, "tess", groups=["finops-viewer"], tenants=[mine])
    _log_in(page, auth_server, sub)
    page.goto(f"{auth_server}/?tenant={quote(other)}")
    wait_ready(page)
    shoot(page, "auth-tenant-scoped-overview")
    sidebar = page.inner_text("[data-testid='stSidebar']")
    assert f"tenants {mine}" in sidebar
    warning = page.locator("[data-testid='stSidebar'] [data-testid='stAlert']").inner_text()
    assert "may not see" in warning and other in warning
    for _ in range(4):          # a click while the sidebar is still re-rendering can miss: try again
        page.get_by_role("combobox", name="Tenants").click()
        try:
            page.get_by_role("option").first.wait_for(timeout=5_000)
            break
        except Exception:   # noqa: BLE001  Playwright's TimeoutError; the last try fails below
            page.keyboard.press("Escape")
    offered = [o.inner_text().strip() for o in page.get_by_role("option").all()]
    page.keyboard.press("Escape")
    assert [o for o in offered if o != "Select all"] == [mine]

    cli_db = tmp_path / "cli.duckdb"
    shutil.copy(demo_db, cli_db)

    def report_total(*tenant: str) -> float:
        out = subprocess.run([sys.executable, "-m", "finops", "report", "--db", str(cli_db), "--json", "--by",
                              "tenant", *tenant, "--since", lo.date().isoformat(), "--until", hi.date().isoformat()],
                             cwd=ROOT, capture_output=True, text=True, check=True)
        return sum(float(r["cost_usd"]) for r in json.loads(out.stdout))

    total = report_total("--tenant", mine)
    assert 0 < total < report_total()           # the tenant's share, not the fleet's
    page.goto(auth_server + "/")         # nothing picked: the scope, not every tenant
    wait_ready(page)
    spend = page.locator("[data-testid='stMetric']").filter(has_text="Spend (USD)").first
    assert spend.locator("[data-testid='stMetricValue']").inner_text() == usd(total)
    assert other not in page.inner_text("[data-testid='stMain']")
    for path in ("cost", "data", "budgets", "latency", "capacity", "alerts", "incidents", "percentiles", "routing",
                 "cascade", "readiness"):
        page.goto(f"{auth_server}/{path}")
        wait_ready(page)
        assert exceptions_on(page) == [], path
        assert other not in page.inner_text("[data-testid='stMain']"), path
        assert _write_controls(page) == [], path          # a scoped login only reads
    # the readiness evidence adds up every tenant's traffic (the busiest hour's requests per second)
    assert "not shown" in page.inner_text("[data-testid='stMain']")
    assert "req/s per instance" not in page.inner_text("[data-testid='stMain']")


def test_admin_gets_the_price_editor(auth_server, oidc_provider, page):
    sub = _user(oidc_provider, "ada", groups=["finops-admin"])
    _log_in(page, auth_server, sub, "data")
    page.goto(f"{auth_server}/data")
    wait_ready(page)
    assert "ada@example.com · admin · all tenants" in page.inner_text("[data-testid='stSidebar']")
    expect(page.get_by_role("button", name="Save prices")).to_have_count(1, timeout=30_000)
    expect(page.get_by_text("Add or remove a source (admin)")).to_have_count(1, timeout=30_000)
    expect(page.locator("[data-testid='stFileUploader']")).to_have_count(1, timeout=30_000)
    assert exceptions_on(page) == []


def test_engineer_loads_and_deletes_but_edits_no_price(auth_server, oidc_provider, page):
    sub = _user(oidc_provider, "eno", groups=["staff", "finops-engineer"])
    _log_in(page, auth_server, sub, "data")
    page.goto(f"{auth_server}/data")
    wait_ready(page)
    assert "eno@example.com · engineer · all tenants" in page.inner_text("[data-testid='stSidebar']")
    expect(page.locator("[data-testid='stFileUploader']")).to_have_count(1, timeout=30_000)
    expect(page.get_by_text("Live sources", exact=True)).to_have_count(1, timeout=30_000)
    assert page.get_by_text("Add or remove a source (admin)").count() == 0    # sources are an admin's to add
    assert page.get_by_role("button", name="Delete").count() >= 1          # each batch's delete popover
    assert page.locator("[data-testid='stFormSubmitButton']").count() == 0   # no editor's save button
    assert exceptions_on(page) == []


def test_log_out_ends_the_session(auth_server, oidc_provider, page):
    """After "Log out" the login page is back, on every path, until the next login."""
    sub = _user(oidc_provider, "lou", groups=["finops-admin"])
    _log_in(page, auth_server, sub)
    assert "lou@example.com · admin" in page.inner_text("[data-testid='stSidebar']")

    def login_cookies() -> list[str]:     # Streamlit's signed identity cookie and its token cookies
        return [c["name"] for c in page.context.cookies() if c["name"].startswith("_streamlit_user")]

    assert "_streamlit_user" in login_cookies()
    page.locator("[data-testid='stSidebar']").get_by_role("button", name="Log out").click()
    page.get_by_role("button", name="End session").click()       # the provider's own logout form (RP-initiated)
    page.wait_for_url(f"{auth_server}/**", timeout=30_000)
    wait_ready(page)
    expect(page.get_by_role("button", name="Log in")).to_have_count(1, timeout=30_000)
    for path in ("", "data", "cost?tenant=acme-support"):
        page.goto(f"{auth_server}/{path}")
        wait_ready(page)
        assert page.get_by_role("button", name="Log in").count() == 1, path
        assert page.locator("[data-testid='stSidebarNav']").count() == 0, path
        assert "lou@example.com" not in page.inner_text("body"), path
        assert exceptions_on(page) == [], path
    assert login_cookies() == []
    _log_in(page, auth_server, sub)            # and a new login works
    assert "lou@example.com · admin" in page.inner_text("[data-testid='stSidebar']")
