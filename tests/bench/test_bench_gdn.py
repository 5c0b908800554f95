"""bench_gdn's inputs and napkin math at Qwen3.5's shard shapes, and its variants against the references (timing needs
a GPU; the kernels run under the interpreter here)."""

import dataclasses
import functools
import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # before anything imports triton
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from bench_gdn import clone, in_proj_conv_impls, op_bytes, op_inputs, parse_variant, rel_err  # noqa: E402

from moelab import ops  # noqa: E402
from moelab.kernels import gdn  # noqa: E402
from moelab.models.spec import load_spec  # noqa: E402
from moelab.profile.impls import dims  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def test_recurrence_bytes_are_the_state_twice_plus_the_vectors():
    d = dims(load_spec("qwen3.5-35b-a3b"), 1, 1, 4)  # 8 value heads, 4 key heads, 128 × 128 states
    assert (d.nk, d.nv, d.dk, d.dv) == (4, 8, 128, 128)
    state = 8 * 128 * 128 * 4
    assert op_bytes("gdn.recurrence", d) == 2 * state + (2 * 4 * 128 + 2 * 8 * 128 + 2 * 8) * 2
    args = op_inputs("gdn.recurrence", d, "cpu")
    assert args[-1].shape == (1, 8, 128, 128) and args[-1].dtype == torch.float32


@pytest.mark.parametrize("name", ["gdn.conv", "gdn.recurrence", "gdn.norm_gate"])
def test_kernels_match_the_references_on_its_inputs(name):
    d = dataclasses.replace(dims(load_spec("qwen3.5-35b-a3b"), 2, 1, 4), nk=2, nv=4, dk=16, dv=32)  # small: interpreter
    args = op_inputs(name, d, DEV)
    want = ops.get(name.replace(".", "_"), "eager")(*clone(args))
    fns = [ops.get(name.replace(".", "_"), "moelab")]
    if name == "gdn.recurrence":
        fns += [functools.partial(gdn.gdn_recurrence, block_v=bv, num_warps=w) for bv, w in ((16, 4), (8, 1), (32, 2))]
    for fn in fns:
        assert rel_err(fn(*clone(args)), want) < 2e-2  # bench_gdn's own bound (bf16 outputs; the interpreter truncates)


def test_variants_name_columns_and_warps():
    assert parse_variant("16") == (16, 4) and parse_variant("8x1") == (8, 1)
    for bad in ("12", "16x3", "x", "8x", "16o"):
        with pytest.raises(SystemExit, match="bench_gdn: --block-v"):
            parse_variant(bad)


def test_in_proj_with_the_conv_three_ways_agree():
    """bench_gdn's gdn.in_proj+conv: eager (F.linear + the conv reference), the engine's two launches and the one-launch
    epilogue give the same (convolved columns, rest) and leave the same conv state (its newest column is y as each
    matmul rounds it); its bytes are the weight's plus the small tensors'."""
    d = dataclasses.replace(dims(load_spec("qwen3.5-35b-a3b"), 2, 1, 4), H=64, nk=2, nv=4, dk=8, dv=8)
    args = op_inputs("gdn.in_proj+conv", d, DEV)
    x, w, st, cw = args
    assert w.shape == (d.gdn_ch + 4 * 8 + 2 * 4, 64) and st.shape == (2, d.gdn_ch, 3)
    assert op_bytes("gdn.in_proj+conv", d) > w.numel() * 2
    impls = in_proj_conv_impls(d.gdn_ch)
    states = {name: st.clone() for name in impls}
    want = impls["eager"](x, w, states["eager"], cw)
    for name in ("moelab", "moelab 1 launch"):
        got = impls[name](x, w, states[name], cw)
        assert rel_err(got, want) < 2e-2
        assert rel_err(states[name], states["eager"]) < 2e-2  # (its newest column is y, rounded by each matmul)
        assert torch.equal(states[name][..., :-1], st[..., 1:])  # the window slid by one
