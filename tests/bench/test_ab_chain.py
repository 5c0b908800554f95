"""ab_chain's variant syntax, and its refusal of a switch that nothing in src/moelab reads (timing needs a GPU)."""

import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # before anything imports triton (the benchmark imports the engine)
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from ab_chain import parse_variants  # noqa: E402


def test_variants_with_values():
    assert parse_variants("base,off=MOELAB_PDL:0") == [("base", ()), ("off", ("MOELAB_PDL:0",))]


@pytest.mark.parametrize("bad,msg", [("x=PDL", "not a MOELAB_"), ("x=MOELAB_NOTHING_READS_THIS", "read nowhere")])
def test_bad_switches_are_refused(bad, msg):
    with pytest.raises(SystemExit, match=msg):
        parse_variants(f"base,{bad}")
