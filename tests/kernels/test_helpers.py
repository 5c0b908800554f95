"""The launchers' host-side helpers give what Triton's would (they exist because Triton 3.9's are slow from Python)."""

import triton

from moelab.kernels import cdiv, next_pow2


def test_cdiv_and_next_pow2_match_triton():
    assert all(next_pow2(n) == triton.next_power_of_2(n) for n in range(0, 5000))
    assert all(next_pow2(1 << k) == 1 << k and next_pow2((1 << k) + 1) == 1 << (k + 1) for k in range(1, 40))
    assert all(cdiv(a, b) == triton.cdiv(a, b) for a in range(-40, 600) for b in range(1, 40))
