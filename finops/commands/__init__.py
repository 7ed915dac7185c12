"""CLI subcommands, one module each (see finops.cli)."""
