"""Decode GEMV kernel against the fp32 reference (CPU: Triton interpreter, small shapes; GPU: real shapes)."""

import re

import pytest
import torch

from moelab import kernels, ops
from moelab.kernels import linear as linear_mod
from moelab.kernels.linear import DOT_MIN_T, GEMV_MAX_T, LINEAR_MAX_T, dot_config, dot_min_t, linear, linear_config
from moelab.ops import linear as linear_ops
from moelab.ops.linear import linear_reference

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"  # CPU: the Triton interpreter
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 1), (3, 7), (129, 300), (33, 1000)]  # (N, K): odd, non-multiples of every block


def make(T, N, K, dtype, seed=0, bias=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, K, generator=g).to(dtype).to(DEV)
    w = (torch.randn(N, K, generator=g) * K ** -0.5).to(dtype).to(DEV)
    b = torch.randn(N, generator=g).to(dtype).to(DEV) if bias else None
    return x, w, b


def poisoned(T, N, dtype):
    return torch.full((T, N), float("nan"), dtype=dtype, device=DEV)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T", [1, 2, 3, 8, 16])
@pytest.mark.parametrize("N,K", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_matches_reference(T, N, K, dtype, bias, close):
    """The GEMV (forced from DOT_MIN_T on: the tensor-core form has its own tests, below)."""
    x, w, b = make(T, N, K, dtype, seed=T * 1000 + N + K, bias=bias)
    out = poisoned(T, N, dtype)
    got = linear(x, w, b, out=out, config=dict(DOT=False))
    assert got is out
    assert not got.isnan().any(), "some outputs were never written"
    close(got, linear_reference(x, w, b))


@pytest.mark.parametrize("seed", range(24))
def test_random_shapes_and_configs(seed, close):
    """Shape, dtype, bias and launch parameters drawn from the seed: awkward combinations nobody lists by hand."""
    g = torch.Generator().manual_seed(1234 + seed)
    pick = lambda n: int(torch.randint(n, (1,), generator=g))  # noqa: E731
    T, N, K = 1 + pick(GEMV_MAX_T), 1 + pick(40), 1 + pick(500)
    dtype = DTYPES[pick(3)]
    vec = 16 // torch.empty(0, dtype=dtype).element_size()
    cfg = dict(DOT=False, BLOCK_N=[1, 2, 4, 8][pick(4)], BLOCK_K=[vec, 16, 64, 128, 512][pick(5)], SPLIT_K=1 + pick(5),
               num_warps=[1, 2, 4][pick(3)])
    cfg["BLOCK_K"] = max(cfg["BLOCK_K"], vec)
    while T * -(-N // cfg["BLOCK_N"]) * -(-K // cfg["BLOCK_K"]) > 3000:  # the interpreter's cost: keep it short
        cfg["BLOCK_K"] *= 2
    x, w, b = make(T, N, K, dtype, seed=seed, bias=bool(pick(2)))
    got = linear(x, w, b, out=poisoned(T, N, dtype), config=cfg)
    assert not got.isnan().any(), f"unwritten outputs with {cfg}"
    close(got, linear_reference(x, w, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("split", [1, 3])
def test_exact_on_integers(dtype, split):
    """Small integers: every partial sum is exact in fp32 and the result fits the dtype, so any order of
    accumulation must give the reference bit for bit — a wrong index or a lost chunk cannot hide in a tolerance."""
    g = torch.Generator().manual_seed(3)
    T, N, K = 5, 37, 300
    x = torch.randint(-2, 3, (T, K), generator=g).to(dtype).to(DEV)
    w = torch.randint(-2, 3, (N, K), generator=g).to(dtype).to(DEV)
    b = torch.randint(-8, 9, (N,), generator=g).to(dtype).to(DEV)
    got = linear(x, w, b, out=poisoned(T, N, dtype), config=dict(SPLIT_K=split, BLOCK_K=64))
    assert torch.equal(got, linear_reference(x, w, b))


@pytest.mark.parametrize("split", [2, 3, 4, 16])
def test_split_k(split, close):
    """SPLIT_K > 1: the last program of each row block sums the partials; SPLIT_K above the number of chunks is
    clipped (no empty split). The counters are back to zero afterwards (the next call needs no memset)."""
    x, w, b = make(3, 21, 1000, torch.float32, seed=split, bias=True)
    for _ in range(2):  # the second call reuses the counters the first one reset
        got = linear(x, w, b, out=poisoned(3, 21, x.dtype), config=dict(SPLIT_K=split, BLOCK_K=128))
        close(got, linear_reference(x, w, b))
    for (_, owner), c in kernels._COUNTERS.items():
        if owner != "linear":
            continue
        assert int(c.count_nonzero()) == 0


def test_heuristic_split_k_path(close):
    """Few row blocks and a long K: the heuristic itself splits K (4 'SMs' under the interpreter)."""
    assert linear_config(1, 8, 4096, elem_bytes=4, sms=4)["SPLIT_K"] > 1
    x, w, _ = make(1, 8, 4096, torch.float32, seed=9)
    close(linear(x, w, out=poisoned(1, 8, x.dtype)), linear_reference(x, w))


def test_deterministic(close):
    for cfg in (None, dict(SPLIT_K=4, BLOCK_K=64)):
        x, w, b = make(5, 13, 777, torch.float32, seed=5, bias=True)
        first = linear(x, w, b, config=cfg)
        assert torch.equal(first, linear(x, w, b, config=cfg)), cfg


def test_strided_rows_and_out_view(close):
    """Row strides other than K (a column slice of x, rows of a bigger weight, out a view of a wider buffer):
    the kernel writes exactly the [T, N] view, nothing beside it."""
    T, N, K = 4, 50, 200
    xb = torch.randn(T, K + 24).to(DEV)
    wb = (torch.randn(N + 6, K + 8) * K ** -0.5).to(DEV)
    x, w = xb[:, 3:K + 3], wb[2:N + 2, :K]
    buf = torch.full((T, N + 7), float("nan"), device=DEV)
    out = buf[:, :N]
    linear(x, w, out=out)
    close(out, linear_reference(x, w))
    assert buf[:, N:].isnan().all(), "wrote outside the out view"


def test_empty():
    x, w, b = make(0, 9, 16, torch.float16, bias=True)
    assert linear(x, w, b).shape == (0, 9)
    x, w, _ = make(2, 0, 16, torch.float16)
    assert linear(x, w).shape == (2, 0)


def test_errors(monkeypatch):
    x, w, b = make(2, 8, 16, torch.float32, bias=True)
    cases = [
        ((x[0], w), "x must be a 2-D tensor"),
        ((x, w[0]), "weight must be a 2-D tensor"),
        ((x.to(torch.int32), w), "x has dtype"),
        ((x, w[:, :15]), "K differs"),
        ((x, w.half()), "weight has dtype"),
        ((torch.randn(LINEAR_MAX_T + 1, 16, device=DEV), w), "T=65 tokens is more than LINEAR_MAX_T"),
        ((x[:, :0], w[:, :0]), "K .* is 0"),
        ((torch.randn(16, 2, device=DEV).t(), w), "x's last dim must be contiguous"),
        ((x, torch.randn(16, 8, device=DEV).t()), "weight's last dim must be contiguous"),
        ((x, w, b[:7]), "bias is"),
        ((x, w, b.half()), "bias is"),
        ((x, w, torch.randn(16, device=DEV)[::2]), "bias must be contiguous"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            linear(*args)
    with pytest.raises(ValueError, match="out is"):
        linear(x, w, out=torch.empty(2, 7, device=DEV))
    with pytest.raises(ValueError, match="out's last dim"):
        linear(x, w, out=torch.empty(8, 2, device=DEV).t())
    with pytest.raises(ValueError, match="shares storage with x"):
        big = torch.randn(2, 24, device=DEV)
        linear(big[:, :16], w, out=big[:, 16:])
    with pytest.raises(ValueError, match="unknown config keys"):
        linear(x, w, config=dict(BLOCK_M=4))
    with pytest.raises(ValueError, match="bad config"):
        linear(x, w, config=dict(BLOCK_K=2))  # below one 16-byte vector of fp32
    with pytest.raises(ValueError, match="bad config"):
        linear(x, w, config=dict(DOT=True, BLOCK_N=8))  # below a tensor-core tile
    with pytest.raises(ValueError, match="bad config"):
        linear(x, w, config=dict(DOT=True, num_stages=0))
    with pytest.raises(ValueError, match="unknown config keys"):
        linear(x, w, config=dict(num_stages=2))  # the GEMV has no software pipeline to size
    with pytest.raises(ValueError, match="DOT must be True or False"):
        linear(x, w, config=dict(DOT=1))
    with pytest.raises(ValueError, match="GEMV_MAX_T=16 tokens, not 17"):
        linear(torch.randn(GEMV_MAX_T + 1, 16, device=DEV), w, config=dict(DOT=False))
    monkeypatch.setenv("MOELAB_LINEAR_DOT_MIN_T", "eight")
    with pytest.raises(ValueError, match="MOELAB_LINEAR_DOT_MIN_T must be an integer, not 'eight'"):
        linear(x, w)
    monkeypatch.delenv("MOELAB_LINEAR_DOT_MIN_T")
    if not CUDA:
        with pytest.raises(ValueError, match="interpreter"):
            linear(x, w, use_pdl=True)
        with pytest.raises(ValueError, match=r"linear \(DOT\): a bfloat16 tl.dot cannot run under the Triton interp"):
            linear(x.bfloat16(), w.bfloat16(), config=dict(DOT=True))  # it would return garbage, not an error
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(ValueError, match="need a CUDA tensor"):
            linear(x, w)


def test_config_heuristic():
    for T in (1, 2, 8, 16):
        for N, K in ((2048, 4096), (5120, 2048), (128, 2048), (151936, 2048), (1, 1), (3, 7)):
            c = linear_config(T, N, K)
            for key in ("BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps"):
                assert c[key] >= 1 and c[key] & (c[key] - 1) == 0, (T, N, K, c)
            assert c["num_warps"] <= 4 and c["BLOCK_K"] >= 8
    # Qwen3-30B-A3B decode: one launch, no split-K epilogue, and about 4 programs per SM of the H200 or more.
    for N, K in ((2048, 4096), (5120, 2048)):
        c = linear_config(1, N, K)
        assert c["SPLIT_K"] == 1 and N // c["BLOCK_N"] >= 3.5 * 132


@pytest.mark.parametrize("T,N,K,split", [(1, 9, 300, 1), (2, 33, 1000, 1), (3, 5, 700, 3)])
def test_whole_k_chunk(T, N, K, split, close):
    """Each split's K range in one chunk (the path with no loop and no second buffer: WHOLE_K in the kernel)."""
    x, w, b = make(T, N, K, torch.float16, seed=T + N, bias=True)
    bk = 1 << (-(-K // split) - 1).bit_length()  # next power of two ≥ the split's share
    got = linear(x, w, b, out=poisoned(T, N, x.dtype), config=dict(BLOCK_K=bk, SPLIT_K=split))
    close(got, linear_reference(x, w, b))


def test_whole_k_config():
    """whole_k: o_proj (K=4096) and qkv (K=2048) at T ≤ 2 in one chunk of 32 KB per program (4 and 8 rows); larger T
    or K keep the streaming loop."""
    for N, K in ((2048, 4096), (5120, 2048)):
        c = linear_config(1, N, K, whole_k=True)
        assert c["BLOCK_K"] == K and c["SPLIT_K"] == 1 and c["BLOCK_N"] * K * 2 == 32 * 1024
    assert linear_config(8, 2048, 4096, whole_k=True) == linear_config(8, 2048, 4096)
    assert linear_config(1, 2048, 8192, whole_k=True) == linear_config(1, 2048, 8192)


# ------------------------------------------------------------------------------------------ tensor-core form

DOT_DTYPES = [torch.float32, torch.float16]  # the interpreter has no bf16 tl.dot: bf16 runs on the GPU below


@pytest.mark.parametrize("dtype", DOT_DTYPES + ([torch.bfloat16] if CUDA else []))
@pytest.mark.parametrize("T", [1, 5, 16, 17, 40, 64])
@pytest.mark.parametrize("N,K", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_dot_matches_reference(T, N, K, dtype, bias, close):
    """The tensor-core kernel: tokens padded to the MMA's 16 (and T=17, 40: not a power of two), odd N and K."""
    x, w, b = make(T, N, K, dtype, seed=T * 1000 + N + K + 7, bias=bias)
    got = linear(x, w, b, out=poisoned(T, N, dtype), config=dict(DOT=True))
    assert not got.isnan().any(), "some outputs were never written"
    close(got, linear_reference(x, w, b))


@pytest.mark.parametrize("seed", range(12))
def test_dot_random_shapes_and_configs(seed, close):
    g = torch.Generator().manual_seed(777 + seed)
    pick = lambda n: int(torch.randint(n, (1,), generator=g))  # noqa: E731
    T, N, K = 1 + pick(LINEAR_MAX_T), 1 + pick(100), 1 + pick(700)
    dtype = DOT_DTYPES[pick(2)]
    cfg = dict(DOT=True, BLOCK_N=[16, 32, 64][pick(3)], BLOCK_K=[16, 32, 64, 128][pick(4)], SPLIT_K=1 + pick(5),
               num_warps=[1, 2, 4][pick(3)], num_stages=1 + pick(4))
    x, w, b = make(T, N, K, dtype, seed=seed, bias=bool(pick(2)))
    got = linear(x, w, b, out=poisoned(T, N, dtype), config=cfg)
    assert not got.isnan().any(), f"unwritten outputs with {cfg}"
    close(got, linear_reference(x, w, b))


@pytest.mark.parametrize("split", [1, 3])
def test_dot_exact_on_integers(split):
    """As test_exact_on_integers, on tensor cores (fp16: products of small integers and their sums are exact)."""
    g = torch.Generator().manual_seed(4)
    T, N, K = 9, 37, 300
    x = torch.randint(-2, 3, (T, K), generator=g).half().to(DEV)
    w = torch.randint(-2, 3, (N, K), generator=g).half().to(DEV)
    b = torch.randint(-8, 9, (N,), generator=g).half().to(DEV)
    got = linear(x, w, b, out=poisoned(T, N, x.dtype), config=dict(DOT=True, SPLIT_K=split, BLOCK_K=32))
    assert torch.equal(got, linear_reference(x, w, b))


def test_dot_split_k_resets_counters_and_is_deterministic(close):
    x, w, b = make(12, 40, 1000, torch.float16, seed=2, bias=True)
    cfg = dict(DOT=True, SPLIT_K=4, BLOCK_K=64)
    first = linear(x, w, b, config=cfg)
    close(first, linear_reference(x, w, b))
    assert torch.equal(first, linear(x, w, b, config=cfg))
    for (_, owner), c in kernels._COUNTERS.items():
        if owner == "linear":
            assert int(c.count_nonzero()) == 0


class _Recorder:
    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((grid, kwargs))


@pytest.mark.parametrize("env,T,dot", [(None, 1, False), (None, DOT_MIN_T - 1, False), (None, DOT_MIN_T, True),
                                       (None, GEMV_MAX_T, True), (None, GEMV_MAX_T + 1, True),
                                       (None, LINEAR_MAX_T, True), ("8", 7, False), ("8", 8, True), ("1", 1, True),
                                       ("99", GEMV_MAX_T, False), ("99", GEMV_MAX_T + 1, True)])
def test_which_kernel_runs(monkeypatch, env, T, dot):
    """The GEMV below dot_min_t() (DOT_MIN_T, or $MOELAB_LINEAR_DOT_MIN_T for an A/B), tensor cores from there;
    never the GEMV above GEMV_MAX_T, whatever the switch says. A forced DOT in config wins over the switch."""
    if env is None:
        monkeypatch.delenv("MOELAB_LINEAR_DOT_MIN_T", raising=False)
    else:
        monkeypatch.setenv("MOELAB_LINEAR_DOT_MIN_T", env)
    gemv, tc = _Recorder(), _Recorder()
    monkeypatch.setattr(linear_mod, "_linear_kernel", gemv)
    monkeypatch.setattr(linear_mod, "_linear_dot_kernel", tc)
    x, w, _ = make(T, 24, 64, torch.float32)
    linear(x, w)
    assert (len(tc.calls), len(gemv.calls)) == ((1, 0) if dot else (0, 1))
    if dot:
        (grid, kw), = tc.calls
        assert kw["T_PAD"] == max(16, 1 << (T - 1).bit_length()) and kw["PREC"] == "ieee"
    if T <= GEMV_MAX_T:
        linear(x, w, config=dict(DOT=not dot))
        assert len(tc.calls) == len(gemv.calls) == 1  # the other kernel, forced
    assert DOT_MIN_T == 4  # the adopted value (bench-linear-…T213552, ab-chain-…T213813)


@pytest.mark.parametrize("T,kernel", [(1, True), (16, True), (17, False), (64, False)])
def test_dense_switch(monkeypatch, T, kernel):
    """The engine's projections: moelab's kernel up to DENSE_MAX_T (16) tokens, cuBLAS (F.linear) beyond."""
    calls = []
    monkeypatch.setattr(linear_ops, "_linear_kernel", lambda *a, **k: calls.append("moelab"))
    monkeypatch.setattr(linear_ops.F, "linear", lambda *a, **k: calls.append("cublas"))
    linear_ops.dense(torch.randn(T, 8), torch.randn(4, 8))
    assert calls == ["moelab" if kernel else "cublas"]


def test_dot_config():
    """Qwen3-30B-A3B at T=8: 64 × 64 tiles; qkv and o_proj split (8 at most) to ≥ 256 programs (2 an SM), each split
    ≥ 4 chunks — the sweep's best splits; lm_head not split. Small N or K shrink the tile, never below 16."""
    qkv, o, lm = dot_config(8, 5120, 2048), dot_config(8, 2048, 4096), dot_config(8, 151936, 2048)
    assert (qkv["SPLIT_K"], o["SPLIT_K"], lm["SPLIT_K"]) == (4, 8, 1)
    for c, (N, K) in ((qkv, (5120, 2048)), (o, (2048, 4096))):
        assert c["BLOCK_N"] == 64 and c["BLOCK_K"] == 64 and c["DOT"] and c["num_stages"] == 4
        assert -(-N // 64) * c["SPLIT_K"] >= 256 and K // 64 // c["SPLIT_K"] >= 4
    tiny = dot_config(3, 5, 7, elem_bytes=4)
    assert tiny["BLOCK_N"] == 16 and tiny["BLOCK_K"] == 16
    assert linear_config(8, 5120, 2048, dot=True) == qkv


def test_dot_whole_k_config(monkeypatch):
    """whole_k on tensor cores (the PDL chain, T ≤ chain_max_t()): qkv 80 row blocks × 8 splits and o_proj 32 × 16,
    each split one 64 × 256 chunk (32 KB) and no pipeline ring (num_stages 1); lm_head, whose grid would pass 5
    programs per SM, keeps the loop; MOELAB_DOT_WHOLE_K=0 gives the loop back."""
    qkv, o = dot_config(8, 5120, 2048, whole_k=True), dot_config(8, 2048, 4096, whole_k=True)
    assert (qkv["BLOCK_K"], qkv["SPLIT_K"], o["BLOCK_K"], o["SPLIT_K"]) == (256, 8, 256, 16)
    assert qkv["BLOCK_N"] == o["BLOCK_N"] == 64 and qkv["num_stages"] == o["num_stages"] == 1
    assert dot_config(8, 151936, 2048, whole_k=True) == dot_config(8, 151936, 2048)
    assert dot_config(16, 5120, 2048, whole_k=True)["num_stages"] == 1  # the chain's 16 rows (session 19)
    assert dot_config(32, 5120, 2048, whole_k=True) == dot_config(32, 5120, 2048)  # beyond them
    assert linear_config(8, 5120, 2048, dot=True, whole_k=True) == qkv
    monkeypatch.setenv("MOELAB_DOT_WHOLE_K", "0")
    assert dot_config(8, 5120, 2048, whole_k=True) == dot_config(8, 5120, 2048)


@pytest.mark.parametrize("T,N,K", [(8, 70, 1000), (5, 33, 256), (4, 64, 300), (6, 20, 100)])
def test_dot_whole_k_chunks(T, N, K, close):
    """The whole-slice tiling on tensor cores exactly as dot_config(whole_k=True) picks it (each split's K range one
    chunk, a partly masked last one at K=1000 and 300, K under one chunk at 100; the loop never entered, one stage) at
    odd shapes: the reference's answer, every output written."""
    x, w, b = make(T, N, K, torch.float16, seed=T + N + K, bias=True)
    cfg = dot_config(T, N, K, elem_bytes=2, whole_k=True)
    assert cfg["num_stages"] == 1 and cfg["SPLIT_K"] == -(-K // cfg["BLOCK_K"])  # the whole-slice form
    got = linear(x, w, b, out=poisoned(T, N, x.dtype), config=cfg)
    assert not got.isnan().any()
    close(got, linear_reference(x, w, b))


def test_registered_kernel_is_this_kernel():
    assert ops.get("linear", "moelab") is linear
    assert ops.get("linear", "eager") is linear_reference


def test_reference_is_torch_linear():
    x, w, b = (t.cpu() for t in make(3, 20, 64, torch.float32, bias=True))
    torch.testing.assert_close(linear_reference(x, w, b), torch.nn.functional.linear(x, w, b))


# ------------------------------------------------------------------------------------------ GPU

GPU_SHAPES = {"qkv_proj": (5120, 2048), "o_proj": (2048, 4096), "router": (128, 2048)}


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU: bf16 at Qwen3-30B-A3B's decode shapes on the real kernel")
@pytest.mark.parametrize("name", [*GPU_SHAPES, "lm_head"])
def test_gpu_bf16_real_shapes(name, close):
    N, K = GPU_SHAPES.get(name, (151936, 2048))
    tokens = [1] if name == "lm_head" else [1, 2, 8, 16]
    for T in tokens:
        for seed in range(3 if name == "lm_head" else 10):
            x, w, _ = make(T, N, K, torch.bfloat16, seed=seed)
            ref = linear_reference(x, w)
            for kw in ({}, {"use_pdl": True}, {"config": dict(SPLIT_K=4)}):
                got = linear(x, w, out=poisoned(T, N, x.dtype), **kw)
                close(got, ref, tol=1e-2)  # one bf16 rounding of an fp32 sum in another order: ~4e-3
            assert torch.equal(linear(x, w), linear(x, w))


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU: the tensor-core form in bf16 (the interpreter has no bf16 dot)")
@pytest.mark.parametrize("name", [*GPU_SHAPES, "lm_head"])
def test_gpu_bf16_dot_real_shapes(name, close):
    N, K = GPU_SHAPES.get(name, (151936, 2048))
    for T in ([8, 64] if name == "lm_head" else [4, 8, 16, 32, 64]):
        for seed in range(2 if name == "lm_head" else 5):
            x, w, _ = make(T, N, K, torch.bfloat16, seed=seed)
            ref = linear_reference(x, w)
            for kw in ({}, {"use_pdl": True}):
                got = linear(x, w, out=poisoned(T, N, x.dtype), config=dict(DOT=True), **kw)
                close(got, ref, tol=1e-2)
            cfg = dict(DOT=True, SPLIT_K=2)
            assert torch.equal(linear(x, w, config=cfg), linear(x, w, config=cfg))


# ------------------------------------------------------------------------------------------ sm_90 compile

def _loop_body(ptx: str) -> str:
    """The PTX of the main loop: the block that ends with a branch back to its own label."""
    for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, re.M):
        label = m.group(1)
        end = re.search(rf"bra(\.uni)?\s+{re.escape(label)};", ptx[m.end():])
        if end:
            return ptx[m.end():m.end() + end.start()]
    raise AssertionError("no loop found in the PTX")


def test_compiles_for_sm90_streaming_weight(sm90):
    """o_proj T=1 (linear_config's choice without PDL; with it the engine runs the whole-slice form below): the
    weight streams as 16-byte evict_first loads, the loop issues the
    next chunk's loads before its first FMA (double buffering survived the compiler), and the loop has no
    cross-lane traffic (no shuffles, no barriers: the K reduction happens once, after it)."""
    job = sm90["linear"]
    assert "error" not in job, job.get("error")
    ptx = job["ptx"]
    weight_loads = re.findall(r"ld\.global\.L1::evict_first\S*", ptx)
    assert weight_loads and all(".v4." in ld for ld in weight_loads), weight_loads
    loop = _loop_body(ptx)
    assert loop.index("ld.global.L1::evict_first") < loop.index("fma.rn.f32")
    assert len(re.findall(r"ld\.global\.L1::evict_first", loop)) == len(weight_loads) // 2  # prologue + loop
    assert "shfl" not in loop and "bar.sync" not in loop


def test_compiles_for_sm90_whole_k_before_the_wait(sm90):
    """o_proj T=1 in one chunk: all 16 of a thread's weight vectors are requested before griddepcontrol.wait, and
    no weight load comes after it (no loop, no second buffer)."""
    job = sm90["linear_whole_k_pdl"]
    assert "error" not in job, job.get("error")
    ptx = job["ptx"]
    wait = ptx.index("griddepcontrol.wait")
    before = re.findall(r"ld\.global\S*", ptx[:wait])
    assert len(before) == 16 and all("evict_first" in ld and ".v4." in ld for ld in before), before
    assert not re.findall(r"ld\.global\.L1::evict_first", ptx[wait:])
    # qkv at T=2, the largest T of the chain: 8 rows × 2048 in one chunk, again every weight vector before the wait.
    qkv = sm90["linear_whole_k_qkv_t2"]
    assert "error" not in qkv, qkv.get("error")
    wait = qkv["ptx"].index("griddepcontrol.wait")
    assert len(re.findall(r"ld\.global\.L1::evict_first", qkv["ptx"][:wait])) == 16
    assert not re.findall(r"ld\.global\.L1::evict_first", qkv["ptx"][wait:])


def test_compiles_for_sm90_release_points(sm90):
    """The shipped form releases its dependents once, after its last FMA (the sum over K) and after the wait;
    `release_early`'s form once, before the wait and before its first weight load."""
    for name, early in (("linear_whole_k_pdl", False), ("linear_whole_k_early", True)):
        job = sm90[name]
        assert "error" not in job, job.get("error")
        ptx = job["ptx"]
        assert ptx.count("griddepcontrol.launch_dependents") == 1, name
        release, wait = ptx.index("griddepcontrol.launch_dependents"), ptx.index("griddepcontrol.wait")
        fmas = [m.start() for m in re.finditer(r"fma\.rn\.f32", ptx)]
        assert fmas, name
        if early:
            assert release < ptx.index("ld.global") < wait, name
        else:
            assert release > max(wait, fmas[-1]), name


def test_compiles_for_sm90_dot_whole_k_before_the_wait(sm90):
    """The tensor-core kernel's whole-slice form (qkv at T=8: a 64 × 256 chunk per split): every weight vector of the
    program (64 × 256 bf16 over 128 threads: 16 a thread) is requested before griddepcontrol.wait, x only after it,
    and no pipeline ring (no cp.async) is left."""
    job = sm90["linear_dot_whole"]
    assert "error" not in job, job.get("error")
    ptx = job["ptx"]
    wait = ptx.index("griddepcontrol.wait")
    before = re.findall(r"ld\.global\S*", ptx[:wait])
    assert len(before) == 16 and all("evict_first" in ld and ".v4." in ld for ld in before), before
    assert "cp.async" not in ptx


def test_compiles_for_sm90_split_k_and_pdl(sm90):
    """T=8, SPLIT_K=4, bias, PDL — paths the interpreter cannot run: the counter is a real acq_rel atomic, the
    partials are read back through L2 (.cg), and before griddepcontrol.wait only the weight is loaded."""
    job = sm90["linear_split_pdl"]
    assert "error" not in job, job.get("error")
    ptx = job["ptx"]
    assert re.search(r"atom\.global\.acq_rel\.gpu\S*\.add", ptx) or re.search(r"atom\S*acq_rel\S*add", ptx)
    assert "ld.global.cg" in ptx
    wait = ptx.index("griddepcontrol.wait")
    assert ptx.index("griddepcontrol.launch_dependents") > wait
    before = re.findall(r"ld\.global\S*", ptx[:wait])
    assert before and all("evict_first" in ld for ld in before), before


def test_compiles_for_sm90_dot(sm90):
    """The tensor-core form at T=8 (qkv's dot_config, PDL): the products are warpgroup MMAs of 16 tokens, the weight
    and x reach them through cp.async copies that Triton pipelines (several commit groups in flight); before
    griddepcontrol.wait only the peeled first weight chunk is loaded (16-byte evict_first vectors: 64 × 64 bf16 over
    128 threads is 4 a thread), never x."""
    job = sm90["linear_dot"]
    assert "error" not in job, job.get("error")
    ptx = job["ptx"]
    assert re.search(r"wgmma\.mma_async\S*\.m64n16k16\.f32\.bf16\.bf16", ptx) or re.search(r"mma\.sync\S*bf16", ptx)
    assert len(re.findall(r"cp\.async\.commit_group", ptx)) >= 2
    wait = ptx.index("griddepcontrol.wait")
    before = re.findall(r"ld\.global\S*", ptx[:wait])
    assert len(before) == 4 and all("evict_first" in ld and ".v4." in ld for ld in before), before
    assert "cp.async" not in ptx[:wait]
    assert ptx.index("griddepcontrol.launch_dependents") > wait
    assert re.search(r"atom\S*acq_rel\S*add", ptx)  # split-K: the last arriver's counter


def _conv_inputs(T, C, CK, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    state = torch.randn(T, C, CK - 1, generator=g).to(dtype).to(DEV)
    cw = (torch.randn(C, CK, generator=g) * 0.5).to(dtype).to(DEV)
    return state, cw


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T,N,K,C,cfg", [
    (1, 37, 64, 20, dict(DOT=False)),                     # the GEMV, C inside a row block
    (3, 70, 300, 64, dict(DOT=False, BLOCK_N=4, SPLIT_K=2, BLOCK_K=64)),  # split-K: the last arriver convolves
    (2, 33, 40, 33, dict(DOT=False, BLOCK_N=8)),         # every column convolved
    (5, 40, 48, 17, dict(DOT=True)),                      # the tensor-core form
])
def test_conv_epilogue_is_projection_then_conv(T, N, K, C, cfg, dtype, close):
    """`linear(conv=...)`: the Gated DeltaNet's input projection and its causal conv in one launch give the reference's
    projection-then-`gdn_conv` (first C columns convolved, the rest as projected) and advance its state alike, over
    two steps (the second reads the state the first left)."""
    if cfg.get("DOT") and dtype == torch.bfloat16 and not CUDA:
        pytest.skip("bf16 tl.dot: the interpreter has none (fp32 here; bf16 on the GPU)")
    x, w, _ = make(T, N, K, dtype, seed=T + N)
    state, cw = _conv_inputs(T, C, 4, dtype, seed=C)
    s_ref, s_got = state.clone(), state.clone()
    for step in range(2):
        x = x.roll(step, dims=-1)
        want = linear_ops.linear_conv_reference(x, w, s_ref, cw)
        got = linear(x, w, out=poisoned(T, N, dtype), config=cfg, conv=(s_got, cw))
        assert not got.isnan().any(), "some outputs were never written"
        close(got, want)
        close(s_got, s_ref)


def test_conv_epilogue_refuses_bad_states():
    x, w, _ = make(2, 8, 16, torch.float32)
    state, cw = _conv_inputs(2, 6, 4, torch.float32, seed=0)
    for conv, msg in (((state[:1], cw), r"conv's state must be \[T=2, C=6, K-1=3\], got \(1, 6, 3\)"),
                      ((state, torch.zeros(9, 4, device=DEV)), r"conv's w must be \[C, K\] with C ≤ N=8"),
                      ((state.to(torch.float16), cw), "conv's state is torch.float16"),
                      ((state.transpose(1, 2).contiguous().transpose(1, 2), cw), "conv's state must be contiguous"),
                      ((state,), r"conv must be \(state")):
        with pytest.raises(ValueError, match=msg):
            linear(x, w, conv=conv)


def test_compiles_for_sm90_with_the_conv_epilogue(sm90):
    """The conv epilogue (`linear(conv=...)`) compiles for sm_90 in the GEMV's whole-K PDL form at T=1 and in the
    tensor-core form at T=8 (the interpreter runs it, but only the compiler sees its types and layouts), and the GEMV's
    weight slice is still requested before griddepcontrol.wait."""
    for name in ("linear_conv", "linear_dot_conv"):
        assert "error" not in sm90[name], sm90[name].get("error")
    ptx = sm90["linear_conv"]["ptx"]
    wait = ptx.index("griddepcontrol.wait")
    assert len(re.findall(r"ld\.global\.L1::evict_first", ptx[:wait])) == 16
    assert "ex2.approx" in ptx[wait:]  # the SiLU's exp, after the wait
