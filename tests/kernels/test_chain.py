"""The decode step's PDL chain (`kernels.chain_pdl`): which launch flags each launcher passes, on the CPU.

Under the interpreter PDL is off, so these tests pretend to be on a Hopper GPU and replace each Triton kernel by a
recorder of its launch arguments: a kernel launched with PDL must wait (`USE_PDL`), and one that waits must be
launched with PDL; the chain holds up to CHAIN_MAX_T rows and is off beyond. What the kernels do with the flags is
checked by their sm_90 compile tests and, on the GPU, by the bf16 and graph-replay tests.
"""

import pytest
import torch

from moelab.kernels import CHAIN_MAX_T, attention, linear, moe_decode, moe_pairs, rmsnorm, router


class Recorder:
    """Stands in for a `triton.jit` kernel: `kernel[grid](*args, **kwargs)` records the keyword arguments."""

    def __init__(self):
        self.calls: list[dict] = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append(kwargs)


@pytest.fixture(autouse=True)
def _cpu_tensors(monkeypatch):
    """The tensors here are CPU tensors and the kernels recorders, so the launchers' device check is told it is
    interpreted (on the GPU machine it refused the CPU tensors: session 17)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture
def hopper(monkeypatch):
    """PDL as on an H200: `pdl_supported` true, `chain_pdl` true for rows ≤ CHAIN_MAX_T, in every launcher."""
    for mod in (attention, rmsnorm, moe_pairs, moe_decode, router):
        if hasattr(mod, "pdl_supported"):
            monkeypatch.setattr(mod, "pdl_supported", lambda device: True)
        if hasattr(mod, "chain_pdl"):
            monkeypatch.setattr(mod, "chain_pdl", lambda device, rows: rows <= CHAIN_MAX_T)


def record(monkeypatch, mod, name):
    rec = Recorder()
    monkeypatch.setattr(mod, name, rec)
    return rec


def pdl_pairs_with_wait(kw):
    assert bool(kw.get("launch_pdl")) == bool(kw["USE_PDL"]), kw  # launched with PDL ⇔ the kernel waits


@pytest.mark.parametrize("rows", [1, 2, 3, 8, 9])
def test_norm_joins_the_chain_up_to_chain_max_t_rows(hopper, monkeypatch, rows):
    rec = record(monkeypatch, rmsnorm, "_add_rmsnorm_kernel")
    x = torch.randn(rows, 64)
    rmsnorm.add_rmsnorm(x, torch.randn(rows, 64), torch.ones(64), 1e-6)
    (kw,) = rec.calls
    pdl_pairs_with_wait(kw)
    assert kw["USE_PDL"] == (rows <= CHAIN_MAX_T) and kw["TRIGGER"]


def test_norm_with_a_copied_weight_is_not_pdl_launched(hopper, monkeypatch):
    """The kernel reads the weight before its wait: a copy made just now would not be visible there yet."""
    rec = record(monkeypatch, rmsnorm, "_add_rmsnorm_kernel")
    strided = torch.ones(128)[::2]
    rmsnorm.add_rmsnorm(torch.randn(1, 64), None, strided, 1e-6)
    (kw,) = rec.calls
    pdl_pairs_with_wait(kw)
    assert not kw["USE_PDL"]


def _attention_kv(b, q_weight=None, splits=5):  # 5: past MERGE_MAX_SPLITS, so the combine runs
    hq, hk, d, s_max = 8, 1, 16, 512
    q, k, v = torch.randn(b, hq, d), torch.randn(b, hk, d), torch.randn(b, hk, d)
    qw = torch.ones(d) if q_weight is None else q_weight
    kc, vc = torch.zeros(b, hk, s_max, d), torch.zeros(b, hk, s_max, d)
    attention.decode_attention_kv(q, k, v, qw, torch.ones(d), torch.full((b,), 300), kc, vc, eps=1e-6,
                                  rope_theta=1e4, num_splits=splits)


@pytest.mark.parametrize("b", [1, 2, 3, 9])
def test_attention_split_releases_a_pdl_combine_in_the_chain(hopper, monkeypatch, b):
    split = record(monkeypatch, attention, "_split_kernel")
    combine = record(monkeypatch, attention, "_combine_kernel")
    _attention_kv(b)
    (s,), (c,) = split.calls, combine.calls
    pdl_pairs_with_wait(s)
    pdl_pairs_with_wait(c)
    assert s["USE_PDL"]  # always released early by the qkv GEMV
    chain = b <= CHAIN_MAX_T
    assert s["TRIGGER"] == (2 if chain else 0)  # after its prologue; without the chain the combine is a plain launch
    assert c["USE_PDL"] == chain and c["TRIGGER"]


@pytest.mark.parametrize("b", [1, 3, 9])
def test_attention_in_one_split_releases_the_o_projection(hopper, monkeypatch, b):
    split = record(monkeypatch, attention, "_split_kernel")
    combine = record(monkeypatch, attention, "_combine_kernel")
    _attention_kv(b, splits=1)
    (s,) = split.calls
    assert not combine.calls and s["FINAL"]
    assert s["TRIGGER"] == (2 if b <= CHAIN_MAX_T else 1)


@pytest.mark.parametrize("b", [1, 9])
def test_attention_merging_its_splits_releases_the_o_projection(hopper, monkeypatch, b):
    """Up to MERGE_MAX_SPLITS splits the split kernel merges them itself: no combine, and it releases what follows
    as the one-split form does."""
    split = record(monkeypatch, attention, "_split_kernel")
    combine = record(monkeypatch, attention, "_combine_kernel")
    _attention_kv(b, splits=4)
    (s,) = split.calls
    assert not combine.calls and s["MERGE"] and not s["FINAL"]
    pdl_pairs_with_wait(s)
    assert s["TRIGGER"] == (2 if b <= CHAIN_MAX_T else 1)


def test_attention_with_a_copied_norm_weight_is_not_pdl_launched(hopper, monkeypatch):
    split = record(monkeypatch, attention, "_split_kernel")
    record(monkeypatch, attention, "_combine_kernel")
    _attention_kv(1, q_weight=torch.ones(32)[::2])
    (s,) = split.calls
    pdl_pairs_with_wait(s)
    assert not s["USE_PDL"]


@pytest.mark.parametrize("T", [1, 3, 9])
def test_router_releases_the_experts_in_the_chain(hopper, monkeypatch, T):
    rec = record(monkeypatch, router, "_router_kernel")
    router.router(torch.randn(T, 32), torch.randn(8, 32), 2)
    (kw,) = rec.calls
    pdl_pairs_with_wait(kw)
    assert kw["TRIGGER"] == (T <= CHAIN_MAX_T)


@pytest.mark.parametrize("path,T", [("pairs", 1), ("pairs", 2), ("pairs", 4), ("decode", 3), ("decode", 8),
                                    ("decode", 9)])
def test_experts_kernel_waits_for_the_router_and_releases_the_norm(hopper, monkeypatch, path, T):
    """The pair kernel (T ≤ 4) and the census kernel in the chain: PDL-launched ⇔ waiting, and releasing the norm."""
    mod = moe_pairs if path == "pairs" else moe_decode
    rec = record(monkeypatch, mod, f"_moe_{path}_kernel")
    E, H, I, k = 8, 32, 16, 2
    ids = torch.stack([torch.randperm(E)[:k] for _ in range(T)]).int()
    getattr(mod, f"moe_{path}")(torch.randn(T, H), torch.randn(E, 2 * I, H), torch.randn(E, H, I), torch.rand(T, k),
                                ids, out=torch.empty(T, H))
    kw = rec.calls[0]
    pdl_pairs_with_wait(kw)
    assert kw["USE_PDL"] == kw["TRIGGER"] == (T <= CHAIN_MAX_T)
    if path == "pairs" and moe_pairs.pairs_two(T, I, False):
        # Two kernels: phase 1 (above) waits for the router and releases phase 2, which is PDL-launched without a
        # wait of its own (the chain's one exception: it polls phase 1's counters) and releases the norm.
        one, two = rec.calls
        assert one["PHASE"] == 1 and two["PHASE"] == 2 and two["PID0"] == one["N1"]
        assert two["launch_pdl"] and not two["USE_PDL"] and two["TRIGGER"]
    else:
        assert len(rec.calls) == 1


def test_chain_max_t_is_read_at_launch(monkeypatch):
    """MOELAB_CHAIN_MAX_T moves the chain's bound at launch time (benchmarks/ab_chain.py's A/B); unset, CHAIN_MAX_T."""
    import moelab.kernels as k
    monkeypatch.setattr(k, "pdl_supported", lambda device: True)
    dev = torch.device("cuda")
    monkeypatch.delenv("MOELAB_CHAIN_MAX_T", raising=False)
    assert k.chain_pdl(dev, CHAIN_MAX_T) and not k.chain_pdl(dev, CHAIN_MAX_T + 1)
    monkeypatch.setenv("MOELAB_CHAIN_MAX_T", "2")
    assert k.chain_pdl(dev, 2) and not k.chain_pdl(dev, 3)


@pytest.mark.parametrize("K,block_k,whole", [(300, 512, True), (300, 128, False), (1000, 1024, True)])
def test_linear_takes_the_one_chunk_path_exactly_when_a_split_is_one_chunk(monkeypatch, K, block_k, whole):
    rec = record(monkeypatch, linear, "_linear_kernel")
    linear.linear(torch.randn(1, K), torch.randn(8, K), config=dict(BLOCK_K=block_k))
    (kw,) = rec.calls
    assert kw["WHOLE_K"] is whole and not kw["USE_PDL"] and "launch_pdl" not in kw


@pytest.mark.parametrize("use_pdl,release_early", [(True, True), (True, False), (False, True)])
def test_linear_releases_early_only_when_asked_and_pdl_launched(monkeypatch, use_pdl, release_early):
    """`linear(release_early=True)` compiles the release at the program's start (EARLY) only in a PDL launch; by default
    the release stays after the sum (the sm_90 PTX of both: test_linear.py)."""
    monkeypatch.setattr(linear, "interpreting", lambda: False)
    monkeypatch.setattr(linear, "_major", lambda device: 9)
    rec = record(monkeypatch, linear, "_linear_kernel")
    linear.linear(torch.randn(1, 256), torch.randn(8, 256), use_pdl=use_pdl, release_early=release_early)
    (kw,) = rec.calls
    pdl_pairs_with_wait(kw)
    assert kw["EARLY"] == (use_pdl and release_early)


@pytest.mark.parametrize("rows,asked,early", [(1, True, True), (1, False, False), (2, True, False)])
def test_recurrence_reads_its_state_early_only_when_asked_at_one_row(monkeypatch, rows, asked, early):
    """`gdn_recurrence(state_early=True)` (the engine) reads the state before its PDL wait up to GDN_STATE_EARLY_MAX_T
    (1) rows; a caller who does not ask (the public op) never gets it."""
    from moelab.kernels import gdn
    monkeypatch.delenv("MOELAB_GDN_STATE_EARLY_MAX_T", raising=False)
    monkeypatch.setattr(gdn, "gdn_pdl", lambda device, rows: True)
    rec = record(monkeypatch, gdn, "_gdn_recurrence_kernel")
    B, HK, HV, DK, DV = rows, 2, 4, 16, 16
    q, k = torch.randn(B, HK, DK), torch.randn(B, HK, DK)
    gdn.gdn_recurrence(q, k, torch.randn(B, HV, DV), torch.randn(B, HV), torch.randn(B, HV), torch.randn(HV),
                       torch.randn(HV), torch.zeros(B, HV, DK, DV), state_early=asked)
    (kw,) = rec.calls
    assert kw["PDL"] and kw["launch_pdl"] and kw["STATE_EARLY"] == early
