"""Qwen3.5's attention output gate kernel against its reference (CPU: the Triton interpreter; bf16 there is held to
TOL, since the interpreter rounds fp32 -> bf16 toward zero)."""

import pytest
import torch

from moelab import ops
from moelab.kernels.gate import attn_gate
from moelab.ops.attention import attn_gate_reference

DEV = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("T,H,D", [(1, 16, 256), (3, 4, 40), (2, 1, 7)])
def test_matches_reference_on_the_gate_half_of_q_rows(T, H, D, dtype, close):
    g = torch.Generator().manual_seed(T * H + D)
    qg = torch.randn(T, H, 2 * D, generator=g).to(dtype).to(DEV)  # q_proj's rows: [q | gate] per head
    out = torch.randn(T, H * D, generator=g).to(dtype).to(DEV)
    got = attn_gate(out, qg[..., D:])
    assert got.shape == out.shape and got.is_contiguous()
    close(got, attn_gate_reference(out, qg[..., D:]))


def test_registered_and_errors():
    assert ops.get("attn_gate", "moelab") is attn_gate
    out, gate = torch.randn(2, 8, device=DEV), torch.randn(2, 2, 4, device=DEV)
    with pytest.raises(ValueError, match=r"out must be \[T, H·D\] for gate \[T, H, D\]"):
        attn_gate(out[:, :6], gate)
    with pytest.raises(ValueError, match="share dtype and device"):
        attn_gate(out.half(), gate)
    assert attn_gate(out[:0], gate[:0]).shape == (0, 8)


def test_compiles_for_sm90_in_the_chain(sm90):
    for name in ("attn_gate", "attn_gate_pdl"):
        assert "error" not in sm90[name], (name, sm90[name].get("error"))
    assert "griddepcontrol" not in sm90["attn_gate"]["ptx"]
    ptx = sm90["attn_gate_pdl"]["ptx"]
    assert ptx.index("griddepcontrol.launch_dependents") < ptx.index("griddepcontrol.wait") < ptx.index("ld.global")
