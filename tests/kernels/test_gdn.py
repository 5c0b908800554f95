"""Gated DeltaNet decode kernels (conv, recurrence, gated norm) against the references of moelab.ops.gdn
(CPU: the Triton interpreter; bf16 there is held to TOL, since the interpreter rounds fp32 -> bf16 toward zero)."""

import pytest
import torch

from moelab import ops
from moelab.kernels import gdn
from moelab.ops.gdn import gdn_conv_reference, gdn_norm_gate_reference, gdn_recurrence_reference

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _rec_inputs(B, HK, HV, DK, DV, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)

    def t(*s, scale=1.0):
        return (torch.randn(*s, generator=g) * scale).to(dtype).to(DEV)

    state = (torch.randn(B, HV, DK, DV, generator=g) * 0.1).to(DEV)
    return (t(B, HK, DK), t(B, HK, DK), t(B, HV, DV), t(B, HV), t(B, HV), t(HV, scale=0.5), t(HV, scale=0.5), state)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,HK,HV,DK,DV", [(1, 4, 8, 128, 128),  # Qwen3.5-35B-A3B at tp=4
                                           (3, 2, 4, 48, 40),     # odd head sizes, two value heads a key head
                                           (2, 3, 3, 16, 130),    # one value head a key head, Dv past 4 blocks
                                           (1, 1, 1, 1, 1)])
def test_recurrence_matches_reference_over_steps(B, HK, HV, DK, DV, dtype, close):
    """Three decode steps in a row: the outputs and the state carried in place stay with the reference's."""
    *args, state = _rec_inputs(B, HK, HV, DK, DV, dtype)
    s_ref, s_got = state.clone(), state.clone()
    for step in range(3):
        args[2] = args[2].roll(1, dims=-1)  # a new v each step
        ref = gdn_recurrence_reference(*args, s_ref)
        got = gdn.gdn_recurrence(*args, s_got)
        close(got, ref)
        # fp32 state: the same sums in another order; but β is rounded to bf16, which the interpreter truncates
        close(s_got, s_ref, tol=2e-2 if dtype == torch.bfloat16 and DEV == "cpu" else 1e-5)


@pytest.mark.parametrize("block_v", ["8", "16"])
def test_recurrence_narrow_column_blocks(monkeypatch, block_v, close):
    """$MOELAB_GDN_BLOCK_V (more programs, fewer state columns each) computes the same step, Dv past its blocks."""
    *args, state = _rec_inputs(2, 2, 4, 32, 40, torch.float32)
    s_ref, s_got = state.clone(), state.clone()
    ref = gdn_recurrence_reference(*args, s_ref)
    monkeypatch.setenv("MOELAB_GDN_BLOCK_V", block_v)
    close(gdn.gdn_recurrence(*args, s_got), ref)
    close(s_got, s_ref, tol=1e-5)
    s_kw = state.clone()
    monkeypatch.delenv("MOELAB_GDN_BLOCK_V")
    close(gdn.gdn_recurrence(*args, s_kw, block_v=int(block_v)), ref)  # the keyword (benchmarks/bench_gdn.py)
    close(s_kw, s_ref, tol=1e-5)
    monkeypatch.setenv("MOELAB_GDN_BLOCK_V", "12")
    with pytest.raises(ValueError, match=r"block_v \(or \$MOELAB_GDN_BLOCK_V\) must be a power of two, not 12"):
        gdn.gdn_recurrence(*args, s_got)
    monkeypatch.setenv("MOELAB_GDN_BLOCK_V", block_v)
    monkeypatch.setenv("MOELAB_GDN_WARPS", "3")
    with pytest.raises(ValueError, match=r"num_warps \(or \$MOELAB_GDN_WARPS\) must be a power of two, not 3"):
        gdn.gdn_recurrence(*args, s_got)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T", [1, 5])
def test_a_prompt_in_one_launch_each(T, dtype, close):
    """A prefill: conv, recurrence and gated norm over [B, T, ...] in one launch each (the kernels walk the tokens
    in order, the states in registers) give the reference's outputs and leave its states, from nonzero states."""
    B, HK, HV, DK, DV, C, K = 2, 2, 4, 16, 12, 2 * 2 * 16 + 4 * 12, 4
    g = torch.Generator().manual_seed(T)

    def t(*s_, scale=1.0):
        return (torch.randn(*s_, generator=g) * scale).to(dtype).to(DEV)

    x, cs, w = t(B, T, C), t(B, C, K - 1), t(C, K, scale=0.5)
    c_ref, c_got = cs.clone(), cs.clone()
    close(gdn.gdn_conv(x, c_got, w), gdn_conv_reference(x, c_ref, w))
    assert torch.equal(c_got, c_ref)
    q, k, v, b, a = t(B, T, HK, DK), t(B, T, HK, DK), t(B, T, HV, DV), t(B, T, HV), t(B, T, HV)
    a_log, dt_bias = t(HV, scale=0.5), t(HV, scale=0.5)
    st = (torch.randn(B, HV, DK, DV, generator=g) * 0.1).to(DEV)
    s_ref, s_got = st.clone(), st.clone()
    o = gdn.gdn_recurrence(q, k, v, b, a, a_log, dt_bias, s_got)
    close(o, gdn_recurrence_reference(q, k, v, b, a, a_log, dt_bias, s_ref))
    close(s_got, s_ref, tol=2e-2 if dtype == torch.bfloat16 and DEV == "cpu" else 1e-5)
    z, nw = t(B, T, HV, DV), t(DV, scale=0.1) + 1
    got = gdn.gdn_norm_gate(o, z, nw, 1e-6)
    assert got.shape == (B, T, HV * DV)
    close(got, gdn_norm_gate_reference(o, z, nw, 1e-6))


def test_recurrence_takes_views_of_one_projection(close):
    """As the profile's step (and a model) hands them over: q, k, v, b and a are slices of one projection's output,
    strided in their rows."""
    B, HK, HV, DK, DV = 2, 2, 4, 32, 24
    g = torch.Generator().manual_seed(1)
    proj = torch.randn(B, 2 * HK * DK + HV * DV + 2 * HV, generator=g).to(DEV)
    q, k, v, b, a = proj.split([HK * DK, HK * DK, HV * DV, HV, HV], dim=-1)
    q, k, v = q.reshape(B, HK, DK), k.reshape(B, HK, DK), v.reshape(B, HV, DV)
    a_log, dt_bias = torch.randn(HV, generator=g).to(DEV), torch.randn(HV, generator=g).to(DEV)
    state = (torch.randn(B, HV, DK, DV, generator=g) * 0.1).to(DEV)
    s_ref = state.clone()
    close(gdn.gdn_recurrence(q, k, v, b, a, a_log, dt_bias, state),
          gdn_recurrence_reference(q, k, v, b, a, a_log, dt_bias, s_ref))
    close(state, s_ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,C,K", [(1, 3072, 4), (3, 100, 4), (2, 7, 3), (1, 5, 2)])
def test_conv_matches_reference_and_shifts_the_state(B, C, K, dtype, close):
    g = torch.Generator().manual_seed(C)
    x = torch.randn(B, C, generator=g).to(dtype).to(DEV)
    state = torch.randn(B, C, K - 1, generator=g).to(dtype).to(DEV)
    w = (torch.randn(C, K, generator=g) * K ** -0.5).to(dtype).to(DEV)
    s_ref, s_got = state.clone(), state.clone()
    for _ in range(2):  # two tokens: the second reads the state the first shifted
        close(gdn.gdn_conv(x, s_got, w), gdn_conv_reference(x, s_ref, w))
        assert torch.equal(s_got, s_ref)  # a shift: no arithmetic, the same bits
        x = x.flip(-1)


@pytest.mark.parametrize("o_dtype,w_dtype", [(torch.float32, torch.float32), (torch.float16, torch.float16),
                                             (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32)])
@pytest.mark.parametrize("B,HV,DV", [(1, 8, 128), (3, 5, 40)])
def test_norm_gate_matches_reference(B, HV, DV, o_dtype, w_dtype, close):
    """The weight's product is rounded in the promoted dtype of the weight and o, as HF's `weight * h.to(dtype)`."""
    g = torch.Generator().manual_seed(HV)
    o = (3 * torch.randn(B, HV, DV, generator=g)).to(o_dtype).to(DEV)
    z = torch.randn(B, HV, DV, generator=g).to(o_dtype).to(DEV)
    w = (1 + 0.1 * torch.randn(DV, generator=g)).to(w_dtype).to(DEV)
    close(gdn.gdn_norm_gate(o, z, w, 1e-6), gdn_norm_gate_reference(o, z, w, 1e-6))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_references_are_transformers_qwen3_5_moe(dtype):
    """The three references give transformers' own functions' bits (its Qwen3.5-MoE Gated DeltaNet decode path: the
    recurrent rule with the q/k l2norm, the conv update with SiLU, the gated RMSNorm), on the CPU."""
    tr = pytest.importorskip("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")
    F = torch.nn.functional
    B, HK, HV, DK, DV = 2, 2, 4, 16, 12
    g_ = torch.Generator().manual_seed(7)

    def t(*s_, scale=1.0):
        return (torch.randn(*s_, generator=g_) * scale).to(dtype)

    q, k, v, b, a, a_log, dt_bias = t(B, HK, DK), t(B, HK, DK), t(B, HV, DV), t(B, HV), t(B, HV), t(HV), t(HV)
    state = torch.randn(B, HV, DK, DV, generator=g_) * 0.1
    g = -a_log.float().exp() * F.softplus(a.float() + dt_bias)
    # transformers 5.17 (the GPU machine's) expects q and k already repeated to the value heads (the layer does it);
    # newer versions repeat inside the function and take either. Value head h reads key head h // (HV // HK).
    qr, kr = (x.repeat_interleave(HV // HK, dim=1) for x in (q, k))
    want, want_state = tr.torch_recurrent_gated_delta_rule(
        qr[:, None], kr[:, None], v[:, None], g=g[:, None], beta=b.sigmoid()[:, None], initial_state=state.clone(),
        output_final_state=True, use_qk_l2norm_in_kernel=True)
    got_state = state.clone()
    got = gdn_recurrence_reference(q, k, v, b, a, a_log, dt_bias, got_state)
    assert torch.equal(got, want[:, 0]) and torch.equal(got_state, want_state)

    C, K = 10, 4
    x, conv_state, w = t(B, C), t(B, C, K - 1), t(C, K, scale=0.5)
    hf_state = conv_state.clone()
    want = tr.causal_conv1d_update(x[:, :, None], hf_state, w, None, "silu")[:, :, 0]
    got = gdn_conv_reference(x, conv_state, w)
    assert torch.equal(conv_state, hf_state)
    if dtype == torch.float32:  # F.conv1d sums the K taps in its own order: the last bit may differ
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    else:  # rounded to bf16 after the sum and after SiLU, as transformers does: the same bits
        assert torch.equal(got, want)

    o, z = t(B, HV, DV, scale=3.0), t(B, HV, DV)
    norm = tr.Qwen3_5MoeRMSNormGated(DV, eps=1e-6).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.1 * torch.randn(DV, generator=g_))
        want = norm(o.reshape(-1, DV), z.reshape(-1, DV)).reshape(B, HV * DV)
    assert torch.equal(gdn_norm_gate_reference(o, z, norm.weight.detach(), 1e-6), want)


def test_registered_kernels_are_these():
    assert ops.get("gdn_conv", "moelab") is gdn.gdn_conv
    assert ops.get("gdn_recurrence", "moelab") is gdn.gdn_recurrence
    assert ops.get("gdn_norm_gate", "moelab") is gdn.gdn_norm_gate
    assert ops.get("gdn_recurrence", "eager") is gdn_recurrence_reference


def test_empty_batch():
    *args, state = _rec_inputs(0, 2, 4, 8, 8, torch.float32)
    assert gdn.gdn_recurrence(*args, state).shape == (0, 4, 8)
    assert gdn.gdn_conv(torch.empty(0, 6, device=DEV), torch.empty(0, 6, 3, device=DEV),
                        torch.ones(6, 4, device=DEV)).shape == (0, 6)
    assert gdn.gdn_norm_gate(torch.empty(0, 2, 8, device=DEV), torch.empty(0, 2, 8, device=DEV),
                             torch.ones(8, device=DEV), 1e-6).shape == (0, 16)


def test_errors_name_what_is_wrong():
    *args, state = _rec_inputs(1, 2, 4, 8, 8, torch.float32)
    with pytest.raises(ValueError, match="state must be a contiguous float32"):
        gdn.gdn_recurrence(*args, state.half())
    with pytest.raises(ValueError, match=r"a_log must be \[4\]"):
        gdn.gdn_recurrence(*args[:5], args[5][:3], args[6], state)
    q, k, v = args[:3]
    with pytest.raises(ValueError, match="value heads \\(3\\) must be a multiple of the key heads \\(2\\)"):
        gdn.gdn_recurrence(q, k, v[:, :3], *args[3:], state)
    with pytest.raises(ValueError, match="contiguous in its last dimension"):
        gdn.gdn_recurrence(q.transpose(1, 2).contiguous().transpose(1, 2), k, *args[2:], state)
    x, st, w = torch.randn(1, 6, device=DEV), torch.randn(1, 6, 3, device=DEV), torch.ones(6, 4, device=DEV)
    with pytest.raises(ValueError, match=r"the state must be \[1, 6, 3\], got \(1, 6, 2\)"):
        gdn.gdn_conv(x, st[..., :2], w)
    with pytest.raises(ValueError, match="state must be torch.float32 on"):
        gdn.gdn_conv(x, st.half(), w)
    with pytest.raises(ValueError, match=r"w \[Dv\]"):
        gdn.gdn_norm_gate(torch.randn(1, 2, 8, device=DEV), torch.randn(1, 2, 8, device=DEV),
                          torch.ones(7, device=DEV), 1e-6)
    with pytest.raises(ValueError, match="must be float16, bfloat16 or float32"):
        gdn.gdn_norm_gate(torch.randn(1, 2, 8, device=DEV).double(), torch.randn(1, 2, 8, device=DEV).double(),
                          torch.ones(8, device=DEV), 1e-6)


@pytest.mark.parametrize("job", ["gdn_conv", "gdn_recurrence", "gdn_norm_gate"])
def test_compiles_for_sm90(sm90, job):
    """The interpreter does not compile: each kernel at Qwen3.5's tp=4 shapes, for an H100/H200; plain, it carries
    no griddepcontrol; in the PDL chain it releases the next kernel before it waits, and stores nothing before."""
    for name in (job, job + "_pdl"):
        assert "error" not in sm90[name], (name, sm90[name].get("error"))
    assert ".entry" in sm90[job]["ptx"] and "griddepcontrol" not in sm90[job]["ptx"]
    ptx = sm90[job + "_pdl"]["ptx"]
    wait = ptx.index("griddepcontrol.wait")
    assert ptx.index("griddepcontrol.launch_dependents") < wait < ptx.index("st.global")
    # Before the wait only the weights are read: conv's [128, 4] w tile (4 loads a thread, Triton 3.9), A_log and
    # dt_bias, the gated norm's weight. The state or the activations there would add loads (the state alone 8+).
    assert ptx[:wait].count("ld.global") <= {"gdn_conv": 4, "gdn_recurrence": 2, "gdn_norm_gate": 1}[job]


def test_compiles_for_sm90_state_early(sm90):
    """The chain's form at one row (GDN_STATE_EARLY_MAX_T): the state's loads (8+ a thread) move before
    griddepcontrol.wait, and still nothing is stored before it."""
    job = sm90["gdn_recurrence_state_early"]
    assert "error" not in job, job.get("error")
    ptx = job["ptx"]
    wait = ptx.index("griddepcontrol.wait")
    assert ptx[:wait].count("ld.global") >= 8 + 2
    assert "st.global" not in ptx[:wait]
    shipped = sm90["gdn_recurrence_pdl"]["ptx"]
    assert shipped[shipped.index("griddepcontrol.wait"):].count("ld.global") > ptx[wait:].count("ld.global")


def test_gdn_pdl_is_on_by_default_and_never_off_the_chain(monkeypatch):
    monkeypatch.delenv("MOELAB_GDN_PDL", raising=False)
    monkeypatch.setattr(gdn, "chain_pdl", lambda device, rows: rows <= 16)
    cpu = torch.device("cpu")
    assert gdn.GDN_PDL == 1 and gdn.gdn_pdl(cpu, 1) and not gdn.gdn_pdl(cpu, 17)
    monkeypatch.setenv("MOELAB_GDN_PDL", "0")
    assert not gdn.gdn_pdl(cpu, 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 rounding to nearest needs the GPU (the interpreter truncates)")
def test_gpu_bf16_qwen35_shapes(close):
    *args, state = _rec_inputs(1, 4, 8, 128, 128, torch.bfloat16, seed=5)
    s_ref = state.clone()
    for _ in range(4):
        close(gdn.gdn_recurrence(*args, state), gdn_recurrence_reference(*args, s_ref))
    close(state, s_ref, tol=1e-5)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1, 3072, device="cuda", generator=g).bfloat16()
    st = torch.randn(1, 3072, 3, device="cuda", generator=g).bfloat16()
    w = torch.randn(3072, 4, device="cuda", generator=g).bfloat16() * 0.5
    st2 = st.clone()
    close(gdn.gdn_conv(x, st, w), gdn_conv_reference(x, st2, w))
    assert torch.equal(st, st2)
