"""The `moelab` command. Each sub-command lives in its own module here; this file only assembles them.

Commands parse and print; the work is done by the rooms they call (hardware, models, roofline, ...).
A user mistake (bad model name, unreadable config, wrong flag value) exits 2 with one line on stderr,
never a traceback: rooms raise `moelab.errors.UserError` for those, and `main` turns it into that line.
"""

from __future__ import annotations

import importlib
import sys

import typer

from moelab.errors import UserError

app = typer.Typer(
    name="moelab",
    help="Measure where MoE decode time goes, against the roofline, and run it at the bandwidth limit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # docstring paragraphs reflow to the terminal; `code` renders as code
)

# Sub-command modules; each registers its commands on `app` when imported.
_COMMANDS = ["hw", "models", "roofline", "bench", "profile", "decode", "verify", "mine", "report"]


def _load_commands() -> None:
    for name in _COMMANDS:
        try:
            importlib.import_module(f"moelab.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"moelab.cli.{name}":  # a real missing dependency must not hide
                raise


def main() -> None:
    _load_commands()
    try:
        app()
    except UserError as e:
        print(f"moelab: error: {e}", file=sys.stderr)
        sys.exit(2)
