"""The timeline probes (kernels/probe.py, benchmarks/probe_timeline.py): on, a kernel reads the global clock; off,
its code carries no trace of them."""

import pytest


@pytest.mark.parametrize("job", ["attention_split", "attention_combine", "moe_pairs_backoff", "moe_pairs_direct_route"])
def test_probe_compiles_for_sm90_and_is_absent_when_off(sm90, job):
    on, off = sm90[job + "_probe"], sm90[job]
    assert "error" not in on, on.get("error")
    assert "error" not in off, off.get("error")
    assert "%globaltimer" in on["ptx"] and "%smid" in on["ptx"]
    assert "%globaltimer" not in off["ptx"] and "%smid" not in off["ptx"]
