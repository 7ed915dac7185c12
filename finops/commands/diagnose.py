"""python -m finops diagnose --db PATH [filters] [--window hour] [--json]"""
from __future__ import annotations

from finops import store
from finops.commands import _common
from finops.commands._common import add_db, add_filters, filters_from, print_json, stored_path
from finops.latency import diagnose

NAME = "diagnose"
HELP = ("Walk the slow-path playbook (routing, queue, prefill, decode, tail) over the logs, per model per window, "
        "and print each finding with its evidence and the action to take.")


def add_arguments(p) -> None:
    add_db(p)
    add_filters(p)
    p.add_argument("--window", default="hour", choices=tuple(diagnose.WINDOWS),
                   help="window each model is judged in (default hour); adjacent flagged windows merge")
    p.add_argument("--json", action="store_true",
                   help='{"findings": [{"layer", "model", "severity", "evidence", "action", "metrics"}]}')


def run(args) -> int:
    con = store.connect(stored_path(args))
    with store.snapshot(con):
        findings = diagnose.diagnose(con, filters_from(args), window=args.window)
    if args.json:
        print_json(diagnose.as_json(findings))
    elif not findings and _common.nothing_stored(con):
        print(_common.EMPTY_STORE)
    elif not findings and (why := diagnose.silent_why(con, filters_from(args))):
        print(f"no slow-path diagnosis: {why}")
    elif not findings:
        print("no slow-path finding: no queue build-up, prefill or decode tail, or P99 spike stands out")
    else:
        for fd in findings:
            print(f"[{fd.severity}] {fd.layer} · {fd.model}\n  {fd.evidence}\n  → {fd.action}\n")
        print(diagnose.SEVERITY_MEANS)
    return 0
