"""The L2 prefetch's byte arithmetic (the instruction itself is inline PTX: compiled for sm_90 in
test_attention.py::test_compiles_for_sm90_kv_fused, run on the GPU by the attention GPU tests)."""

import pytest
import torch

from moelab.kernels import prefetch
from moelab.kernels.prefetch import PF, prefetch_args


def test_nothing_to_prefetch_or_no_device():
    assert prefetch_args(None, 64) == (None, 0, 16)
    assert prefetch_args(torch.zeros(8), 64) == (None, 0, 16)  # CPU / the interpreter: never


@pytest.mark.parametrize("n,programs", [(2048 * 4096, 64), (16, 1), (1000, 3), (151936 * 2048, 132), (48, 256)])
def test_pieces_cover_the_tensor_in_16_byte_multiples(monkeypatch, n, programs):
    monkeypatch.setattr(prefetch, "pdl_supported", lambda device: True)
    t = torch.zeros(n // 2, dtype=torch.bfloat16)
    got, nbytes, chunk = prefetch_args(t, programs)
    assert got is t and nbytes == n
    assert chunk % 16 == 0 and chunk >= 16
    assert programs * PF * chunk >= n  # every byte is in some program's pieces
    assert chunk == 16 or programs * PF * (chunk - 16) < n  # and the pieces are no bigger than that needs
    monkeypatch.setenv("MOELAB_PREFETCH", "0")
    assert prefetch_args(t, programs) == (None, 0, 16)


def test_non_contiguous_is_refused(monkeypatch):
    monkeypatch.setattr(prefetch, "pdl_supported", lambda device: True)
    with pytest.raises(ValueError, match="must be contiguous"):
        prefetch_args(torch.zeros(64, 64)[:, :8], 4)
