"""`moelab report`: the README's performance tables, generated from benchmarks/results/*.json."""

from __future__ import annotations

import typer

from moelab.cli import app
from moelab.errors import UserError


@app.command()
def report(
    results: str = typer.Option("benchmarks/results", help="Folder of JSON result records."),
    readme: str = typer.Option(None, help="Rewrite this README's results block in place (else print the markdown)."),
    check: bool = typer.Option(False, help="With --readme: exit 1 if the README is not up to date (for CI)."),
):
    """Render the measured results (hardware ceilings, MoE layer benchmarks, verify runs) as markdown tables.

    Every number comes from a saved record with its device, driver, versions, commit and date.
    """
    from pathlib import Path

    from moelab import report as rp

    if not Path(results).is_dir():
        raise UserError(f"no results folder at {results}")
    if readme is None:
        print(rp.results_markdown(results), end="")
        return
    if not Path(readme).is_file():
        raise UserError(f"no README at {readme}")
    try:
        if check:
            text = Path(readme).read_text()
            before = text.split(rp.README_BEGIN, 1)[1].split(rp.README_END, 1)[0].strip()
            if before != rp.results_markdown(results).strip():
                print(f"{readme} is out of date: run `moelab report --readme {readme}`")
                raise typer.Exit(1)
            return
        changed = rp.update_readme(readme, results)
    except (ValueError, IndexError) as e:
        raise UserError(str(e)) from None
    print(f"{readme}: {'updated' if changed else 'already up to date'}")
