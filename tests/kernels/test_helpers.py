"""The launchers' host-side helpers give what Triton's would (they exist because Triton 3.9's are slow from Python)."""

import triton

from moelab.kernels import cdiv, next_pow2


def test_cdiv_and_next_pow2_match_triton():
    assert all(next_pow2(n) == triton.next_power_of_2(n) for n in range(0, 5000))
    assert all(next_pow2(1 << k) == 1 << k and next_pow2((1 << k) + 1) == 1 << (k + 1) for k in range(1, 40))
    assert all(cdiv(a, b) == triton.cdiv(a, b) for a in range(-40, 600) for b in range(1, 40))


def test_a_cpu_tensor_without_the_interpreter_is_a_named_error(monkeypatch):
    """On a machine with a GPU, a CPU tensor would reach Triton's launcher ("Pointer argument cannot be accessed"):
    each public launcher refuses it first, naming itself and the argument. Checked before any launch, so here too."""
    import pytest
    import torch

    from moelab.kernels.attention import decode_attention
    from moelab.kernels.linear import linear
    from moelab.kernels.moe import fused_moe
    from moelab.kernels.rmsnorm import rmsnorm
    from moelab.kernels.rope import rope
    from moelab.kernels.route import route
    from moelab.kernels.router import router
    from moelab.kernels.sample import greedy_emit

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x, w = torch.randn(2, 64), torch.randn(8, 64)
    ids = torch.zeros(2, 2, dtype=torch.int32)
    q, kc = torch.randn(2, 4, 16), torch.randn(2, 2, 8, 16)
    calls = {
        "route: router_logits": lambda: route(torch.randn(2, 8), 2),
        "router: x": lambda: router(x, w, 2),
        "linear: x": lambda: linear(x, w),
        "fused_moe: x": lambda: fused_moe(x, torch.randn(8, 32, 64), torch.randn(8, 64, 16), torch.ones(2, 2), ids),
        "add_rmsnorm: x": lambda: rmsnorm(x, torch.ones(64), 1e-6),
        "qk_norm_rope: q": lambda: rope(q, q, torch.arange(2), rope_theta=1e4),
        "decode_attention: q": lambda: decode_attention(q, kc, kc, torch.tensor([3, 5], dtype=torch.int32)),
        "greedy_emit: logits": lambda: greedy_emit(torch.randn(2, 50), torch.zeros(2, dtype=torch.int64),
                                                   torch.zeros(2, 4, dtype=torch.int64),
                                                   torch.zeros((), dtype=torch.int64), torch.zeros(2, dtype=torch.int64)),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"^{name} is on cpu; moelab's Triton kernels need a CUDA tensor"):
            call()
