"""Fused residual-add + RMSNorm kernel against the HF-casting reference (CPU: Triton interpreter)."""

import re

import pytest
import torch

from moelab import ops
from moelab.kernels.rmsnorm import add_rmsnorm, rmsnorm
from moelab.ops.norm import add_rmsnorm_reference, rmsnorm_reference

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the Triton interpreter
# The Triton interpreter rounds fp32 -> bf16 toward zero (the GPU rounds to nearest even), so bf16 sums are
# bit-exact only on a GPU; on CPU they are held to the bf16 tolerance instead.
EXACT_BF16 = torch.cuda.is_available()


def _same_sum(got, ref, close):
    if got.dtype == torch.bfloat16 and not EXACT_BF16:
        close(got, ref)
    else:
        assert torch.equal(got, ref)
SHAPES = [(1, 2048), (3, 2880), (5, 1000), (2, 7), (64, 128)]


def _inputs(t, h, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, h, generator=g).to(dtype)
    r = (3 * torch.randn(t, h, generator=g)).to(dtype)
    w = (1 + 0.1 * torch.randn(h, generator=g)).to(dtype)
    return x.to(DEV), r.to(DEV), w.to(DEV)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("offset", [False, True])
def test_add_rmsnorm_matches_reference(shape, dtype, offset, close):
    x, r, w = _inputs(*shape, dtype)
    out = torch.full(shape, float("nan"), dtype=dtype, device=DEV)
    res_out = torch.full(shape, float("nan"), dtype=dtype, device=DEV)
    got, got_res = add_rmsnorm(x, r, w, 1e-6, offset=offset, out=out, residual_out=res_out)
    ref, ref_res = add_rmsnorm_reference(x, r, w, 1e-6, offset=offset)
    assert got is out and got_res is res_out
    # The sum is one rounding of the same fp32 sum: it must be bit-exact.
    _same_sum(got_res, ref_res, close)
    close(got, ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_without_residual(dtype, close):
    x, _, w = _inputs(4, 2880, dtype, seed=1)
    got = rmsnorm(x, w, 1e-5)
    close(got, rmsnorm_reference(x, w, 1e-5))
    out, new_res = add_rmsnorm(x, None, w, 1e-5, offset=True)
    assert new_res is x
    close(out, rmsnorm_reference(x, w, 1e-5, offset=True))


def test_registered_kernel_is_this_kernel():
    assert ops.get("add_rmsnorm", "moelab") is add_rmsnorm
    assert ops.get("rmsnorm", "moelab") is rmsnorm
    assert ops.get("add_rmsnorm", "eager") is add_rmsnorm_reference


def test_non_contiguous_and_3d(close):
    base = torch.randn(6, 2, 2 * 1000).to(DEV, torch.float16)
    x = base[:, :, ::2]  # column stride 2, leading dims flatten to one
    r = torch.randn(6, 2, 1000).to(DEV, torch.float16)
    w = torch.randn(1000).to(DEV, torch.float16)
    got, got_res = add_rmsnorm(x, r, w, 1e-6)
    ref, ref_res = add_rmsnorm_reference(x, r, w, 1e-6)
    assert torch.equal(got_res, ref_res)
    close(got, ref)
    wt = torch.randn(2, 1000).to(DEV, torch.float16)[0]  # weight row of a bigger tensor: contiguous, fine
    close(rmsnorm(x, wt, 1e-6), rmsnorm_reference(x, wt, 1e-6))


def test_in_place_residual(close):
    x, r, w = _inputs(3, 1000, torch.bfloat16, seed=2)
    ref, ref_res = add_rmsnorm_reference(x, r, w, 1e-6)
    got, got_res = add_rmsnorm(x, r, w, 1e-6, residual_out=r)
    assert got_res is r
    _same_sum(r, ref_res, close)
    close(got, ref)


def test_mixed_weight_dtype_promotes_like_hf(close):
    x, r, _ = _inputs(2, 64, torch.bfloat16)
    w = torch.randn(64, device=DEV)  # fp32 weight: HF's `weight * h.to(bf16)` promotes to fp32
    got, _ = add_rmsnorm(x, r, w, 1e-6)
    ref, _ = add_rmsnorm_reference(x, r, w, 1e-6)
    assert got.dtype == torch.float32
    # fp32 output, but it carries the bf16 rounding of the normalised value: one bf16 rounding apart at most
    # where rsqrt differs in the last bit (GPU), or everywhere the interpreter truncates instead of rounding (CPU).
    close(got, ref, tol=1e-3 if EXACT_BF16 else 1e-2)


def test_empty_rows():
    x = torch.empty(0, 64, device=DEV)
    out, res = add_rmsnorm(x, torch.empty(0, 64, device=DEV), torch.ones(64, device=DEV), 1e-6)
    assert out.shape == (0, 64) and res.shape == (0, 64)


def test_errors(monkeypatch):
    x = torch.randn(2, 16, device=DEV)
    with pytest.raises(ValueError, match="weight has shape"):
        add_rmsnorm(x, None, torch.ones(15, device=DEV), 1e-6)
    ones = torch.ones(16, device=DEV)
    with pytest.raises(TypeError, match="x has dtype"):
        add_rmsnorm(x.to(torch.int32), None, ones, 1e-6)
    with pytest.raises(ValueError, match="residual is"):
        add_rmsnorm(x, x.half(), ones, 1e-6)
    with pytest.raises(ValueError, match="out must be"):
        add_rmsnorm(x, None, ones, 1e-6, out=x.half())
    with pytest.raises(ValueError, match="residual_out given"):
        add_rmsnorm(x, None, ones, 1e-6, residual_out=x)
    with pytest.raises(ValueError, match="hidden size"):
        add_rmsnorm(torch.randn(1, 40000, device=DEV), None, torch.ones(40000, device=DEV), 1e-6)
    with pytest.raises(ValueError, match="cannot be flattened"):
        add_rmsnorm(torch.randn(4, 3, 16, device=DEV).transpose(0, 1), None, ones, 1e-6)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="need a CUDA tensor"):
        add_rmsnorm(x.cpu(), None, ones.cpu(), 1e-6)


def test_gpu_bf16_hidden_2048_and_long_t(close):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (bf16 at T=4096 on the real kernel)")
    x, r, w = _inputs(4096, 2048, torch.bfloat16)
    got, got_res = add_rmsnorm(x, r, w, 1e-6)
    ref, ref_res = add_rmsnorm_reference(x, r, w, 1e-6)
    assert torch.equal(got_res, ref_res)
    close(got, ref)


def test_reference_is_hf_qwen3_and_qwen3_next_rmsnorm():
    pytest.importorskip("transformers")
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRMSNorm

    x, r, w = (t.cpu() for t in _inputs(3, 2048, torch.bfloat16, seed=5))
    for cls, offset in ((Qwen3RMSNorm, False), (Qwen3NextRMSNorm, True)):
        norm = cls(2048, eps=1e-6)
        norm.weight.data = w.float()
        norm = norm.to(torch.bfloat16)
        with torch.no_grad():
            want = norm(r + x)  # the decoder layer: hidden_states = residual + hidden_states, then the norm
        got, new_res = add_rmsnorm_reference(x, r, w, 1e-6, offset=offset)
        assert torch.equal(new_res, r + x)
        assert torch.equal(got, want), cls.__name__


def test_compiles_for_sm90_with_vector_loads(sm90):
    job = sm90["add_rmsnorm"]
    assert "error" not in job, job.get("error")
    assert "ld.global.v4" in job["ptx"]  # 16-byte loads: the row streams at full width
    ptx = job["ptx"]
    assert "griddepcontrol.launch_dependents" in ptx  # the early PDL trigger (kernels.pdl_supported)
    # PDL-launched in the chain (kernels.chain_pdl): the trigger first, and only the weight is read before the wait
    # (x and the residual are the previous kernel's output): a third of the row loads, and no store.
    wait = ptx.index("griddepcontrol.wait")
    assert ptx.index("griddepcontrol.launch_dependents") < wait
    before, after = (len(re.findall(r"ld\.global", part)) for part in (ptx[:wait], ptx[wait:]))
    assert before >= 1 and after == 2 * before and "st.global" not in ptx[:wait]
    plain = sm90["add_rmsnorm_plain"]  # batch > 2 and prefill: not PDL-launched, so no wait
    assert "error" not in plain, plain.get("error")
    assert "griddepcontrol.wait" not in plain["ptx"] and "griddepcontrol.launch_dependents" in plain["ptx"]
