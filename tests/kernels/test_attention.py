"""Flash-decoding attention kernel against the masked fp32 reference (CPU: Triton interpreter, fp32/fp16:
the interpreter cannot run a bf16 tl.dot, so bf16 is tested on a GPU only)."""

import pytest
import torch

from moelab import ops
from moelab.kernels.attention import decode_attention, decode_attention_kv
from moelab.ops.attention import decode_attention_kv_reference, decode_attention_reference

DTYPES = [torch.float32, torch.float16]
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the Triton interpreter


def _inputs(b, nq, hq, hk, s_max, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (b, hq, d) if nq == 1 else (b, nq, hq, d)
    q = torch.randn(shape, generator=g).to(dtype)
    k = torch.randn(b, hk, s_max, d, generator=g).to(dtype)
    v = torch.randn(b, hk, s_max, d, generator=g).to(dtype)
    return q.to(DEV), k.to(DEV), v.to(DEV)


def _run(q, k, v, lens, close, tol=None, **kw):
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    out = torch.full(q.shape, float("nan"), dtype=q.dtype, device=DEV)
    got = decode_attention(q, k, v, seq_lens, out=out, **kw)
    assert got is out
    ref_kw = {n: kw[n] for n in ("scale", "sinks", "window") if n in kw}
    return close(got, decode_attention_reference(q, k, v, seq_lens, **ref_kw), tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gqa", [1, 4, 8])
@pytest.mark.parametrize("splits", [None, 1, 5])
def test_per_sequence_lengths(gqa, splits, dtype, close):
    # Lengths 1, 17 and 300 with 16-key tiles: single key, a partial tile, and many tiles over 5 splits.
    q, k, v = _inputs(3, 1, 2 * gqa, 2, 320, 64, dtype)
    _run(q, k, v, [1, 17, 300], close, num_splits=splits, block_n=16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("merge", [True, False])
def test_split_merge_and_combine_agree(dtype, merge, close):
    """Up to MERGE_MAX_SPLITS splits the split kernel's last program per (sequence, KV head) merges them (no combine
    launch); merge=False takes the combine. Both against the reference: an empty split (length 17 over 4 splits of
    16-key tiles), a sink, speculative rows, a window; repeated calls (the counters reset); merge refused where its
    tile would not fit."""
    q, k, v = _inputs(3, 1, 8, 2, 320, 64, dtype, seed=9)
    for _ in range(2):
        _run(q, k, v, [300, 17, 1], close, num_splits=4, block_n=16, merge=merge)
    _run(q, k, v, [300, 17, 64], close, num_splits=3, block_n=16, merge=merge, sinks=torch.randn(8, device=DEV))
    _run(q, k, v, [300, 17, 64], close, num_splits=2, block_n=16, merge=merge, window=40)
    q3, k3, v3 = _inputs(2, 3, 8, 2, 100, 32, dtype, seed=4)
    _run(q3, k3, v3, [3, 97], close, num_splits=4, block_n=16, merge=merge)
    _run(q, k, v, [300, 17, 64], close, num_splits=8, block_n=16, merge=merge)  # [16, 8, 64]: the largest tile
    with pytest.raises(ValueError, match="merge needs rows × splits × head_dim ≤ 16384"):
        decode_attention(q, k, v, torch.tensor([300, 17, 1], dtype=torch.int32, device=DEV), num_splits=64,
                         block_n=16, merge=True)


def test_merge_is_the_default_up_to_four_splits(monkeypatch):
    """No combine launch for 2-4 splits by default; the combine beyond (and with merge=False)."""
    from moelab.kernels import attention as attn
    launched = []

    class Spy:
        def __init__(self, fn):
            self.fn = fn

        def __getitem__(self, grid):
            launched.append(grid)
            return self.fn[grid]

    monkeypatch.setattr(attn, "_combine_kernel", Spy(attn._combine_kernel))
    q, k, v = _inputs(1, 1, 8, 2, 128, 32, torch.float32)
    lens = torch.tensor([128], dtype=torch.int32, device=DEV)
    for splits, merge, combines in ((4, None, 0), (5, None, 1), (2, False, 1), (1, None, 0), (8, True, 0)):
        launched.clear()
        decode_attention(q, k, v, lens, num_splits=splits, block_n=16, merge=merge)
        assert len(launched) == combines, (splits, merge)


@pytest.mark.parametrize("dtype", DTYPES)
def test_long_shares_over_few_splits(dtype, close):
    # Many tiles a split, lengths that are no multiple of the tile or of the split count, with and without a window.
    q, k, v = _inputs(3, 1, 8, 2, 320, 32, dtype, seed=5)
    _run(q, k, v, [203, 64, 300], close, num_splits=3, block_n=16)
    _run(q, k, v, [203, 64, 300], close, num_splits=3, block_n=16, window=150)


@pytest.mark.parametrize("dtype", DTYPES)
def test_speculative_tokens_are_causal(dtype, close):
    # Q=3 new tokens per sequence; a sequence of exactly Q tokens sees a triangle.
    q, k, v = _inputs(2, 3, 8, 2, 100, 32, dtype, seed=1)
    _run(q, k, v, [3, 97], close, num_splits=4, block_n=16)
    _run(q, k, v, [3, 97], close, num_splits=1, block_n=16)


@pytest.mark.parametrize("splits", [1, 3])
def test_sinks_and_window(splits, close):
    q, k, v = _inputs(2, 2, 8, 1, 100, 32, torch.float32, seed=2)
    sinks = torch.randn(8, device=DEV)
    _run(q, k, v, [50, 99], close, num_splits=splits, block_n=16, sinks=sinks)
    _run(q, k, v, [50, 99], close, num_splits=splits, block_n=16, window=20)
    _run(q, k, v, [2, 99], close, num_splits=splits, block_n=16, window=1, sinks=sinks, scale=0.3)


def test_odd_head_dim_and_auto_params(close):
    q, k, v = _inputs(2, 1, 4, 4, 70, 7, torch.float16, seed=3)
    _run(q, k, v, [70, 33], close)


def test_non_contiguous_layouts(close):
    # KV stored [B, S, Hk, D] (token-major) and viewed as [B, Hk, S, D]; q sliced out of a wider buffer.
    b, hq, hk, s, d = 2, 8, 2, 90, 32
    kbuf = torch.randn(b, s, hk, d, device=DEV).half()
    vbuf = torch.randn(b, s, hk, d, device=DEV).half()
    qbuf = torch.randn(b, hq, 2 * d, device=DEV).half()
    q, k, v = qbuf[..., :d], kbuf.permute(0, 2, 1, 3), vbuf.permute(0, 2, 1, 3)
    assert not (q.is_contiguous() or k.is_contiguous())
    _run(q, k, v, [90, 41], close, num_splits=3, block_n=16)


def test_reads_nothing_past_the_length(close):
    q, k, v = _inputs(2, 1, 4, 2, 64, 16, torch.float32, seed=4)
    lens = torch.tensor([10, 37], dtype=torch.int32, device=DEV)
    ref = decode_attention_reference(q, k, v, lens)
    for i, n in enumerate(lens.tolist()):
        k[i, :, n:] = float("nan")
        v[i, :, n:] = float("inf")
    close(decode_attention(q, k, v, lens, num_splits=3, block_n=16), ref)


def test_weights_sum_to_one():
    # With V = 1 everywhere, every output is exactly the softmax's total weight: 1.
    q, k, _ = _inputs(2, 1, 8, 2, 50, 16, torch.float32, seed=5)
    v = torch.ones_like(k)
    out = decode_attention(q, 10 * k, v, torch.tensor([50, 1], device=DEV), num_splits=4, block_n=16)
    torch.testing.assert_close(out, torch.ones_like(out), rtol=1e-6, atol=1e-6)


def test_registry():
    assert ops.get("decode_attention", "moelab") is decode_attention
    assert ops.get("decode_attention", "eager") is decode_attention_reference


def test_errors(monkeypatch):
    q, k, v = _inputs(2, 1, 6, 4, 16, 16, torch.float32)
    lens = torch.tensor([4, 4], device=DEV)
    with pytest.raises(ValueError, match="not a multiple"):
        decode_attention(q, k, v, lens)
    q, k, v = _inputs(2, 1, 8, 4, 16, 16, torch.float32)
    with pytest.raises(TypeError, match="dtypes"):
        decode_attention(q, k.half(), v, lens)
    with pytest.raises(ValueError, match="seq_lens must be"):
        decode_attention(q, k, v, lens.float())
    with pytest.raises(ValueError, match="one shape"):
        decode_attention(q, k, v[:, :, :8], lens)
    with pytest.raises(ValueError, match="window must be"):
        decode_attention(q, k, v, lens, window=0)
    with pytest.raises(ValueError, match="sinks must be"):
        decode_attention(q, k, v, lens, sinks=torch.zeros(4, device=DEV))
    with pytest.raises(ValueError, match="block_n must be"):
        decode_attention(q, k, v, lens, block_n=24)
    with pytest.raises(ValueError, match="q must be"):
        decode_attention(q[0], k, v, lens)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="need a CUDA tensor"):
        decode_attention(q.cpu(), k.cpu(), v.cpu(), lens.cpu())


@pytest.mark.parametrize("lens", [[1, 1000], [16384, 70001]])
def test_gpu_bf16_long_contexts(lens, close):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (bf16 tl.dot, long contexts)")
    q, k, v = _inputs(2, 1, 32, 4, max(lens), 128, torch.bfloat16)
    seq_lens = torch.tensor(lens, device="cuda", dtype=torch.int32)
    ref = decode_attention_reference(q, k, v, seq_lens)
    close(decode_attention(q, k, v, seq_lens), ref)
    close(decode_attention(q, k, v, seq_lens, num_splits=1), ref)
    q4 = torch.randn(2, 4, 32, 128, device="cuda", dtype=torch.bfloat16)
    lens4 = seq_lens.clamp(min=4)  # Q new tokens need at least Q positions
    close(decode_attention(q4, k, v, lens4), decode_attention_reference(q4, k, v, lens4))


def test_split_heuristic_fills_the_gpu_without_empty_tiles():
    from moelab.kernels.attention import launch_params

    assert launch_params(1, 4, 1024, 128, 132) == (64, 16)  # 1k: one 64-key tile per split, 64 programs
    assert launch_params(1, 4, 65536, 128, 132) == (128, 33)  # 64k: long splits, 128-key tiles, 1 program per SM
    assert launch_params(1, 4, 16384, 128, 132) == (128, 33)  # 16k: 248 keys per split at 66 → halved
    assert launch_params(8, 4, 16384, 128, 132) == (128, 4)  # B=8: 128 programs, no second wave
    assert launch_params(64, 4, 16384, 128, 132)[1] == 1  # enough sequences: one split, no combine
    assert launch_params(8, 4, 392, 128, 132) == (128, 1)  # batch 8, short context: one split of 128 (ab-chain)
    assert launch_params(4, 4, 392, 128, 132) == (64, 7)  # fewer sequences keep the splits
    assert launch_params(8, 4, 1024, 128, 132) == (64, 8)  # longer contexts keep them too
    assert launch_params(1, 1, 10**6, 256, 132) == (32, 256)  # capped at 256 splits


def test_length_hint_never_limits_what_is_read(close):
    q, k, v = _inputs(2, 1, 8, 2, 300, 32, torch.float32, seed=6)
    _run(q, k, v, [300, 129], close, max_seq_len=16, block_n=16)


def test_gpu_cuda_graph_replay_with_growing_lengths(close):
    # The engine captures one decode step and replays it as the sequence grows: the split count is fixed at
    # capture, the lengths live on the device, and no host sync may happen in the launcher.
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (graph capture)")
    q, k, v = _inputs(2, 1, 32, 4, 4096, 128, torch.bfloat16)
    lens = torch.tensor([1, 100], device="cuda", dtype=torch.int32)
    out = torch.empty_like(q)
    decode_attention(q, k, v, lens, out=out)  # warm-up: compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode_attention(q, k, v, lens, out=out)
    for new in ([1, 100], [2, 1000], [4000, 4096]):
        lens.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        close(out, decode_attention_reference(q, k, v, lens))


def test_reference_agrees_with_sdpa():
    # The reference itself, against torch's SDPA (math backend on CPU) with an explicit causal mask.
    q, k, v = (t.cpu() for t in _inputs(1, 3, 8, 2, 40, 16, torch.float32, seed=8))
    n = 29
    ref = decode_attention_reference(q, k, v, torch.tensor([n]))
    mask = torch.ones(3, n, dtype=torch.bool).tril(n - 3)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k[:, :, :n], v[:, :, :n], attn_mask=mask, enable_gqa=True
    ).transpose(1, 2)
    torch.testing.assert_close(ref, want, rtol=1e-5, atol=1e-5)


def _ptx(sm90, name):
    job = sm90[name]
    assert "error" not in job, job.get("error")
    return job["ptx"]


def test_compiles_for_sm90(sm90):
    # What the interpreter cannot check: both kernels compile for an H200, K/V loads are pipelined (cp.async)
    # and the dots run on tensor cores (mma.sync).
    split = _ptx(sm90, "attention_split")
    assert "cp.async" in split and "mma.sync" in split
    # The combine in the PDL chain (kernels.chain_pdl): it releases the o projection, then waits for the partials
    # before reading any.
    combine = _ptx(sm90, "attention_combine")
    wait = combine.index("griddepcontrol.wait")
    assert combine.index("griddepcontrol.launch_dependents") < wait and "ld.global" not in combine[:wait]
    assert "griddepcontrol.wait" not in _ptx(sm90, "attention_combine_plain")  # batch > 2: a plain launch
    # Its loads, the partials (vectorised) with the log-sum-exps, all go out before the first barrier of the merge's
    # reductions: one L2 round trip after the wait (session 16), not three in a row.
    merge = combine[wait:]
    assert "ld.global.v4" in merge and merge.rindex("ld.global") < merge.index("bar.sync")
    # The split kernel of the chain releases the combine after its wait (TRIGGER=2: once its q is in registers).
    kv = _ptx(sm90, "attention_split_kv")
    assert kv.index("griddepcontrol.launch_dependents") > kv.index("griddepcontrol.wait")
    # Merging its own splits (MERGE): a real acq_rel arrival atomic, then the other SMs' partials loaded past L1.
    for name in ("attention_split_merge", "attention_split_kv_merge"):
        merged = _ptx(sm90, name)
        arrive = merged.index("atom.global.gpu.acq_rel")
        assert "ld.global.cg" in merged[arrive:] and "atom" not in _ptx(sm90, name[:-len("_merge")])


# ---- decode_attention_kv: the q/k prologue and the KV append fused into the split kernel ----

def _kv_inputs(b, hq, hk, s_max, d, dtype, norm=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(b, hq + 2 * hk, d, generator=g).to(dtype)  # one fused projection, viewed as q, k, v
    q, k, v = (t.to(DEV) for t in (qkv[:, :hq], qkv[:, hq:hq + hk], qkv[:, hq + hk:]))
    qw = (1 + 0.1 * torch.randn(d, generator=g)).to(dtype).to(DEV) if norm else None
    kw = (1 + 0.1 * torch.randn(d, generator=g)).to(dtype).to(DEV) if norm else None
    kc = torch.randn(b, hk, s_max, d, generator=g).to(dtype).to(DEV)
    vc = torch.randn(b, hk, s_max, d, generator=g).to(dtype).to(DEV)
    return q, k, v, qw, kw, kc, vc


def _run_kv(inp, pos, close, poison=True, **kw):
    """Kernel against the composed references: the output, and the caches (k normalised and rotated at positions[b],
    v copied, nothing else changed). With `poison`, the kernel's cache rows at and past each position are NaN
    first: it must read none of them (the new row comes from registers)."""
    q, k, v, qw, kw_, kc, vc = inp
    positions = torch.tensor(pos, device=DEV)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    args = dict(eps=1e-6, rope_theta=1e4)
    args.update({n: kw.pop(n) for n in ("rotary_dim", "offset", "scale", "sinks", "window") if n in kw})
    ref = decode_attention_kv_reference(q, k, v, qw, kw_, positions, kc_ref, vc_ref, **args)
    if poison:
        for i, p in enumerate(pos):
            kc[i, :, p:] = float("nan")
            vc[i, :, p:] = float("nan")
            kc_ref[i, :, p + 1:] = float("nan")
            vc_ref[i, :, p + 1:] = float("nan")
    out = torch.full(q.shape, float("nan"), dtype=q.dtype, device=DEV)
    got = decode_attention_kv(q, k, v, qw, kw_, positions, kc, vc, out=out, **args, **kw)
    assert got is out
    close(got, ref)
    torch.testing.assert_close(kc, kc_ref, equal_nan=True, rtol=0, atol=1e-6 if q.dtype == torch.float32 else 0)
    assert torch.equal(vc.nan_to_num(7.0), vc_ref.nan_to_num(7.0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("splits", [None, 1, 5])
def test_kv_fused_matches_the_composed_references(dtype, norm, splits, close):
    # Positions 0 (the new key alone), 16 (the first row of a tile), 99, and a length that leaves some splits empty.
    inp = _kv_inputs(4, 8, 2, 120, 32, dtype, norm)
    _run_kv(inp, [0, 16, 99, 3], close, num_splits=splits, block_n=16)


def test_kv_fused_with_long_shares(close):
    # The new row in the last split, several tiles into its chunk (136 and 201 keys over 2 splits of 16-key tiles).
    inp = _kv_inputs(2, 8, 2, 220, 32, torch.float32, seed=6)
    _run_kv(inp, [135, 200], close, num_splits=2, block_n=16)


def test_kv_fused_partial_rotary_offset_norm_window_sinks_and_gqa1(close):
    inp = _kv_inputs(2, 4, 4, 64, 32, torch.float32, seed=1)
    _run_kv(inp, [40, 9], close, rotary_dim=8, offset=True, num_splits=3, block_n=16)
    inp = _kv_inputs(2, 8, 2, 64, 16, torch.float32, seed=2)
    _run_kv(inp, [63, 20], close, window=7, sinks=torch.randn(8, device=DEV), num_splits=2, block_n=16)
    inp = _kv_inputs(1, 6, 2, 40, 12, torch.float16, seed=3)  # head_dim 12: masked columns, padded tile
    _run_kv(inp, [31], close, scale=0.2)
    inp = _kv_inputs(1, 16, 1, 40, 16, torch.float32, seed=4)  # G = 16: the k row needs a 32-row tile
    _run_kv(inp, [30], close, num_splits=2, block_n=16)


def test_kv_fused_position_outside_the_cache_writes_nothing(close):
    # The device cannot raise: a position past the cache attends to all of it and appends nothing (as
    # qk_norm_rope_kv + decode_attention, whose lengths clamp to S_max).
    q, k, v, qw, kw, kc, vc = _kv_inputs(1, 4, 2, 16, 16, torch.float32)
    before_k, before_v = kc.clone(), vc.clone()
    got = decode_attention_kv(q, k, v, qw, kw, torch.tensor([16], device=DEV), kc, vc, eps=1e-6, rope_theta=1e4)
    assert torch.equal(kc, before_k) and torch.equal(vc, before_v)
    from moelab.ops.rope import qk_norm_rope_reference
    qr, _ = qk_norm_rope_reference(q, k, qw, kw, torch.tensor([16], device=DEV), eps=1e-6, rope_theta=1e4)
    close(got, decode_attention_reference(qr, kc, vc, torch.tensor([16], device=DEV)))


def test_kv_fused_registry_and_errors():
    assert ops.get("decode_attention_kv", "moelab") is decode_attention_kv
    assert ops.get("decode_attention_kv", "eager") is decode_attention_kv_reference
    q, k, v, qw, kw, kc, vc = _kv_inputs(2, 4, 2, 8, 16, torch.float32)
    pos = torch.tensor([1, 2], device=DEV)
    a = dict(eps=1e-6, rope_theta=1e4)
    with pytest.raises(ValueError, match="q must be \\[B, Hq, D\\]"):
        decode_attention_kv(q[:, None], k, v, qw, kw, pos, kc, vc, **a)
    with pytest.raises(ValueError, match="give both q_weight and k_weight"):
        decode_attention_kv(q, k, v, qw, None, pos, kc, vc, **a)
    with pytest.raises(ValueError, match="q_weight has shape \\(8,\\); expected \\(16,\\)"):
        decode_attention_kv(q, k, v, qw[:8], kw, pos, kc, vc, **a)
    with pytest.raises(ValueError, match="rotary_dim 5"):
        decode_attention_kv(q, k, v, qw, kw, pos, kc, vc, rotary_dim=5, **a)
    for impl in (decode_attention_kv, decode_attention_kv_reference):  # the KV errors name this op, on both impls
        with pytest.raises(ValueError, match="^decode_attention_kv: v must be"):
            impl(q, k, v[:, :1], qw, kw, pos, kc, vc, **a)
        with pytest.raises(ValueError, match="^decode_attention_kv: positions must be"):
            impl(q, k, v, qw, kw, pos[:1], kc, vc, **a)
    hb = kc.half()  # fp16 activations with fp32 norm weights normalise to fp32: not the cache's dtype
    with pytest.raises(ValueError, match="the cache is torch.float16"):
        decode_attention_kv(q.half(), k.half(), v.half(), qw, kw, pos, hb, hb.clone(), **a)


@pytest.mark.parametrize("pos", [[0, 1023], [16383, 70000]])
def test_gpu_bf16_kv_fused(pos, close):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (bf16 tl.dot, PDL launch)")
    inp = _kv_inputs(2, 32, 4, max(pos) + 1, 128, torch.bfloat16)
    _run_kv(inp, pos, close)
    inp = _kv_inputs(2, 32, 4, max(pos) + 1, 128, torch.bfloat16, seed=1)
    _run_kv(inp, pos, close, num_splits=1)
    # The deepest pipeline the engine hands the split (`early_release_stages`): 5 stages of 64-key tiles.
    inp = _kv_inputs(2, 32, 4, max(pos) + 1, 128, torch.bfloat16, seed=2)
    _run_kv(inp, pos, close, num_stages=5, block_n=64)


def test_gpu_kv_fused_graph_replay_as_the_sequence_grows(close):
    # The engine's use: one captured step replayed while positions advance; each replay appends one row.
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (graph capture)")
    q, k, v, qw, kw, kc, vc = _kv_inputs(2, 32, 4, 2048, 128, torch.bfloat16)
    pos = torch.tensor([5, 700], device="cuda")
    out = torch.empty_like(q)
    a = dict(eps=1e-6, rope_theta=1e6)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    decode_attention_kv(q, k, v, qw, kw, pos, kc.clone(), vc.clone(), out=out, **a)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode_attention_kv(q, k, v, qw, kw, pos, kc, vc, out=out, **a)
    for _ in range(3):
        q.copy_(torch.randn_like(q)), k.copy_(torch.randn_like(k)), v.copy_(torch.randn_like(v))
        graph.replay()
        close(out, decode_attention_kv_reference(q, k, v, qw, kw, pos, kc_ref, vc_ref, **a))
        pos += 1
    close(kc, kc_ref)
    assert torch.equal(vc, vc_ref)


def test_compiles_for_sm90_kv_fused(sm90):
    # The fused decode form: PDL (griddepcontrol.wait after the first tile's loads), tensor-core dots, the
    # libdevice cos/sin of the RoPE helper.
    ptx = _ptx(sm90, "attention_split_kv")
    assert "griddepcontrol.wait" in ptx and "mma.sync" in ptx and "__nv_cosf" in ptx
    assert ptx.index("ld.global") < ptx.index("griddepcontrol.wait")  # the first tile is requested before the wait


def test_early_release_stages_keep_one_program_an_sm():
    """Where qkv releases the split as it starts, the split runs one program an SM: 5 stages of 64-key tiles when its
    programs are no more than the SMs, 3 where 128-key tiles or more programs than SMs already spread them, and no
    early release where neither holds. The points stage FV measured (H200, Qwen3-30B-A3B batch 1, 132 SMs)."""
    from moelab.kernels.attention import early_release_stages, launch_params

    assert launch_params(1, 4, 392, 128, 132) == (64, 7) and early_release_stages(1, 4, 392, 128, 2, 132) == 5
    assert launch_params(1, 4, 4232, 128, 132) == (64, 66) and early_release_stages(1, 4, 4232, 128, 2, 132) == 3
    assert launch_params(1, 4, 16136, 128, 132)[0] == 128 and early_release_stages(1, 4, 16136, 128, 2, 132) == 3
    assert early_release_stages(1, 4, 2048, 128, 2, 132) == 5  # 128 programs: still one an SM at 5 stages
    assert early_release_stages(1, 4, 392, 128, 4, 132) == 3  # fp32: 64 KB a tile pair, one an SM at 3 stages
    assert early_release_stages(1, 8, 392, 64, 2, 132) is None  # head_dim 64: 5 stages still fit two an SM
