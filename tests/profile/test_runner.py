"""`runner.profile` end to end on a CPU with tiny configs of real families and a fake timer: every graph
op covered once, counts and totals consistent, the chained step and its gap, moelab's kernels chained
(under the Triton interpreter) against the eager chain."""

from __future__ import annotations

import os

import pytest
import torch

from moelab import hardware
from moelab.errors import UserError
from moelab.models import decode_step_ops, load_spec, spec_from_config
from moelab.profile import runner
from tests.profile.conftest import _tiny_qwen3_moe, _tiny_qwen35


def _profile(cfg, **kw):
    spec = spec_from_config(cfg, source="tiny", name="tiny")
    args = dict(batch=2, ctxs=[16], tp=1, impls=("eager",), ceilings=hardware.ceilings("h200"),
                meter=runner.make_meter(5))
    args.update(kw)
    return spec, runner.profile(spec, **args)


@pytest.mark.parametrize("cfg", [_tiny_qwen3_moe, _tiny_qwen35], ids=["qwen3_moe", "qwen3_5_moe"])
def test_units_cover_the_graph_and_counts_times_add_up(fake_meter, cfg):
    spec, res = _profile(cfg(), ctxs=[16, 64])
    graph = decode_step_ops(spec, batch=2, ctx=16, tp=1)
    rows = res["per_ctx"][0]["ops"]
    covered = [c for r in rows for c in r["covers"]]
    assert sorted(covered) == sorted(o.name for o in graph)  # every op once, none twice
    counts = {o.name: o.count for o in graph}
    for r in rows:
        assert all(counts[c] == r["count"] for c in r["covers"])
    bd = res["per_ctx"][0]["breakdown"]["eager"]
    # fake timer: 10 µs graph-replayed; the expert loop cannot be captured, so its host 25 µs counts
    want = sum(r["count"] * (25.0 if r["name"] == "experts" else 10.0) for r in rows)
    assert bd["total_us"] == pytest.approx(want)
    assert sum(o["share"] for o in bd["ops"]) == pytest.approx(1.0)
    assert bd["launches_sum"] == 3 * sum(r["count"] for r in rows)
    st = res["step"]
    assert st["built_layers"] == spec.layers and not st["scaled"]
    e = st["impls"]["eager"]
    assert e["host_us"] == 2000.0 and e["graph_us"] is None and "expert loop" in e["graph_error"]
    assert e["gap"]["gap_host_us"] == pytest.approx(2000.0 - want)
    assert e["gap"]["gap_per_launch_us"] == pytest.approx((2000.0 - want) / 100)
    assert e["rel_err_vs_eager"] == 0.0
    # --ctx sweep: attention re-measured, its floor grows with the context
    att = [next(r for r in pc["ops"] if r["name"].endswith("attention")) for pc in res["per_ctx"]]
    assert att[1]["floor_us"] > att[0]["floor_us"]
    assert [r["ctx"] for r in res["sweep"]] == [16, 64]
    if spec.layer_types.count("linear_attention"):
        gdn = [r for r in rows if r["name"].startswith("gdn.")]
        assert len(gdn) == 5 and any("Gated DeltaNet" in n for n in res["notes"])


def test_tp_shards_shapes_and_estimates_collectives(fake_meter):
    spec, res = _profile(_tiny_qwen35(), tp=2)
    rows = {r["name"]: r for r in res["per_ctx"][0]["ops"]}
    for name in ("allreduce.attention", "allreduce.moe", "allgather.logits"):
        assert rows[name]["estimated"] and rows[name]["impls"] == {}
    bd = res["per_ctx"][0]["breakdown"]["eager"]
    est = sum(r["count"] * r["floor_us"] for r in rows.values() if r["estimated"])
    assert bd["estimated_us"] == pytest.approx(est) and est > 0
    assert rows["experts"]["shapes"]["experts.gate_up"]["N"] == 32  # 2·I / tp = 2·32 / 2
    assert any("estimated" in n for n in res["notes"])


def test_scaled_chain_when_the_model_does_not_fit(fake_meter):
    spec, res = _profile(_tiny_qwen35(), budget_bytes=1000)
    st = res["step"]  # one layer pattern (3 GDN + 1 attention) is the least built: here, the whole model
    assert not st["scaled"] and st["built_layers"] == 4 and not st["fits_budget"]
    cfg = _tiny_qwen35()
    cfg["text_config"].update(num_hidden_layers=8, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2)
    spec, res = _profile(cfg, budget_bytes=400_000)
    st = res["step"]
    assert st["scaled"] and st["built_layers"] == 4 and "step = head + layers" in st["note"]
    # head 2000 + layers 2000 × 8/4: the fake timer gives every chain 2000 µs host-launched
    assert st["impls"]["eager"]["host_us"] == pytest.approx(2000.0 + 2000.0 * 2)
    assert st["impls"]["eager"]["launches"] == 100 + 100 * 2


def test_moelab_chain_with_the_conv_in_the_projection(fake_meter, monkeypatch):
    """At batch 1 (GDN_CONV_IN_PROJ_MAX_T, the default) the chained step runs `linear_conv` as the engine does (its
    output still eager's), and says so; the per-op table keeps gdn.conv as a unit of its own."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs the Triton interpreter (on a GPU machine tests/profile/test_gpu.py runs the real chain)")
    monkeypatch.delenv("MOELAB_GDN_CONV_IN_PROJ", raising=False)
    from moelab.kernels import linear as linear_mod

    convs, real = [], linear_mod._linear_kernel

    class Counting:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                convs.append(kwargs.get("CONV", False))
                return real[grid](*args, **kwargs)
            return launch

    monkeypatch.setattr(linear_mod, "_linear_kernel", Counting())
    spec, res = _profile(_tiny_qwen35(), impls=("eager", "moelab"), dtype=torch.float16, batch=1)
    assert 0.0 < res["step"]["impls"]["moelab"]["rel_err_vs_eager"] < 1e-2
    assert any(convs) and any("linear_conv" in n for n in res["notes"])
    assert "gdn.conv" in {r["name"] for r in res["per_ctx"][0]["ops"]}


# The fused router up to fused_router_max_t(E) rows (8 at the tiny model's E); MOELAB_FUSED_ROUTER_MAX_T=1 gives the two-launch form at 2.
@pytest.mark.parametrize("batch,fused_max,router", [(1, None, "router+topk"), (2, None, "router+topk"),
                                                    (2, "1", "router.topk")])
def test_moelab_chain_matches_eager_under_the_interpreter(fake_meter, batch, fused_max, router, monkeypatch):
    if os.environ.get("TRITON_INTERPRET") != "1":  # fake_meter profiles on the CPU: the kernels must be interpreted
        pytest.skip("needs the Triton interpreter (on a GPU machine tests/profile/test_gpu.py runs the real chain)")
    if fused_max is None:
        monkeypatch.delenv("MOELAB_FUSED_ROUTER_MAX_T", raising=False)
    else:
        monkeypatch.setenv("MOELAB_FUSED_ROUTER_MAX_T", fused_max)
    spec, res = _profile(_tiny_qwen35(), impls=("eager", "moelab"), dtype=torch.float16, batch=batch)
    m = res["step"]["impls"]["moelab"]
    assert 0.0 < m["rel_err_vs_eager"] < 1e-2
    assert m["graph_us"] == 500.0  # the moelab step is captured (fake timer), the eager one is not
    assert res["per_ctx"][0]["breakdown"]["moelab"]["missing"] == []
    errs = {r["name"]: r["impls"]["moelab"]["rel_err_vs_eager"] for r in res["per_ctx"][0]["ops"]
            if not r["estimated"] and not r["torch_only"]}
    assert set(errs) >= {"add_rmsnorm", "qk_norm_rope+attention", router, "experts", "gdn.conv", "gdn.recurrence",
                         "gdn.norm_gate"}
    assert all(e < 2e-3 for e in errs.values()), errs  # fp16 tolerance of tests/kernels
    # At batch 1 the chained step runs the post-attention norm inside the router's launch, as the engine does, and says so.
    assert any("add_rmsnorm_router" in n for n in res["notes"]) == (batch == 1)


def test_rel_err_catches_a_wrong_output():
    ref = (torch.ones(4), torch.tensor([1, 2, 3, 4]))
    assert runner.rel_err(ref, ref) == 0.0
    assert runner.rel_err((torch.ones(4) * 1.1, ref[1]), ref) == pytest.approx(0.1)
    assert runner.rel_err((ref[0], torch.tensor([1, 2, 3, 5])), ref) == 0.25


def test_the_check_compares_states_written_in_place():
    """An op that updates a state in place (the Gated DeltaNet ops, the KV append): each side runs on its own copy
    (so neither reads a state the other advanced), and a kernel that returns the right output but writes a wrong
    state is caught; the caller's set is left as it was."""
    from types import SimpleNamespace

    def right(x, state):
        state.add_(x)
        return state * 2

    def wrong(x, state):
        out = (state + x) * 2
        state.add_(2 * x)
        return out

    args = (torch.ones(4), torch.zeros(4))
    assert runner._check(SimpleNamespace(fns={"moelab": right, "eager": right}), args) == 0.0
    assert runner._check(SimpleNamespace(fns={"moelab": wrong, "eager": right}), args) == pytest.approx(1.0)
    assert torch.equal(args[1], torch.zeros(4))


def test_unsupported_models_and_impls_say_so(fake_meter):
    with pytest.raises(UserError, match="MLA"):
        runner.profile(load_spec("deepseek-v3"), batch=1, ctxs=[16], tp=1, impls=("eager",),
                       ceilings=hardware.ceilings("h200"))
    with pytest.raises(UserError, match="--impl"):
        _profile(_tiny_qwen3_moe(), impls=("fast",))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_without_a_gpu_it_says_so():
    with pytest.raises(UserError, match="needs a GPU|GPU and none"):
        runner.require_gpu()
