"""The MoE ops as torch.library custom ops: torch.compile traces them whole (no graph break)."""

import torch

from moelab.ops import moe  # registers torch.ops.moelab.*

DEV = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the Triton interpreter (conftest)


def test_custom_ops_compile_without_graph_break():
    g = torch.Generator().manual_seed(0)
    T, E, H, I, k = 3, 8, 32, 16, 2
    x = torch.randn(T, H, generator=g).to(DEV)
    logits = torch.randn(T, E, generator=g).to(DEV)
    w13 = (torch.randn(E, 2 * I, H, generator=g) / H ** 0.5).to(DEV)
    w2 = (torch.randn(E, H, I, generator=g) / I ** 0.5).to(DEV)

    def layer(x, logits):
        w, ids = torch.ops.moelab.route(logits, k)
        return torch.ops.moelab.fused_moe(x, w13, w2, w, ids) * 2.0

    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)  # fullgraph: a break is an error
    out = compiled(x, logits)
    w, ids = moe.route_reference(logits, k)
    ref = moe.fused_moe_reference(x, w13, w2, w, ids) * 2.0
    assert float((out - ref).norm() / ref.norm()) < 1e-5
