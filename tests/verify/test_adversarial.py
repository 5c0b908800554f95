"""The adversarial suite: every known trick must FAIL with its reason; honest candidates must PASS.

Each case runs the real harness (a worker process per candidate) on small test-only problems.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from moelab.verify import verify

HERE = Path(__file__).parent
C, P = HERE / "candidates", HERE / "problems"

# candidate, problem, reason codes that must all appear, extra verify() arguments
BAD = [
    ("units_x1000", "small_rmsnorm", {"incorrect"}, {}),
    ("fp16_downgrade", "small_gemm", {"precision", "static_cast"}, {}),
    ("tf32_flag", "small_gemm", {"precision", "static_tf32_dot"}, {}),
    ("tf32_dot_triton", "small_gemm", {"static_tf32_dot"}, {}),
    ("zeros", "small_zero", {"near_constant"}, {}),
    ("ones", "small_nearconst", {"near_constant"}, {}),
    ("returns_input", "small_residual", {"near_constant", "alias"}, {}),
    ("returns_input_copy", "small_residual", {"near_constant"}, {}),
    ("stale_first", "small_rmsnorm", {"stale_output", "incorrect"}, {}),
    ("static_buffer", "small_rmsnorm", {"stale_output"}, {}),
    ("cache_by_pointer", "small_rmsnorm", {"cached"}, {"time_it": True}),
    ("alias_input", "small_swish", {"alias"}, {}),
    ("mutate_input", "small_swish", {"mutation"}, {}),
    ("calls_reference", "small_swish", {"static_torch_call"}, {}),
    ("timer_patch", "small_swish", {"static_patch", "patch"}, {}),
    ("timer_patch_hidden", "small_swish", {"patch"}, {}),
    ("timed_shape_only", "small_swish", {"incorrect_other_shape"}, {}),
    ("crash", "small_swish", {"crash"}, {}),
    ("hang", "small_swish", {"timeout"}, {"timeout_s": 8.0}),
    ("sys_exit", "small_swish", {"exit"}, {}),
    ("os_exit", "small_swish", {"exit"}, {}),
    ("no_modelnew", "small_swish", {"no_modelnew"}, {}),
    ("syntax_error", "small_swish", {"compile_error"}, {}),
    ("write_outside", "small_swish", {"write_outside"}, {}),
    ("fallback", "small_swish", {"static_fallback"}, {}),
    ("threads", "small_swish", {"static_stream"}, {}),
    ("wrong_dtype", "small_swish", {"dtype"}, {}),
    ("wrong_stride", "small_swish", {"stride"}, {}),
    ("wrong_shape", "small_swish", {"shape"}, {}),
    ("nondeterministic", "small_swish", {"nondeterministic"}, {}),
]

GOOD = [
    ("rmsnorm_torch", "small_rmsnorm", {}),
    ("gemm_torch", "small_gemm", {}),
    ("nearconst_torch", "small_nearconst", {}),
    ("residual_torch", "small_residual", {}),
    ("moe_gather_bmm", "small_moe", {"precision": "bf16"}),
    ("swish_torch", "small_swish", {"time_it": True}),
    ("swish_triton", "small_swish", {}),
    ("moelab_fused_moe", "small_moe", {}),  # moelab's own Triton MoE, interpreted on CPU
]


def _run(cand: str, prob: str, extra: dict):
    kw = {"trials": 2, "time_it": False, "compile": False, "samples": 3, "timeout_s": 120.0, **extra}
    return verify(C / f"{cand}.py", P / f"{prob}.py", **kw)


@pytest.mark.parametrize("cand,prob,codes,extra", BAD, ids=[b[0] for b in BAD])
def test_bad_candidate_fails_with_its_reason(cand, prob, codes, extra):
    v = _run(cand, prob, extra)
    assert not v.passed
    missing = codes - set(v.codes)
    assert not missing, f"{cand}: missing {missing}; got {[(r.code, r.message) for r in v.reasons]}"


@pytest.mark.parametrize("cand,prob,extra", GOOD, ids=[g[0] for g in GOOD])
def test_honest_candidate_passes(cand, prob, extra):
    v = _run(cand, prob, extra)
    assert v.passed, [(r.code, r.message) for r in v.reasons]
    assert v.checks["correct"] and v.checks["deterministic"] and v.checks.get("other_shape") is not False
    if extra.get("time_it"):
        assert v.times["candidate_us"] > 0 and v.times["eager_us"] > 0
        assert v.checks["not_cached"] and v.checks["after_timing"]


def test_empty_output_is_poisoned():
    """torch.empty_like must not hand back a stale answer: the memory is NaN-poisoned before each call."""
    v = _run("empty_output", "small_rmsnorm", {"time_it": True})
    assert not v.passed
    assert {"nan", "incorrect"} & set(v.codes), v.reasons


@pytest.mark.skipif(not torch.cuda.is_available(), reason="side streams need a CUDA GPU")
def test_side_stream_is_caught():
    v = _run("side_stream", "small_swish", {"time_it": True, "profile": True})
    assert {"side_stream", "static_stream"} <= set(v.codes), v.reasons


def test_network_is_cut_where_the_os_allows():
    from moelab.verify.sandbox import network_prefix

    v = _run("network", "small_swish", {})
    assert "crash" in v.codes
    if not network_prefix(torch.cuda.is_available()):
        pytest.skip("no usable `unshare -n` here: the verdict records the network as not isolated")
    assert v.isolation["network"].startswith("isolated")
    assert any("unreachable" in r.message for r in v.reasons), v.reasons
