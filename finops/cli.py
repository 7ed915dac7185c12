"""``python -m finops``: a thin command-line face over the package.

Subcommands are discovered from the modules of :mod:`finops.commands`. Each
module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Exit codes: 0 ok, 1 bad input, 2 usage.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from finops import commands
from finops.errors import InputError


def command_modules():
    mods = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mods.append(importlib.import_module(f"finops.commands.{info.name}"))
    return mods


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m finops",
                                     description="FinOps analytics for LLM inference fleets.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in command_modules():
        # argparse %-formats help strings: a literal "%" (as in "error rate > 1%") must be doubled
        p = sub.add_parser(mod.NAME, help=mod.HELP.replace("%", "%%"), description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _logging() -> None:
    """The ``finops`` log (a reader's or DuckDB's own text, with server paths) stays out of a person's
    terminal, which gets one sentence per problem; ``FINOPS_DEBUG=1`` prints it to stderr."""
    import logging
    import os
    logger = logging.getLogger("finops")
    if os.environ.get("FINOPS_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    elif not logger.handlers:
        logger.addHandler(logging.NullHandler())


def main(argv: list[str] | None = None) -> int:
    _logging()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args._argv = argv[1:]        # the command's own arguments (a forwarded report: finops.ingest.service)
    try:
        return int(args._run(args) or 0)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader (e.g. `| head`) closed the pipe: not an error of ours
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
