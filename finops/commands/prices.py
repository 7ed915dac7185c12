"""python -m finops prices sync|list|show MODEL|alias ALIAS MODEL --db PATH"""
from __future__ import annotations

import sys

import pandas as pd

from finops import catalogue, store
from finops.commands._common import add_db, db_path, print_json, stored_path
from finops.errors import InputError
from finops.fmt import table as text_table
from finops.jsonutil import records
from finops.spend import pricing

NAME = "prices"
HELP = ("The price catalogue and the price book: sync the catalogue of the installed genai-prices, list the "
        "rows, show how a model is priced, alias a private name to a priced model.")


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", help="sync, list, show or alias")
    sub.required = True
    sync = sub.add_parser("sync", help="copy the installed catalogue's dated rows into the store (it reprices at once)")
    ls = sub.add_parser("list", help="the price rows: the price book's, the catalogue's, or both")
    ls.add_argument("--source", choices=("book", "catalogue", "all"), default="book")
    ls.add_argument("--provider", help="only this provider's catalogue rows")
    ls.add_argument("--json", action="store_true", help="a JSON list of objects")
    show = sub.add_parser("show", help="how a logged model name is priced, and the rows that apply to it")
    show.add_argument("model", help="the model as logged, e.g. openai/gpt-4o-mini or claude-sonnet-4-20250514")
    show.add_argument("--provider", help="the provider the logs name, if any")
    show.add_argument("--json", action="store_true", help="a JSON object")
    alias = sub.add_parser("alias", help="price a private or deployment name as another model")
    alias.add_argument("alias", help="the name as logged")
    alias.add_argument("model", nargs="?", help="the model it is priced as (leave out with --remove)")
    alias.add_argument("--provider", help="the catalogue provider of that model, if it is not in the price book")
    alias.add_argument("--remove", action="store_true", help="drop the alias")
    for action in (sync, ls, show, alias):
        add_db(action)


def _rows(con, source: str, provider: str | None) -> pd.DataFrame:
    book = pricing.price_book(con).assign(price_source="book")
    cat = con.execute("SELECT *, 'catalogue' AS price_source FROM catalogue_prices "
                      "WHERE ? IS NULL OR provider = ? ORDER BY provider, model, service_tier, min_input_tokens, "
                      "effective_from NULLS FIRST", [provider, provider]).df()
    if source == "book":
        return book
    if source == "catalogue":
        return cat
    return pd.concat([book, cat], ignore_index=True)


def run(args) -> int:
    if args.action == "show" and not args.model.strip():
        raise InputError("name the model to show, as the logs name it", field="model")
    con = store.connect(stored_path(args) if args.action in ("list", "show") else db_path(args))
    if args.action == "sync":
        n = store.sync_catalogue(con)
        print(f"{n:,} catalogue rows from {catalogue.catalogue_source()} are in {db_path(args)}")
        return 0
    if args.action == "list":
        frame = _rows(con, args.source, args.provider)
        if args.json:
            print_json(records(frame))
        elif frame.empty:
            which = {"book": "price book", "catalogue": "catalogue price", "all": "price"}[args.source]
            print(f"no {which} rows" + (f" for provider {args.provider}" if args.provider else ""))
        else:
            print(text_table(frame, missing=""))
        return 0
    if args.action == "alias":
        table = pricing.aliases(con)
        table = table[table["alias"] != args.alias]
        if not args.remove:
            if not args.model:
                raise InputError("name the model the alias is priced as (or give --remove)", field="model")
            table = pd.concat([table, pd.DataFrame([{"alias": args.alias, "model": args.model,
                                                     "provider": args.provider}])], ignore_index=True)
        pricing.save_aliases(con, table)
        print(pricing.explain(con, args.alias, None)["how"])
        return 0
    out = pricing.explain(con, args.model, args.provider)
    if args.json:
        print_json({**{k: v for k, v in out.items() if k != "rows"}, "rows": records(out["rows"])})
    else:
        print(f"{args.model}: {out['how']}")
        if len(out["rows"]):
            print(text_table(out["rows"], missing=""))
        else:
            print("no price row applies: its requests count at $0 until a price book row or an alias is added",
                  file=sys.stderr)
    return 0
