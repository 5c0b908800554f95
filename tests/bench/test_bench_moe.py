"""The MoE benchmark's implementations all compute the same layer (timing itself needs a GPU)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from moelab import ops  # noqa: E402
from moelab.bench.moe import MoeShape, make_impls, shape_from_spec  # noqa: E402
from moelab.models import load_spec  # noqa: E402


@pytest.mark.parametrize("shared", [False, True])
def test_every_implementation_computes_the_same_layer(shared):
    shape = MoeShape(E=8, H=32, I=16, k=2, shared_I=16 if shared else 0, shared_gate=shared)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 32, generator=g)
    logits = torch.randn(3, 8, generator=g)
    w13, w2 = torch.randn(8, 32, 32, generator=g) / 6, torch.randn(8, 32, 16, generator=g) / 4
    sh = (torch.randn(32, 32, generator=g) / 6, torch.randn(32, 16, generator=g) / 4, torch.randn(1, 32, generator=g) / 6) \
        if shared else None
    w, ids = ops.get("route", "eager")(logits, 2)
    ref = ops.get("fused_moe", "eager")(x, w13, w2, w, ids, sh)
    impls = make_impls(shape)
    assert {"hf_loop", "gather_bmm", "moelab"} <= set(impls)
    for name, fn in impls.items():
        out = fn(x, logits, w13, w2, sh)
        err = float((out - ref).norm() / ref.norm())
        assert err < 1e-5, (name, err)


def test_shape_from_spec_shards_experts():
    spec = load_spec("qwen3.5-35b-a3b")
    s1, s4 = shape_from_spec(spec), shape_from_spec(spec, tp=4, shared=False)
    assert (s1.E, s1.H, s1.I, s1.k) == (256, 2048, 512, 8) and s1.shared_I == 512 and s1.shared_gate
    assert (s4.I, s4.shared_I) == (128, 0)  # the first worklog's tp=4 shard
    with pytest.raises(ValueError, match="does not split"):
        shape_from_spec(spec, tp=3)


def test_cli_refuses_min_sets_out_of_range():
    from typer.testing import CliRunner

    import moelab.cli

    moelab.cli._load_commands()
    from moelab.errors import UserError

    # `moelab.cli.main` prints a UserError as one line; through the Typer app it arrives as the exception.
    for bad in ("0", "65"):
        r = CliRunner().invoke(moelab.cli.app, ["bench", "moe", "--min-sets", bad])
        assert isinstance(r.exception, UserError) and str(r.exception) == f"--min-sets must be 1..64, got {bad}"


def test_cli_names_a_bad_argument_before_the_missing_gpu():
    """A mistyped --tokens, an unknown model or a --tp that does not split the experts is named on any machine; only
    valid arguments reach the GPU check."""
    from typer.testing import CliRunner

    import moelab.cli

    moelab.cli._load_commands()
    from moelab.errors import UserError

    for args, msg in ((["--tokens", "1,abc"], "--tokens must be a comma-separated list of integers"),
                      (["--tokens", "0"], "--tokens must list integers >= 1"),
                      (["--model", "no-such-model"], "unknown model 'no-such-model'"),
                      (["--tp", "5"], "does not split")):
        r = CliRunner().invoke(moelab.cli.app, ["bench", "moe", *args])
        assert isinstance(r.exception, UserError) and msg in str(r.exception), (args, r.exception)
