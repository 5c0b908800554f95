"""q/k RMSNorm + RoPE kernel against the HF-numerics reference (CPU: Triton interpreter)."""

import pytest
import torch

from moelab import ops
from moelab.kernels.rope import _inv_freq, qk_norm_rope
from moelab.kernels.rope import rope as qk_rope
from moelab.ops.norm import rmsnorm_reference
from moelab.ops.rope import qk_norm_rope_reference, rope_inv_freq, rope_reference

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the Triton interpreter


def _inputs(t, hq, hk, d, dtype, seed=0, max_pos=4096):
    g = torch.Generator().manual_seed(seed)
    q = (2 * torch.randn(t, hq, d, generator=g)).to(dtype)
    k = torch.randn(t, hk, d, generator=g).to(dtype)
    qw = (1 + 0.2 * torch.randn(d, generator=g)).to(dtype)
    kw = (1 + 0.2 * torch.randn(d, generator=g)).to(dtype)
    pos = torch.randint(0, max_pos, (t,), generator=g)
    return q.to(DEV), k.to(DEV), qw.to(DEV), kw.to(DEV), pos.to(DEV)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "t,hq,hk,d,rot,offset",
    [
        (1, 32, 4, 128, None, False),  # Qwen3-30B-A3B decode
        (3, 16, 2, 256, 64, True),  # Qwen3-Next: partial rotary 0.25, (1 + w)
        (5, 6, 6, 64, 32, False),  # GQA ratio 1, partial
        (2, 5, 1, 12, None, True),  # odd head counts, non-power-of-two head_dim
    ],
)
def test_matches_reference(t, hq, hk, d, rot, offset, dtype, close):
    q, k, qw, kw, pos = _inputs(t, hq, hk, d, dtype)
    qo = torch.full(q.shape, float("nan"), dtype=dtype, device=DEV)
    ko = torch.full(k.shape, float("nan"), dtype=dtype, device=DEV)
    kw_ = dict(eps=1e-6, rope_theta=1e6, rotary_dim=rot, offset=offset)
    got_q, got_k = qk_norm_rope(q, k, qw, kw, pos, q_out=qo, k_out=ko, **kw_)
    ref_q, ref_k = qk_norm_rope_reference(q, k, qw, kw, pos, **kw_)
    assert got_q is qo and got_k is ko
    close(got_q, ref_q)
    close(got_k, ref_k)
    if rot is not None:
        # Dims beyond rotary_dim are only normalised (pass-through), never rotated.
        normed = rmsnorm_reference(q, qw, 1e-6, offset)
        close(got_q[..., rot:].contiguous(), normed[..., rot:].contiguous())


def test_long_positions_and_int32(close):
    # Angles up to ~131k rad: the fp32 product must be HF's, and cos/sin accurate at large arguments.
    q, k, qw, kw, _ = _inputs(4, 4, 2, 128, torch.float32)
    pos = torch.tensor([0, 1, 65537, 131071], dtype=torch.int32, device=DEV)
    got = qk_norm_rope(q, k, qw, kw, pos, eps=1e-6, rope_theta=1e6)
    # The reference on the CPU, as HF builds inv_freq: on a GPU the reference's inv_freq comes from CUDA's pow,
    # which can differ from the CPU's by an ulp — at 131k rad that moves an angle by ~1e-2 (H200, 2026-12-01:
    # 1.03e-5 against the on-GPU reference). The kernel's table is HF's CPU-built one.
    ref = qk_norm_rope_reference(*(t.cpu() for t in (q, k, qw, kw, pos)), eps=1e-6, rope_theta=1e6)
    close(got[0].cpu(), ref[0], tol=1e-5)
    close(got[1].cpu(), ref[1], tol=1e-5)


def test_non_contiguous_and_in_place(close):
    # q and k as views into one fused qkv projection output [T, (Hq + 2·Hk)·D], as engines produce them.
    t, hq, hk, d = 3, 8, 2, 64
    qkv = torch.randn(t, (hq + 2 * hk) * d).to(DEV, torch.float16)
    q = qkv[:, : hq * d].view(t, hq, d)
    k = qkv[:, hq * d : (hq + hk) * d].view(t, hk, d)
    qw, kw = torch.randn(d).to(DEV, torch.float16), torch.randn(d).to(DEV, torch.float16)
    pos = torch.tensor([7, 100, 3000], device=DEV)
    ref_q, ref_k = qk_norm_rope_reference(q, k, qw, kw, pos, eps=1e-6, rope_theta=1e4)
    assert not q.is_contiguous()
    got_q, got_k = qk_norm_rope(q, k, qw, kw, pos, eps=1e-6, rope_theta=1e4, q_out=q, k_out=k)
    assert got_q is q
    close(q, ref_q)
    close(k, ref_k)


def test_inv_freq_is_hfs_and_registry():
    assert torch.equal(_inv_freq(1e6, 64, torch.device("cpu")), rope_inv_freq(1e6, 64))
    assert ops.get("qk_norm_rope", "moelab") is qk_norm_rope


def test_empty_tokens():
    q, k, w = torch.empty(0, 4, 16, device=DEV), torch.empty(0, 2, 16, device=DEV), torch.ones(16, device=DEV)
    qo, ko = qk_norm_rope(q, k, w, w, torch.empty(0, dtype=torch.int64, device=DEV),
                          eps=1e-6, rope_theta=1e4)
    assert qo.shape == (0, 4, 16) and ko.shape == (0, 2, 16)


def test_errors():
    q, k, qw, kw, pos = _inputs(2, 4, 2, 16, torch.float32)
    args = dict(eps=1e-6, rope_theta=1e4)
    with pytest.raises(ValueError, match="must be \\[T, H, D\\]"):
        qk_norm_rope(q[0], k, qw, kw, pos, **args)
    with pytest.raises(ValueError, match="k has shape"):
        qk_norm_rope(q, k[:, :, :8], qw, kw, pos, **args)
    with pytest.raises(ValueError, match="rotary_dim 5"):
        qk_norm_rope(q, k, qw, kw, pos, rotary_dim=5, **args)
    with pytest.raises(ValueError, match="q_weight has shape"):
        qk_norm_rope(q, k, qw[:8], kw, pos, **args)
    with pytest.raises(ValueError, match="positions has shape"):
        qk_norm_rope(q, k, qw, kw, pos[:1], **args)
    with pytest.raises(TypeError, match="positions has dtype"):
        qk_norm_rope(q, k, qw, kw, pos.float(), **args)
    with pytest.raises(TypeError, match="q/k dtypes"):
        qk_norm_rope(q, k.half(), qw, kw, pos, **args)


def test_gpu_bf16_long_context(close):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (bf16 rounding and tl.cos/tl.sin of the real backend)")
    q, k, qw, kw, _ = _inputs(64, 32, 4, 128, torch.bfloat16)
    pos = torch.randint(0, 131072, (64,), device="cuda")
    for rot, offset in ((None, False), (32, True)):
        got = qk_norm_rope(q, k, qw, kw, pos, eps=1e-6, rope_theta=1e6, rotary_dim=rot, offset=offset)
        ref = qk_norm_rope_reference(q, k, qw, kw, pos, eps=1e-6, rope_theta=1e6, rotary_dim=rot, offset=offset)
        close(got[0], ref[0])
        close(got[1], ref[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rope_without_norm(dtype, close):
    q, k, _, _, pos = _inputs(3, 8, 2, 64, dtype, seed=3)
    for rot in (None, 16):
        got = qk_rope(q, k, pos, rope_theta=1e4, rotary_dim=rot)
        ref = rope_reference(q, k, pos, rope_theta=1e4, rotary_dim=rot)
        close(got[0], ref[0])
        close(got[1], ref[1])
    assert ops.get("rope", "moelab") is qk_rope
    with pytest.raises(ValueError, match="or neither"):
        qk_norm_rope(q, k, None, torch.ones(64, dtype=dtype, device=DEV), pos, eps=1e-6, rope_theta=1e4)


def test_reference_is_hf_qwen3_and_qwen3_next():
    # The reference must be Hugging Face's numerics to the bit, since the kernel is judged against it.
    tf = pytest.importorskip("transformers")
    from transformers.models.qwen3 import modeling_qwen3 as m3
    from transformers.models.qwen3_next import modeling_qwen3_next as mn

    t, hq, hk, d = 3, 4, 2, 128
    q, k, qw, kw, pos = (x.cpu() for x in _inputs(t, hq, hk, d, torch.bfloat16, seed=7, max_pos=40000))
    for module, norm_cls, cfg_cls, rot, offset in (
        (m3, m3.Qwen3RMSNorm, tf.Qwen3Config, d, False),
        (mn, mn.Qwen3NextRMSNorm, tf.Qwen3NextConfig, d // 4, True),
    ):
        cfg = cfg_cls(head_dim=d, num_attention_heads=hq, num_key_value_heads=hk, rope_theta=1e6,
                      partial_rotary_factor=rot / d)
        qn, kn = norm_cls(d, eps=1e-6), norm_cls(d, eps=1e-6)
        qn.weight.data, kn.weight.data = qw.float(), kw.float()
        qn, kn = qn.to(torch.bfloat16), kn.to(torch.bfloat16)
        rotary = module.__dict__[cfg_cls.__name__.replace("Config", "RotaryEmbedding")](cfg)
        with torch.no_grad():
            hq_, hk_ = qn(q).transpose(0, 1)[None], kn(k).transpose(0, 1)[None]  # [1, H, T, D]
            cos, sin = rotary(hq_, pos[None])
            want_q, want_k = module.apply_rotary_pos_emb(hq_, hk_, cos, sin)
        got_q, got_k = qk_norm_rope_reference(q, k, qw, kw, pos, eps=1e-6, rope_theta=1e6, rotary_dim=rot,
                                              offset=offset)
        assert torch.equal(got_q, want_q[0].transpose(0, 1)), module.__name__
        assert torch.equal(got_k, want_k[0].transpose(0, 1)), module.__name__


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("b,hq,hk,d,rot", [(1, 32, 4, 128, None), (3, 6, 2, 12, 8)])
def test_kv_variant_writes_the_cache(b, hq, hk, d, rot, dtype, norm, close):
    """qk_norm_rope_kv = qk_norm_rope, then the append: q comes back, k (normed, rotated) and v land at positions[b]
    of each sequence's cache rows, and nothing else in the cache changes."""
    s_max = 9
    q, k, qw, kw, _ = _inputs(b, hq, hk, d, dtype)
    v = torch.randn(b, hk, d, generator=torch.Generator().manual_seed(5)).to(dtype).to(DEV)
    pos = torch.tensor([8, 0, 3][:b], device=DEV)
    if not norm:
        qw = kw = None
    kc = torch.randn(b, hk, s_max, d, dtype=dtype, device=DEV)
    vc = torch.randn(b, hk, s_max, d, dtype=dtype, device=DEV)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    args = dict(eps=1e-6, rope_theta=1e6, rotary_dim=rot)
    got_q = ops.get("qk_norm_rope_kv", "moelab")(q, k, v, qw, kw, pos, kc, vc, **args)
    ref_q = ops.get("qk_norm_rope_kv", "eager")(q, k, v, qw, kw, pos, kc_ref, vc_ref, **args)
    close(got_q, ref_q)
    close(kc, kc_ref)
    assert torch.equal(vc, vc_ref)


def test_kv_variant_strided_views_int32_and_out_of_range_positions():
    """k and v as views of one fused qkv projection (as the engine makes them), int32 positions; a position outside
    the cache writes nothing (the kernel cannot raise from the device)."""
    b, hq, hk, d, s_max = 2, 4, 2, 16, 8
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(b, hq + 2 * hk, d, generator=g).to(DEV)
    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hk], qkv[:, hq + hk:]
    qw, kw = (1 + 0.1 * torch.randn(d, generator=g)).to(DEV), (1 + 0.1 * torch.randn(d, generator=g)).to(DEV)
    f, ref = ops.get("qk_norm_rope_kv", "moelab"), ops.get("qk_norm_rope_kv", "eager")
    args = dict(eps=1e-6, rope_theta=1e4)
    kc, vc = torch.randn(b, hk, s_max, d, device=DEV), torch.randn(b, hk, s_max, d, device=DEV)
    kc2, vc2 = kc.clone(), vc.clone()
    pos = torch.tensor([5, 0], dtype=torch.int32, device=DEV)
    torch.testing.assert_close(f(q, k, v, qw, kw, pos, kc, vc, **args), ref(q, k, v, qw, kw, pos, kc2, vc2, **args))
    torch.testing.assert_close(kc, kc2)
    assert torch.equal(vc, vc2) and torch.equal(vc[torch.arange(b), :, pos.long()], v)
    before_k, before_v = kc.clone(), vc.clone()
    f(q, k, v, qw, kw, torch.tensor([s_max, -1], device=DEV), kc, vc, **args)
    assert torch.equal(kc, before_k) and torch.equal(vc, before_v)


@pytest.mark.parametrize("impl", ["eager", "moelab"])
@pytest.mark.parametrize("what,match", [("k_shape", r"\bk (has shape|must be)"), ("v_shape", r"v must be \[2, 2, 16\]"),
                                         ("v_dtype", "v is torch.float16"), ("pos_shape", r"positions (has shape \(1,\)|must be \[2\])"),
                                         ("cache", "one shape")])
def test_kv_variant_bad_input_names_it(impl, what, match):
    q, k, qw, kw, pos = _inputs(2, 4, 2, 16, torch.float32)
    v, kc = k.clone(), torch.zeros(2, 2, 5, 16, device=DEV)
    vc = kc.clone()
    if what == "k_shape":
        k = k[:, :, :8]
    elif what == "v_shape":
        v = v[:, :1]
    elif what == "v_dtype":
        v = v.half()
    elif what == "pos_shape":
        pos = pos[:1]
    else:
        vc = vc[:, :1]
    with pytest.raises(ValueError, match=match):
        ops.get("qk_norm_rope_kv", impl)(q, k, v, qw, kw, pos, kc, vc, eps=1e-6, rope_theta=1e4)


def test_kv_variant_errors():
    q, k, qw, kw, pos = _inputs(2, 4, 2, 16, torch.float32)
    kc = torch.zeros(2, 2, 5, 16, device=DEV)
    f = ops.get("qk_norm_rope_kv", "moelab")
    with pytest.raises(ValueError, match="the cache torch.float16"):
        f(q, k, k, qw, kw, pos, kc.half(), kc.half(), eps=1e-6, rope_theta=1e4)
    hb = kc.bfloat16()  # bf16 activations with fp32 norm weights normalise to fp32: not the cache's dtype
    with pytest.raises(ValueError, match="the cache is torch.bfloat16 but normalised k is torch.float32"):
        f(q.bfloat16(), k.bfloat16(), k.bfloat16(), qw, kw, pos, hb, hb.clone(), eps=1e-6, rope_theta=1e4)


def test_compiles_for_sm90_kv_variant(sm90):
    job = sm90["qk_norm_rope_kv"]
    assert "error" not in job, job.get("error")


def test_compiles_for_sm90_with_one_kv_head(sm90):
    # Hk = 1 (Qwen3 at tensor-parallel 4) is a compile-time constant on the k side only; it must compile.
    # cos/sin must be libdevice's accurate ones (full range reduction), not cos.approx.
    job = sm90["qk_norm_rope_hk1"]
    assert "error" not in job, job.get("error")
    assert "cos.approx" not in job["ptx"] and "__nv_cosf" in job["ptx"]
