"""The greedy end of a decode step in one launch (argmax + the token written back) against its reference."""

import pytest
import torch

from moelab import kernels, ops
from moelab.kernels.sample import BLOCK, greedy_emit
from moelab.ops.sample import greedy_emit_reference

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _state(B, N=6, step=2):
    return (torch.zeros(B, dtype=torch.long, device=DEV), torch.full((B, N), -1, dtype=torch.long, device=DEV),
            torch.tensor(step, device=DEV), torch.arange(B, device=DEV) + 10)


def _both(logits, calls=2, **kw):
    """(kernel state, reference state) after `calls` calls each, from the same start."""
    got, want = _state(logits.shape[0], **kw), _state(logits.shape[0], **kw)
    for _ in range(calls):
        greedy_emit(logits, *got)
        greedy_emit_reference(logits, *want)
    return got, want


def _same(got, want):
    for name, g, w in zip(("tok", "out", "step", "pos"), got, want):
        assert torch.equal(g, w), (name, g, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("B,V", [(1, 151936), (3, 5000), (2, BLOCK), (5, BLOCK + 1), (1, 1), (8, 77)])
def test_matches_torch_argmax(B, V, dtype):
    g = torch.Generator().manual_seed(B * 7 + V)
    logits = torch.randn(B, V, generator=g).to(dtype).to(DEV)
    _same(*_both(logits))


def test_ties_nan_and_infinities_as_torch():
    """The lowest index among equal maxima, across chunks too; a NaN beats every number (the first NaN); a row of
    -inf gives 0; a row of equal values gives 0; +inf beats numbers but not NaN."""
    V = 3 * BLOCK + 5
    logits = torch.randn(6, V)
    logits[0, [BLOCK + 3, 2 * BLOCK + 1]] = 50.0  # a tie in two chunks
    logits[1, [BLOCK + 9, 5]] = float("nan")
    logits[2] = -float("inf")
    logits[3] = 1.0
    logits[4, [7, 2 * BLOCK]] = float("inf")
    logits[5, 3], logits[5, 3 * BLOCK + 2] = float("inf"), float("nan")
    got, want = _both(logits.to(DEV))
    _same(got, want)
    assert got[0].tolist() == [BLOCK + 3, 5, 0, 0, 7, 3 * BLOCK + 2]


def test_strided_logits_and_counters_reset():
    """Rows with a stride past V (a view of a wider buffer); every counter back at zero afterwards, so the next call
    (and the next graph replay) needs no memset."""
    wide = torch.randn(3, 9000, device=DEV)
    _same(*_both(wide[:, 100:8100], calls=3))
    for (_, owner), c in kernels._COUNTERS.items():
        if owner == "sample":
            assert int(c.count_nonzero()) == 0


def test_step_out_of_range_writes_nothing():
    logits = torch.randn(2, 300, device=DEV)
    tok, out, step, pos = _state(2, N=4, step=4)
    greedy_emit(logits, tok, out, step, pos)
    assert (out == -1).all() and int(step) == 5 and torch.equal(tok, logits.argmax(-1))


def test_registered_and_errors():
    assert ops.get("greedy_emit", "moelab") is greedy_emit and ops.get("greedy_emit", "eager") is greedy_emit_reference
    logits = torch.randn(2, 50, device=DEV)
    tok, out, step, pos = _state(2)
    with pytest.raises(ValueError, match="logits must be a float"):
        greedy_emit(logits.long(), tok, out, step, pos)
    with pytest.raises(ValueError, match="tok must be int64"):
        greedy_emit(logits, tok.int(), out, step, pos)
    with pytest.raises(ValueError, match="pos must be int64"):
        greedy_emit(logits, tok, out, step, pos[:1])
    with pytest.raises(ValueError, match="step must be int64"):
        greedy_emit(logits, tok, out, step.view(1), pos)
    with pytest.raises(ValueError, match="out must be int64"):
        greedy_emit(logits, tok, out[:1], step, pos)
    with pytest.raises(ValueError, match="vocabulary size 0"):
        greedy_emit(logits[:, :0], tok, out, step, pos)


def test_compiles_for_sm90(sm90):
    """For an H200 on the CPU: the arrival counters are real acq_rel atomics and the partials come back through L2."""
    job = sm90["greedy_emit"]
    assert "error" not in job, job.get("error")
    ptx = job["ptx"]
    assert "atom.global.gpu.acq_rel" in ptx or "atom.acq_rel.gpu" in ptx
    assert "ld.global.cg" in ptx
