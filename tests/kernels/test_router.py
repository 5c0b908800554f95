"""The one-launch router (logits GEMV + top-k) against its reference (CPU: Triton interpreter)."""

import re

import pytest
import torch

from moelab import ops
from moelab.kernels.router import ROUTER_MAX_T, router
from moelab.ops.moe import router_reference

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _case(T, E, H, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g).to(dtype).to(DEV)
    w = (torch.randn(E, H, generator=g) * H ** -0.5).to(dtype).to(DEV)
    return x, w


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("T,E,H,k", [(1, 128, 256, 8), (3, 60, 100, 4), (16, 8, 64, 2), (5, 256, 64, 8), (2, 7, 33, 7), (8, 128, 2048, 8)])
@pytest.mark.parametrize("scoring,renorm", [("softmax", True), ("softmax", False), ("topk_softmax", True)])
def test_router_matches_reference(T, E, H, k, dtype, scoring, renorm):
    for seed in range(4):
        x, w = _case(T, E, H, dtype, seed)
        tw, ids = router(x, w, k, scoring, renorm)
        rw, rids = router_reference(x, w, k, scoring, renorm)
        # The logits are rounded to x's dtype in both; a last-bit difference in the fp32 sum before that rounding
        # can still swap two experts at a near-tie, so ids are compared as sets per token where values differ.
        if not torch.equal(ids, rids):
            assert (ids.sort(1).values == rids.sort(1).values).float().mean() > 0.9
            continue
        torch.testing.assert_close(tw, rw, rtol=1e-5, atol=1e-6)


def test_router_deepseek_sigmoid_grouped():
    x, w = _case(4, 64, 96, torch.float32, 0)
    bias = torch.randn(64, device=DEV) * 0.1
    kw = dict(correction_bias=bias, n_group=8, topk_group=4, scaling=2.5)
    tw, ids = router(x, w, 6, "sigmoid", True, **kw)
    rw, rids = router_reference(x, w, 6, "sigmoid", True, **kw)
    assert torch.equal(ids, rids)
    torch.testing.assert_close(tw, rw, rtol=1e-5, atol=1e-6)


def test_router_repeat_calls_reset_the_counter():
    x, w = _case(2, 32, 64, torch.float32, 1)
    a = router(x, w, 4)
    b = router(x, w, 4)  # would deadlock or misfire if the arrival counter were left non-zero
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_router_is_registered_and_errors_are_clear():
    x, w = _case(2, 16, 32, torch.float32, 0)
    assert ops.get("router", "moelab") is not None and ops.get("router", "eager") is router_reference
    with pytest.raises(ValueError, match="same H"):
        router(x, w[:, :8], 2)
    with pytest.raises(ValueError, match="weight is torch.float16"):
        router(x, w.half(), 2)
    with pytest.raises(ValueError, match="k must be"):
        router(x, w, 17)
    with pytest.raises(ValueError, match=f"T ≤ {ROUTER_MAX_T}"):
        router(torch.zeros(ROUTER_MAX_T + 1, 32, device=DEV), w, 2)
    tw, ids = router(x[:0], w, 2)
    assert tw.shape == (0, 2) and ids.shape == (0, 2)


def test_router_compiles_for_sm90(sm90):
    """Compiled for an H200 on the CPU: the last arriver's acquire is a real atomic, the weight loads are 16 B wide."""
    assert "error" not in sm90["router"], sm90["router"].get("error")
    ptx = sm90["router"]["ptx"]
    assert "atom.global.gpu.acq_rel" in ptx
    assert "ld.global.L1::no_allocate.L2::evict_first.v4" in ptx or ".v4." in ptx
    assert "griddepcontrol.wait" in ptx  # launched with PDL: the weight chunk is requested before the wait
    # At T ≤ CHAIN_MAX_T it releases the pair kernel as it starts (kernels.chain_pdl).
    assert ptx.index("griddepcontrol.launch_dependents") < ptx.index("griddepcontrol.wait")


@pytest.mark.parametrize("job,rows", [("router_t16", 16), ("router_t8", 8), ("router_t2", 2)])
def test_router_compiles_for_sm90_above_one_row(sm90, job, rows):
    """The launches above T=1: the last arriver's [T, E] routing tile compiles; in the PDL chain (every row count here
    since CHAIN_MAX_T became 16) the kernel releases the experts' kernel before its own wait, beyond it nothing early."""
    from moelab.kernels import CHAIN_MAX_T
    assert "error" not in sm90[job], sm90[job].get("error")
    ptx = sm90[job]["ptx"]
    assert "atom.global.gpu.acq_rel" in ptx and "griddepcontrol.wait" in ptx
    if rows <= CHAIN_MAX_T:  # the jobs' TRIGGER is what router() passes: chain_pdl(device, T) on a Hopper GPU
        assert ptx.index("griddepcontrol.launch_dependents") < ptx.index("griddepcontrol.wait")
    else:
        assert "griddepcontrol.launch_dependents" not in ptx


@pytest.mark.parametrize("job,rows", [("router_t16", 16), ("router_t8", 8), ("router_t2", 2)])
def test_router_jobs_compile_what_router_config_launches(job, rows):
    """The sm_90 jobs above are the launches `router_config` picks at Qwen3-30B-A3B's E=128, H=2048 (so a tuning
    change that outgrows the registers shows up here): T=8 reads all of H in one chunk on 8 warps."""
    from tests.kernels.conftest import SM90_JOBS
    from moelab.kernels.router import router_config
    cfg = router_config(rows, 128, 2048)
    consts, opts = SM90_JOBS[job][3], (SM90_JOBS[job][5] if len(SM90_JOBS[job]) > 5 else {})
    assert consts["BLOCK_H"] == cfg["BLOCK_H"] and consts["BLOCK_E"] == cfg["BLOCK_E"]
    assert opts.get("num_warps", 4) == cfg["num_warps"]
    if rows == 8:
        assert cfg == dict(BLOCK_E=1, BLOCK_H=2048, num_warps=8)


@pytest.mark.parametrize("T,E,H,k,dtype,res", [(1, 16, 96, 4, torch.float32, True), (3, 16, 80, 2, torch.float16, True),
                                               (8, 60, 64, 4, torch.float32, False), (1, 128, 2048, 8, torch.float32, True)])
def test_add_rmsnorm_router_matches_the_two_ops(T, E, H, k, dtype, res):
    """The post-attention norm inside the router's launch: the normalised rows and the new residual as `add_rmsnorm`
    gives them, the routing as the reference gives it from those rows, odd H (a masked chunk), with and without a
    residual; the counter reset (a second call agrees); bad arguments named before any launch."""
    from moelab import ops
    from moelab.kernels import counters
    from moelab.kernels.router import add_rmsnorm_router
    g = torch.Generator().manual_seed(T * E + H)
    h = torch.randn(T, H, generator=g).to(dtype).to(DEV)
    r = torch.randn(T, H, generator=g).to(dtype).to(DEV) if res else None
    nw = (1 + 0.1 * torch.randn(H, generator=g)).to(dtype).to(DEV)
    w = (torch.randn(E, H, generator=g) * H ** -0.5).to(dtype).to(DEV)
    x, new_res, tw, ids = add_rmsnorm_router(h, r, nw, 1e-6, w, k)
    xr, rr = ops.get("add_rmsnorm", "eager")(h, r, nw, 1e-6)
    tol = 1e-6 if dtype == torch.float32 else 1e-3
    assert (x.float() - xr.float()).abs().max() <= tol * xr.float().abs().max()
    assert torch.equal(new_res, rr)
    rw, rids = router_reference(x, w, k)  # from the rows it stored: the same routing
    assert torch.equal(ids.long(), rids.long()) and torch.allclose(tw, rw.float(), rtol=1e-4, atol=1e-6)
    again = add_rmsnorm_router(h, r, nw, 1e-6, w, k)
    assert all(torch.equal(a, b) for a, b in zip((x, new_res, tw, ids), again))
    assert int(counters(x.device, 1, "router")[0]) == 0
    assert ops.get("add_rmsnorm_router", "eager")(h, r, nw, 1e-6, w, k)[3].shape == (T, k)
    with pytest.raises(ValueError, match="norm_weight must be"):
        add_rmsnorm_router(h, r, nw[:-1], 1e-6, w, k)
    with pytest.raises(ValueError, match="residual is"):
        add_rmsnorm_router(h, h[:, :-1], nw, 1e-6, w, k)


def test_router_norm_compiles_for_sm90(sm90):
    """The engine's fused form at T=1: the router and norm weights are requested before the PDL wait, h and the
    residual only after it; program 0's stores of the rows and the residual, and the last arriver's acquire."""
    assert "error" not in sm90["router_norm"], sm90["router_norm"].get("error")
    ptx = sm90["router_norm"]["ptx"]
    wait = ptx.index("griddepcontrol.wait")
    assert ptx.count("ld.global", 0, wait) >= 2  # the router row and the norm weight
    assert "atom.global.gpu.acq_rel" in ptx and "st.global" in ptx


def test_fused_router_rows_depend_on_the_experts(monkeypatch):
    """The one-launch router up to 8 rows for at most 128 experts, one row beyond (dense + route measured faster at
    E=256 from two rows); MOELAB_FUSED_ROUTER_MAX_T overrides both, never beyond ROUTER_MAX_T."""
    from moelab.kernels.router import ROUTER_MAX_T, fused_router_max_t
    monkeypatch.delenv("MOELAB_FUSED_ROUTER_MAX_T", raising=False)
    assert fused_router_max_t(64) == fused_router_max_t(128) == 8
    assert fused_router_max_t(256) == fused_router_max_t(512) == 1
    monkeypatch.setenv("MOELAB_FUSED_ROUTER_MAX_T", "4")
    assert fused_router_max_t(128) == fused_router_max_t(256) == 4
    monkeypatch.setenv("MOELAB_FUSED_ROUTER_MAX_T", "64")
    assert fused_router_max_t(256) == ROUTER_MAX_T


@pytest.mark.parametrize("T,E,k", [(1, 128, 8), (3, 60, 4), (8, 256, 8), (2, 7, 7), (1, 64, 6)])
@pytest.mark.parametrize("scoring,bias", [("softmax", False), ("topk_softmax", False), ("sigmoid", False),
                                          ("sigmoid", True)])
def test_bitonic_topk_chooses_as_the_rounds(T, E, k, scoring, bias, monkeypatch):
    """$MOELAB_ROUTE_BITONIC and $MOELAB_ROUTER_BITONIC (`tl.topk` of int64 keys, no rounds): bitwise the same weights and ids as the K arg-max
    rounds, in `route` and in the router's last arriver, renormalised or not, with ties (repeated logits, +0.0 beside
    -0.0, every logit equal in one row), negative logits and k not a power of two; with a correction bias the rounds
    run either way."""
    from moelab.kernels.route import route

    g = torch.Generator().manual_seed(T * E + k)
    logits = torch.randn(T, E, generator=g)
    logits[0, 1::3] = logits[0, 0]  # a tie of many
    if T > 1:
        logits[1] = 0.5
    if T > 2:
        logits[2, : E // 2] = -0.0  # equal to +0.0: the lower indices must win
        logits[2, E // 2:] = 0.0
    logits = logits.to(DEV)
    x, w = _case(T, E, 64, torch.float32, 0)
    kw = dict(correction_bias=torch.randn(E, generator=g).to(DEV) * 0.1) if bias else {}
    for renorm in (True, False):
        got = {}
        for bitonic in ("0", "1"):
            monkeypatch.setenv("MOELAB_ROUTE_BITONIC", bitonic)
            monkeypatch.setenv("MOELAB_ROUTER_BITONIC", bitonic)
            got[bitonic] = (route(logits, k, scoring, renorm, **kw), router(x, w, k, scoring, renorm, **kw))
        for (a_w, a_i), (b_w, b_i) in zip(got["0"], got["1"]):
            assert torch.equal(a_i, b_i) and torch.equal(a_w, b_w), (scoring, renorm)
        rw, rids = ops.get("route", "eager")(logits, k, scoring, renorm, **kw)
        assert torch.equal(got["1"][0][1].long(), rids.long())  # the reference's choice, ties to the lower index


def test_bitonic_topk_compiles_for_sm90(sm90):
    """The BITONIC top-k in the router's last arriver (T=1, one warp, as the engine launches it at batch 1) compiles
    for sm_90 with 64-bit compares (the int64 keys) and no index-min reduction (`min.s32`, which the rounds have).
    (Triton 3.6, `benchmarks/regs_sm90.py --count shfl.sync`: 93 warp shuffles against 61, but after the softmax the
    rounds are 8 reductions of 5 dependent levels, the top-k 9 levels of 8 independent shuffles each.)"""
    bitonic, plain = sm90["router_norm_bitonic"], sm90["router_norm"]
    assert "error" not in bitonic, bitonic.get("error")
    assert re.search(r"setp\.\w+\.s64", bitonic["ptx"]) and "min.s32" not in bitonic["ptx"]
    assert "min.s32" in plain["ptx"]
