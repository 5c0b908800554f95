"""The one-launch KV-cache append against the torch reference (CPU: Triton interpreter)."""

import pytest
import torch

from moelab import ops

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _case(B, Hk, S, D, dtype, seed, strided=False):
    g = torch.Generator().manual_seed(seed)
    kc = torch.randn(B, Hk, S, D, generator=g).to(dtype)
    vc = torch.randn(B, Hk, S, D, generator=g).to(dtype)
    if strided:  # k and v as views of a fused qkv projection, as the engine makes them
        qkv = torch.randn(B, 3 * Hk, D, generator=g).to(dtype)
        k, v = qkv[:, Hk:2 * Hk], qkv[:, 2 * Hk:]
    else:
        k, v = torch.randn(B, Hk, D, generator=g).to(dtype), torch.randn(B, Hk, D, generator=g).to(dtype)
    pos = torch.randint(0, S, (B,), generator=g)
    return [t.to(DEV) for t in (kc, vc, k, v, pos)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("B,Hk,S,D", [(1, 4, 16, 128), (3, 2, 5, 64), (2, 1, 1, 7), (4, 8, 33, 96)])
@pytest.mark.parametrize("strided", [False, True])
def test_kv_write_matches_reference(B, Hk, S, D, dtype, strided):
    for seed in range(3):
        kc, vc, k, v, pos = _case(B, Hk, S, D, dtype, seed, strided)
        kc2, vc2 = kc.clone(), vc.clone()
        ops.get("kv_write", "moelab")(kc, vc, k, v, pos)
        ops.get("kv_write", "eager")(kc2, vc2, k, v, pos)
        assert torch.equal(kc, kc2) and torch.equal(vc, vc2)  # a copy: bit-exact, and nothing else touched
        rows = torch.arange(B, device=kc.device)
        assert torch.equal(kc[rows, :, pos], k) and torch.equal(vc[rows, :, pos], v)


def test_kv_write_int32_positions_and_out_of_range_writes_nothing():
    kc, vc, k, v, pos = _case(2, 2, 8, 16, torch.float32, 0)
    before_k, before_v = kc.clone(), vc.clone()
    bad = torch.tensor([8, -1], dtype=torch.int32, device=kc.device)  # past the end, negative: nothing written
    ops.get("kv_write", "moelab")(kc, vc, k, v, bad)
    assert torch.equal(kc, before_k) and torch.equal(vc, before_v)
    ops.get("kv_write", "moelab")(kc, vc, k, v, pos.to(torch.int32))
    rows = torch.arange(2, device=kc.device)
    assert torch.equal(kc[rows, :, pos], k)


@pytest.mark.parametrize("impl", ["eager", "moelab"])
@pytest.mark.parametrize("what,match", [("k_shape", r"k must be \[2, 2, 16\]"), ("v_dtype", "v is torch.float16"),
                                         ("pos_shape", r"positions must be \[2\]"), ("cache", "one shape")])
def test_kv_write_bad_input_names_it(impl, what, match):
    kc, vc, k, v, pos = _case(2, 2, 8, 16, torch.float32, 0)
    if what == "k_shape":
        k = k[:, :1]
    elif what == "v_dtype":
        v = v.half()
    elif what == "pos_shape":
        pos = pos[:1]
    else:
        vc = vc[:, :1]
    with pytest.raises(ValueError, match=match):
        ops.get("kv_write", impl)(kc, vc, k, v, pos)


def test_kv_write_compiles_for_sm90(sm90):
    assert "error" not in sm90["kv_write"], sm90["kv_write"].get("error")
    assert "st.global" in sm90["kv_write"]["ptx"]
