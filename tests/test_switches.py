"""docs/switches.md lists every MOELAB_* variable the code reads, and only those; the defaults it states for the
switches backed by a module constant are that constant's value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "switches.md"
NAME = re.compile(r"MOELAB_[A-Z0-9_]*[A-Z0-9]")


def _read_in_code() -> set[str]:
    return {m for p in (ROOT / "src" / "moelab").rglob("*.py") for m in NAME.findall(p.read_text())}


def _table() -> dict[str, list[str]]:
    """{variable: the row's other cells} for every table row of the doc that names one variable first."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(MOELAB_[A-Z0-9_]+)`", cells[0]) if line.startswith("|") else None
        if m:
            rows[m.group(1)] = cells[1:]
    return rows


def test_every_variable_the_code_reads_is_listed_and_nothing_else():
    code, doc = _read_in_code(), set(_table())
    assert code - doc == set(), f"read in src/moelab but not listed in docs/switches.md: {sorted(code - doc)}"
    assert doc - code == set(), f"listed in docs/switches.md but read nowhere in src/moelab: {sorted(doc - code)}"


# Switches whose stated default is one module constant (the int in the table's first column after the name).
CONSTANTS = {
    "MOELAB_CHAIN_MAX_T": ("moelab.kernels", "CHAIN_MAX_T"),
    "MOELAB_CNT_STRIDE": ("moelab.kernels", "COUNTER_STRIDE"),
    "MOELAB_LINEAR_DOT_MIN_T": ("moelab.kernels.linear", "DOT_MIN_T"),
    "MOELAB_NORM_ROUTER_MAX_T": ("moelab.engine.model", "NORM_ROUTER_MAX_T"),
    "MOELAB_FUSED_ROUTER_MAX_T": ("moelab.kernels.router", "FUSED_ROUTER_MAX_T"),
    "MOELAB_ROUTER_TILE": ("moelab.kernels.router", "ROUTER_TILE"),
    "MOELAB_ROUTE_PDL": ("moelab.kernels.route", "ROUTE_PDL"),
    "MOELAB_ROUTE_BITONIC": ("moelab.kernels.route", "ROUTE_BITONIC"),
    "MOELAB_ROUTER_BITONIC": ("moelab.kernels.route", "ROUTER_BITONIC"),
    "MOELAB_PAIRS_SHARED_PF": ("moelab.kernels.moe_pairs", "PAIRS_SHARED_PF_MAX_T"),
    "MOELAB_PAIRS_NEXT_PF": ("moelab.kernels.moe_pairs", "PAIRS_NEXT_PF_MB"),
    "MOELAB_PAIRS_NEXT_PF_MAX_T": ("moelab.kernels.moe_pairs", "PAIRS_NEXT_PF_MAX_T"),
    "MOELAB_GDN_PDL": ("moelab.kernels.gdn", "GDN_PDL"),
    "MOELAB_GDN_CONV_IN_PROJ": ("moelab.engine.model", "GDN_CONV_IN_PROJ_MAX_T"),
}


@pytest.mark.parametrize("var", sorted(CONSTANTS))
def test_stated_defaults_are_the_code_s(var):
    import importlib

    module, const = CONSTANTS[var]
    stated = re.match(r"-?\d+", _table()[var][0])
    assert stated, f"docs/switches.md states no number as {var}'s default: {_table()[var][0]!r}"
    assert int(stated.group()) == int(getattr(importlib.import_module(module), const)), (var, const)
