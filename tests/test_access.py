"""finops.access: ID-token claims -> role and tenant scope, the rights of each role, and the write functions
refusing a person without the right (whatever a page rendered)."""
import pandas as pd
import pytest

from finops import access, store
from finops.access import LOCAL, RIGHTS, Access, AccessDenied, RoleConfig, access_for
from finops.errors import InputError
from finops.filters import filters_for
from finops.spend import budgets, pricing
from helpers import run_page

CFG = RoleConfig()


@pytest.mark.parametrize(("groups", "role"), [
    (["finops-viewer"], "viewer"),
    (["finops-engineer"], "engineer"),
    (["finops-admin"], "admin"),
    (["finops-viewer", "finops-admin", "finops-engineer"], "admin"),      # the highest wins
    (["staff"], None),                                                    # no mapped group: no access
    ([], None),
])
def test_role_from_the_groups_claim(groups, role):
    assert access_for({"sub": "u", "groups": groups}, CFG).role == role


def test_no_groups_claim_is_no_role_unless_a_default_is_configured():
    assert access_for({"sub": "u"}, CFG).role is None
    assert access_for({"sub": "u"}, RoleConfig(default_role="viewer")).role == "viewer"


def test_a_groups_claim_given_as_one_string_is_split():
    """Some providers send one space- or comma-separated string instead of a list."""
    assert access_for({"groups": "staff finops-engineer"}, CFG).role == "engineer"
    assert access_for({"groups": "staff,finops-admin"}, CFG).role == "admin"


def test_configured_claim_and_group_names():
    cfg = RoleConfig.from_mapping({"claim": "roles", "viewer": "readers", "admin": ["ops", "finance-leads"],
                                   "tenants_claim": "teams"})
    a = access_for({"roles": ["finance-leads"], "teams": ["acme"], "email": "f@x"}, cfg)
    assert (a.role, a.tenants, a.user) == ("admin", ("acme",), "f@x")
    assert access_for({"groups": ["finops-admin"]}, cfg).role is None      # the default claim is not read
    assert access_for({"roles": ["readers"]}, cfg).role == "viewer"
    assert access_for({"roles": ["finops-engineer"]}, cfg).role == "engineer"    # unset roles keep defaults


def test_a_misspelt_roles_section_is_a_sentence():
    with pytest.raises(InputError, match="unknown key"):
        RoleConfig.from_mapping({"admins": ["ops"]})
    with pytest.raises(InputError, match="default_role"):
        RoleConfig.from_mapping({"default_role": "root"})


def test_rights_per_role():
    viewer = {a for a in RIGHTS if Access("viewer").can(a)}
    engineer = {a for a in RIGHTS if Access("engineer").can(a)}
    admin = {a for a in RIGHTS if Access("admin").can(a)}
    assert viewer == {"read"}
    assert engineer == {"read", "upload", "follow", "delete_batch", "ack_alerts", "deliver_alerts"}
    assert admin == set(RIGHTS)
    assert not Access("admin").can("drop_everything")      # an unknown action is refused
    assert not Access(None).can("read")
    assert all(LOCAL.can(a) for a in RIGHTS)


def test_tenant_scope_from_the_tenants_claim():
    a = access_for({"groups": ["finops-viewer"], "tenants": ["acme", "globex", "acme"]}, CFG)
    assert a.tenants == ("acme", "globex") and a.scoped
    assert access_for({"groups": ["finops-viewer"]}, CFG).tenants is None       # no claim: every tenant
    assert access_for({"groups": ["finops-viewer"], "tenants": []}, CFG).tenants == ()   # an empty list: none


def test_a_scope_is_never_widened_by_what_is_asked():
    a = Access("viewer", tenants=("acme",))
    assert a.scope([]) == (("acme",), ())                      # nothing picked: the scope, not "all"
    assert a.scope(["globex"]) == (("acme",), ("globex",))     # outside: left out and named
    assert a.scope(["acme", "globex"]) == (("acme",), ("globex",))
    f = filters_for(None, None, a.scope(["globex"])[0])
    assert f.where() == ("tenant IN (?)", ["acme"])
    assert a.visible_tenants(["globex", "acme", "initech"]) == ["acme"]


def test_a_scoped_login_only_reads_whatever_its_role():
    a = Access("admin", tenants=("acme",))
    assert a.can("read") and not any(a.can(x) for x in RIGHTS if x != "read")


def test_sidebar_line():
    assert LOCAL.describe() == "local mode, no login"
    assert Access("viewer", ("acme",), user="ana@x").describe() == "ana@x · viewer · tenants acme"
    assert Access("admin", user="ada@x").describe() == "ada@x · admin · all tenants"


# ---------------------------------------------------------------- the write functions refuse too

def test_write_functions_refuse_a_viewer_and_leave_the_store_as_it_was():
    con = store.connect(":memory:")
    book = pricing.price_book(con)
    with access.acting(Access("viewer", user="vera@x")):
        with pytest.raises(AccessDenied, match=r"vera@x is a viewer and may not edit the price book; ask an admin"):
            pricing.save_price_book(con, book.head(1))
        with pytest.raises(AccessDenied, match="may not edit budgets"):
            budgets.save_budgets(con, "2026-03", pd.DataFrame({"tenant": ["acme"], "budget_usd": [10.0]}))
        with pytest.raises(AccessDenied, match="may not delete a loaded batch"):
            store.delete_batch(con, 1)
        with pytest.raises(AccessDenied, match="may not edit the price book"):
            pricing.reset_price_book(con)
    assert len(pricing.price_book(con)) == len(book)


def test_an_engineer_loads_but_may_not_price(tmp_path):
    from finops.ingest import ingest_path
    con = store.connect(":memory:")
    log = tmp_path / "r.csv"
    log.write_text("request_id,ts,model,tenant,input_tokens,output_tokens\nr1,2026-03-01T10:00:00,gpt-4o,acme,10,5\n")
    with access.acting(Access("engineer", user="eng@x")):
        assert ingest_path(con, log)[0].rows_ingested == 1
        with pytest.raises(AccessDenied, match="eng@x is an engineer and may not edit model aliases; ask an admin"):
            pricing.save_aliases(con, pricing.aliases(con))
    assert access.current() is LOCAL                    # the block ends: the command line's rights again


def test_local_mode_says_so_in_the_sidebar(demo_db):
    """No [auth] in the secrets: single-user local mode, every right, said in the sidebar."""
    at = run_page(demo_db, "views/data.py")
    assert not at.exception
    assert any("local mode, no login" in c.value for c in at.sidebar.caption)
    assert any(b.label == "Save prices" for b in at.button)


def test_the_example_secrets_file_parses_and_its_roles_are_the_defaults():
    import tomllib

    from helpers import ROOT
    example = tomllib.loads((ROOT / ".streamlit" / "secrets.example.toml").read_text(encoding="utf-8"))
    assert {"redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url"} <= set(example["auth"])
    assert RoleConfig.from_mapping(example["roles"]) == RoleConfig()
