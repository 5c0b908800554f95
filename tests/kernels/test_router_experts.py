"""`router_experts`: the decode MoE layer from its normed input (router, then experts; at T=1 on a Hopper GPU the
pair kernel starts while the router runs and waits on its flag). CPU: the Triton interpreter (no PDL: the two
launch one after the other); the early start itself compiles for sm_90 here and runs on the GPU tests."""

import pytest
import torch

from moelab import ops
from moelab.kernels import counters
from moelab.kernels.moe import early_start, router_experts
from moelab.ops.moe import router_experts_reference

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _layer(T, E, H, I, dtype, shared=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = lambda *s, scale=1.0: (torch.randn(*s, generator=g) * scale).to(dtype).to(DEV)  # noqa: E731
    sh = (t(2 * I, H, scale=H ** -0.5), t(H, I, scale=I ** -0.5), t(1, H, scale=H ** -0.5)) if shared else None
    return t(T, H), t(E, H, scale=H ** -0.5), t(E, 2 * I, H, scale=H ** -0.5), t(E, H, I, scale=I ** -0.5), sh


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("T,E,H,I,k,shared", [(1, 16, 64, 48, 4, False), (1, 32, 96, 40, 8, True),
                                               (1, 8, 64, 16, 2, False)])
def test_matches_the_composed_references(T, E, H, I, k, shared, dtype, close):
    for seed in range(3):
        x, rw, w13, w2, sh = _layer(T, E, H, I, dtype, shared, seed)
        out, tw, ids = router_experts(x, rw, w13, w2, k, "softmax", True, sh)
        ref, rtw, rids = router_experts_reference(x, rw, w13, w2, k, "softmax", True, sh)
        assert torch.equal(ids.long().sort(-1).values, rids.long().sort(-1).values)
        close(out, ref)


def test_registry_and_errors():
    assert ops.get("router_experts", "eager") is router_experts_reference
    x, rw, w13, w2, _ = _layer(1, 16, 64, 48, torch.float32)
    with pytest.raises(ValueError, match="the router has 8 experts, w13 16"):
        router_experts(x, rw[:8], w13, w2, 4)
    with pytest.raises(ValueError, match="more than the fused router"):
        router_experts(x.repeat(17, 1), rw, w13, w2, 4)


def test_early_start_only_where_it_applies(monkeypatch):
    x, rw, w13, w2, sh = _layer(1, 16, 64, 256, torch.float32, shared=True)
    from moelab.kernels import moe
    monkeypatch.setattr("moelab.kernels.pdl_supported", lambda device: True)
    assert early_start(x, w2, sh)  # T=1 on the pair kernel's path
    assert not early_start(x.repeat(2, 1), w2, sh)  # T=2: the router and the experts launch one after the other
    assert not early_start(x, w2[:, :, :moe.T1_MAX_I], None)  # narrow experts, no shared one: moe_t1's path
    monkeypatch.setenv("MOELAB_EARLY_EXPERTS", "0")
    assert not early_start(x, w2, sh)


def test_gpu_early_start_matches_and_resets_its_flag(close):
    # Qwen3-30B-A3B's layer in bf16, eager and graph-replayed with a new input each time: every answer matches the
    # reference, and the router's flag is back at 0 after each call (else the next pair kernel would start early).
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (PDL, the flag protocol)")
    x, rw, w13, w2, _ = _layer(1, 128, 2048, 768, torch.bfloat16)
    assert early_start(x, w2, None)
    flag = counters(x.device, 2, "router")[1:2]
    for seed in range(3):
        x.copy_(torch.randn_like(x))
        out = router_experts(x, rw, w13, w2, 8)[0]
        torch.cuda.synchronize()
        assert flag.item() == 0
        close(out, router_experts_reference(x, rw, w13, w2, 8)[0])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = router_experts(x, rw, w13, w2, 8)[0]
    for seed in range(5):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert flag.item() == 0
        close(out, router_experts_reference(x, rw, w13, w2, 8)[0])


def test_compiles_for_sm90_with_the_flag_protocol(sm90):
    pairs, rt = sm90["moe_pairs_early"], sm90["router_signal"]
    assert "error" not in pairs, pairs.get("error")
    assert "error" not in rt, rt.get("error")
    # the pair kernel acquires the flag (and the slot counters), and waits on the router's grid only at the end
    assert pairs["ptx"].count(".acquire") >= 2 and "griddepcontrol.wait" in pairs["ptx"]
    # the router releases its dependents as it starts and publishes the routing with a release exchange
    assert "griddepcontrol.launch_dependents" in rt["ptx"] and "release.exch" in rt["ptx"]
