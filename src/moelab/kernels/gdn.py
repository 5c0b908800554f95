"""Gated DeltaNet (Qwen3-Next, Qwen3.5): the causal conv, the recurrence and the gated norm, a launch each, for one
decode token per sequence or for a prompt's tokens in order.

References and contracts: `moelab.ops.gdn`. The three are the linear-attention layer's small ops between its input
and output projections; as plain torch they are ~55 kernel launches a layer (H200, profile-qwen3.5-…T143137:
conv 8 launches 14.7 µs, recurrence 33 launches 61 µs, gated norm 13 launches 20.5 µs at Qwen3.5-35B-A3B, tp=4).

Napkin math, Qwen3.5-35B-A3B at tp=4, batch 1 (value heads Hv=8, key heads Hk=4, Dk=Dv=128, conv K=4, 3,072 conv
channels), bf16 activations, fp32 recurrent state:
  * conv: reads x (6 KB), the conv state (18 KB) and the weights (24 KB); writes the state and the output: ~70 KB,
    ~6 FLOPs a channel: latency-bound (~15 ns of bandwidth at 4.6 TB/s);
  * recurrence: the state, Hv·Dk·Dv·4 B = 512 KB, read and written (1 MB, ~0.22 µs), plus q, k, v (~4 KB);
    ~6·Hv·Dk·Dv ≈ 0.8 MFLOP: ~1 FLOP a byte, bandwidth- and latency-bound;
  * gated norm: o and z (4 KB) in, 2 KB out: latency-bound.
All three run in one launch each; the recurrence splits each head's Dv columns over programs (every column of the
state updates on its own: kᵀS, the delta and qᵀS are per column), so a batch-1 call still has Hv·Dv/BLOCK_V
programs streaming the state.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, chain_pdl, check_device, env_int, next_pow2

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_PROD = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
# The three kernels in the step's PDL chain (`kernels.chain_pdl`): each releases the next kernel as it starts and
# waits in hardware before it reads an earlier kernel's output, so the output projection after the gated norm is
# resident and streams its weight while they run (as the attention split and combine let the o projection). On
# by default since it was measured: Qwen3.5-35B-A3B batch 1, 2.45 -> 2.36 ms a token, the same tokens (H200, session
# 27, ab-chain-nvidia-h200-20261206T005430.json; predicted -0.05..-0.12 ms). $MOELAB_GDN_PDL=0 turns it off.
GDN_PDL = 1
# (The recurrence asking L2 for the output projection's weight, 16.8 MB at Qwen3.5 tp=1, as 128 bulk-prefetch shares
# behind its own loads, lost: H100, session 31, batch 1 2.70 -> 2.72 and batch 8 8.24 -> 8.31 ms a token,
# h100/ab-chain-…T084533 and …T084639. Stage Q's o-projection prefetch from the attention split lost the same way.)


# The recurrence's state read before its PDL wait, up to this many rows (the chain only). H100, Qwen3.5-35B-A3B batch
# 1, the same tokens (session 34, h100/ab-chain-…T140603 and …T141642): alone a tie (2.71 both), with the input
# projection releasing the recurrence early 2.71 → 2.68 ms a token (that release alone 2.71), with every projection
# early 2.63 → 2.61. At batch 2 with the early release at 2 rows too (session 35, h100/ab-chain-…T163115) 3.581
# against 3.586 without: a tie, so one row. $MOELAB_GDN_STATE_EARLY_MAX_T overrides it (0: never).
GDN_STATE_EARLY_MAX_T = 1


def gdn_pdl(device: torch.device, rows: int) -> bool:
    """Whether the Gated DeltaNet kernels join the PDL chain: GDN_PDL (or $MOELAB_GDN_PDL) and `chain_pdl`."""
    return bool(env_int("MOELAB_GDN_PDL", GDN_PDL)) and chain_pdl(device, rows)


@triton.jit
def _gdn_conv_kernel(x_ptr, st_ptr, w_ptr, o_ptr, C, T, s_xb, s_xt, s_sb, s_sc, s_wc, s_ob, s_ot,
                     K: tl.constexpr, K_PAD: tl.constexpr, BLOCK_C: tl.constexpr, PDL: tl.constexpr = False):
    """Program (row b, block of channels), T tokens in order: the window [last K-1 inputs, x[t]] in w's dtype, slid in
    registers; the sum Σ_j window·w[c, j] in fp32 rounded to w's dtype, SiLU in fp32 rounded to w's dtype, then x's
    (transformers' rounding); at the end state[c] ← the last K-1 inputs. The state is read once and written once."""
    bi = tl.program_id(0).to(tl.int64)  # row offsets in int64: b·(row stride) passes 2³¹ at long prompts
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mc = offs_c < C
    offs_j = tl.arange(0, K_PAD)
    if PDL:  # in the step's PDL chain: release the next kernel now (it waits for this one in hardware)
        tl.extra.cuda.gdc_launch_dependents()
    w = tl.load(w_ptr + offs_c[:, None] * s_wc + offs_j[None, :], mask=mc[:, None] & (offs_j[None, :] < K), other=0.0)
    if PDL:  # the weight is no kernel's output; x and the state are: read only from here on
        tl.extra.cuda.gdc_wait()
    # The window before token 0 shifted right by one: win[j] = state[j - 1] (j = 1 .. K-1); the loop shifts it left.
    win = tl.load(st_ptr + bi * s_sb + offs_c[:, None] * s_sc + (offs_j[None, :] - 1),
                  mask=mc[:, None] & (offs_j[None, :] >= 1) & (offs_j[None, :] < K), other=0.0).to(w.dtype)
    sel = offs_j[None, None, :] == offs_j[None, :, None] + 1  # [1, K_PAD, K_PAD]: picks win[j + 1] for slot j
    for t in range(T):
        x = tl.load(x_ptr + bi * s_xb + t * s_xt + offs_c, mask=mc, other=0.0)
        shifted = tl.sum(tl.where(sel, win.to(tl.float32)[:, None, :], 0.0), axis=2)
        win = tl.where(offs_j[None, :] == K - 1, x.to(tl.float32)[:, None], shifted).to(w.dtype)
        acc = tl.sum(win.to(tl.float32) * w.to(tl.float32), axis=1).to(w.dtype).to(tl.float32)
        out = (acc / (1.0 + tl.exp(-acc))).to(w.dtype)
        tl.store(o_ptr + bi * s_ob + t * s_ot + offs_c, out.to(o_ptr.dtype.element_ty), mask=mc)
    new = tl.sum(tl.where(sel, win.to(tl.float32)[:, None, :], 0.0), axis=2)  # the last K-1 inputs
    tl.store(st_ptr + bi * s_sb + offs_c[:, None] * s_sc + offs_j[None, :], new.to(st_ptr.dtype.element_ty),
             mask=mc[:, None] & (offs_j[None, :] < K - 1))


@triton.jit
def _gdn_recurrence_kernel(q_ptr, k_ptr, v_ptr, b_ptr, a_ptr, alog_ptr, dtb_ptr, s_ptr, o_ptr,
                           HV, DK, DV, T, s_qb, s_qt, s_qh, s_kb, s_kt, s_kh, s_vb, s_vt, s_vh, s_bb, s_bt, s_ab, s_at,
                           s_ob, s_ot, s_oh, sqrt_dk,
                           REP: tl.constexpr, DK_PAD: tl.constexpr, BLOCK_V: tl.constexpr, PDL: tl.constexpr = False,
                           STATE_EARLY: tl.constexpr = False):
    """Program (row b · value head h, block of BLOCK_V state columns), T tokens in order, all in fp32:
        g = −exp(A_log[h])·softplus(a + dt_bias[h]), β = sigmoid(b) (rounded to b's dtype),
        q̂ = q·rsqrt(Σq² + 1e-6)/√Dk, k̂ = k·rsqrt(Σk² + 1e-6) (key head h // REP; transformers' l2norm)
        S ← S·e^g;  S ← S + k̂ ⊗ β(v − k̂ᵀS);  o = q̂ᵀS
    S, the [Dk, BLOCK_V] slice, stays in registers across the tokens: read once, written once.
    (o from the undecayed state's two reductions side by side, q̂ᵀS and k̂ᵀS, one reduction level on o's path instead of
    two, timed the same alone and end to end: H200, session 29, bench-gdn-…T051000, ab-chain-…T051111. Removed.)"""
    pid = tl.program_id(0)
    bi = (pid // HV).to(tl.int64)  # row offsets in int64: b·(row stride) passes 2³¹ at long prompts
    hv = pid % HV
    hk = hv // REP
    offs_k = tl.arange(0, DK_PAD)
    mk = offs_k < DK
    offs_v = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    mv = offs_v < DV
    base = s_ptr + (bi * HV + hv).to(tl.int64) * DK * DV
    ptrs = base + offs_k[:, None] * DV + offs_v[None, :]
    m2 = mk[:, None] & mv[None, :]
    if PDL:  # in the step's PDL chain: release the next kernel now; A_log and dt_bias are weights, read before the wait
        tl.extra.cuda.gdc_launch_dependents()
    neg_a = -tl.exp(tl.load(alog_ptr + hv).to(tl.float32))
    dtb = tl.load(dtb_ptr + hv).to(tl.float32)
    if STATE_EARLY:  # (PDL, the chain) the previous step's state: in flight while the input projection runs
        S = tl.load(ptrs, mask=m2, other=0.0)
    if PDL:  # the state (the previous token's) and q, k, v, a, b (this one's conv and projection): from here on
        tl.extra.cuda.gdc_wait()
    if not STATE_EARLY:
        S = tl.load(ptrs, mask=m2, other=0.0)  # the state first: it is the stream
    for t in range(T):
        q = tl.load(q_ptr + bi * s_qb + t * s_qt + hk * s_qh + offs_k, mask=mk, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + bi * s_kb + t * s_kt + hk * s_kh + offs_k, mask=mk, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + bi * s_vb + t * s_vt + hv * s_vh + offs_v, mask=mv, other=0.0).to(tl.float32)
        qn = q * tl.rsqrt(tl.sum(q * q, axis=0) + 1e-6) / sqrt_dk  # transformers' l2norm, then ÷ √Dk
        kn = k * tl.rsqrt(tl.sum(k * k, axis=0) + 1e-6)
        x = tl.load(a_ptr + bi * s_ab + t * s_at + hv).to(tl.float32) + dtb
        # softplus as torch: x above 20, else log1p(exp(x)); log1p by its series where exp(x) is below 1e-4 (log(1 + u)
        # would lose u's digits there; no libdevice call, so the interpreter runs it too)
        u = tl.exp(tl.minimum(x, 20.0))
        softplus = tl.where(x > 20.0, x, tl.where(u < 1e-4, u * (1.0 - 0.5 * u), tl.log(1.0 + u)))
        bb = tl.load(b_ptr + bi * s_bb + t * s_bt + hv)
        beta = (1.0 / (1.0 + tl.exp(-bb.to(tl.float32)))).to(bb.dtype).to(tl.float32)  # sigmoid in b's dtype, as HF
        S = S * tl.exp(neg_a * softplus)
        kv = tl.sum(S * kn[:, None], axis=0)  # [BLOCK_V]
        S = S + kn[:, None] * ((v - kv) * beta)[None, :]
        o = tl.sum(S * qn[:, None], axis=0)
        tl.store(o_ptr + bi * s_ob + t * s_ot + hv * s_oh + offs_v, o.to(o_ptr.dtype.element_ty), mask=mv)
    tl.store(ptrs, S, mask=m2)


@triton.jit
def _gdn_norm_gate_kernel(o_ptr, z_ptr, w_ptr, out_ptr, DV, s_ob, s_oh, s_zb, s_zh, s_outb, HV, eps,
                          DV_PAD: tl.constexpr, PROD: tl.constexpr, PDL: tl.constexpr = False):
    """Program (row b · head h): RMSNorm of o[b, h] in fp32, rounded to o's dtype, times w (in the promoted dtype of
    w and o: PROD 0 fp32, 1 fp16, 2 bf16), times SiLU(z) in fp32, rounded to o's dtype into out[b, h·Dv:]."""
    pid = tl.program_id(0)
    bi = (pid // HV).to(tl.int64)
    hv = pid % HV
    offs = tl.arange(0, DV_PAD)
    m = offs < DV
    if PDL:  # in the step's PDL chain: release the next kernel (the output projection, its weight streaming) now
        tl.extra.cuda.gdc_launch_dependents()
    wn = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    if PDL:  # o and z are earlier kernels' outputs
        tl.extra.cuda.gdc_wait()
    o = tl.load(o_ptr + bi * s_ob + hv * s_oh + offs, mask=m, other=0.0)
    h = o.to(tl.float32)
    h = h * tl.rsqrt(tl.sum(h * h, axis=0) / DV + eps)
    p = wn * h.to(o.dtype).to(tl.float32)
    if PROD == 1:
        p = p.to(tl.float16).to(tl.float32)
    elif PROD == 2:
        p = p.to(tl.bfloat16).to(tl.float32)
    z = tl.load(z_ptr + bi * s_zb + hv * s_zh + offs, mask=m, other=0.0).to(tl.float32)
    out = p * (z / (1.0 + tl.exp(-z)))
    tl.store(out_ptr + bi * s_outb + hv * DV + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def _last_contiguous(name: str, t: torch.Tensor) -> None:
    if t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension (stride {t.stride()})")


def _dtype(name: str, t: torch.Tensor) -> None:
    if t.dtype not in _DTYPES:
        raise ValueError(f"{name} must be float16, bfloat16 or float32, not {t.dtype}")


def gdn_conv(x: torch.Tensor, state: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Causal depthwise conv + SiLU of one decode token, x [B, C], or of T tokens in order, x [B, T, C] (a prefill):
    state [B, C, K-1] (x's dtype, updated in place), w [C, K] -> x's shape and dtype. Contract as
    `moelab.ops.gdn.gdn_conv_reference`."""
    check_device(x, "gdn_conv: x")
    if x.dim() not in (2, 3) or w.dim() != 2 or state.dim() != 3:
        raise ValueError(f"gdn_conv: x must be [B, C] or [B, T, C], state [B, C, K-1], w [C, K]; got "
                         f"{tuple(x.shape)}, {tuple(state.shape)}, {tuple(w.shape)}")
    xs = x if x.dim() == 3 else x[:, None]
    B, T, C = xs.shape
    K = w.shape[1]
    if w.shape[0] != C or tuple(state.shape) != (B, C, K - 1) or K < 2:
        raise ValueError(f"gdn_conv: with x [B={B}, …, C={C}] and w [C, K={K}] (K ≥ 2) the state must be "
                         f"[{B}, {C}, {K - 1}], got {tuple(state.shape)} (w {tuple(w.shape)})")
    for name, t in (("x", x), ("state", state), ("w", w)):
        _dtype(f"gdn_conv: {name}", t)
        _last_contiguous(f"gdn_conv: {name}", t)
    if state.dtype != x.dtype or state.device != x.device or w.device != x.device:
        raise ValueError(f"gdn_conv: state must be {x.dtype} on {x.device} as x is (got {state.dtype} on "
                         f"{state.device}), w on {x.device} (got {w.device})")
    out = torch.empty(B, T, C, dtype=x.dtype, device=x.device)
    if B and C and T:
        block = 128
        pdl = gdn_pdl(x.device, B * T)
        _gdn_conv_kernel[(B, cdiv(C, block))](xs, state, w, out, C, T, xs.stride(0), xs.stride(1), state.stride(0),
                                              state.stride(1), w.stride(0), out.stride(0), out.stride(1), K=K,
                                              K_PAD=next_pow2(K), BLOCK_C=block, PDL=pdl, num_warps=4,
                                              **({"launch_pdl": True} if pdl else {}))
    return out if x.dim() == 3 else out[:, 0]


def gdn_recurrence(q, k, v, b, a, a_log, dt_bias, state, *, block_v: int | None = None, num_warps: int | None = None,
                   state_early: bool = False):
    """The gated delta rule for one token per sequence — q, k [B, Hk, Dk]; v [B, Hv, Dv] (Hv a multiple of Hk);
    b, a [B, Hv] — or for T tokens in order (a prefill: q, k [B, T, Hk, Dk], v [B, T, Hv, Dv], b, a [B, T, Hv]);
    a_log, dt_bias [Hv]; state [B, Hv, Dk, Dv] fp32, contiguous, updated in place -> o like v, in v's dtype.
    Contract as `moelab.ops.gdn.gdn_recurrence_reference`. `block_v` (a power of two): state columns per program,
    and `num_warps`, for benchmarks/bench_gdn.py; None takes $MOELAB_GDN_BLOCK_V and $MOELAB_GDN_WARPS (A/B
    switches), else the defaults. `state_early` (the engine's decode): in the PDL chain, up to GDN_STATE_EARLY_MAX_T
    rows, the state is read before the wait, so the kernel launched just before this one must not write it."""
    check_device(v, "gdn_recurrence: v")
    seq = v.dim() == 4
    if seq:
        q_, k_, v_, b_, a_ = q, k, v, b, a
    else:
        q_, k_, v_, b_, a_ = (t[:, None] if t.dim() == n else t for t, n in ((q, 3), (k, 3), (v, 3), (b, 2), (a, 2)))
    if q_.dim() != 4 or k_.shape != q_.shape or v_.dim() != 4 or v_.shape[:2] != q_.shape[:2]:
        raise ValueError(f"gdn_recurrence: q and k must be [B, (T,) Hk, Dk] alike and v [B, (T,) Hv, Dv]; got q "
                         f"{tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    B, T, HK, DK = q_.shape
    HV, DV = v_.shape[2], v_.shape[3]
    if HK == 0 or HV % HK:
        raise ValueError(f"gdn_recurrence: the value heads ({HV}) must be a multiple of the key heads ({HK})")
    lead = (B, T) if seq else (B,)
    for name, t in (("q", q), ("k", k)):
        if t.device != v.device:
            raise ValueError(f"gdn_recurrence: {name} is on {t.device}, v on {v.device}")
    for name, t, t_, shape in (("b", b, b_, (B, T, HV)), ("a", a, a_, (B, T, HV)), ("a_log", a_log, a_log, (HV,)),
                               ("dt_bias", dt_bias, dt_bias, (HV,)), ("state", state, state, (B, HV, DK, DV))):
        if tuple(t_.shape) != shape:
            want = [*lead, HV] if name in ("a", "b") else list(shape)
            raise ValueError(f"gdn_recurrence: {name} must be {want}, got {list(t.shape)}")
        if t.device != v.device:
            raise ValueError(f"gdn_recurrence: {name} is on {t.device}, v on {v.device}")
    if state.dtype != torch.float32 or not state.is_contiguous():
        raise ValueError(f"gdn_recurrence: state must be a contiguous float32 tensor (got {state.dtype}, "
                         f"contiguous={state.is_contiguous()})")
    for name, t in (("q", q), ("k", k), ("v", v), ("b", b), ("a", a), ("a_log", a_log), ("dt_bias", dt_bias)):
        _dtype(f"gdn_recurrence: {name}", t)
        _last_contiguous(f"gdn_recurrence: {name}", t)
    o = torch.empty(B, T, HV, DV, dtype=v.dtype, device=v.device)
    if B and T:
        # Columns of the state per program. At Qwen3.5's tp=1 the 32-wide default gives 32 heads × 4 = 128
        # programs, each streaming 16 KB of state in and out: 8.2 µs a call for 1.3 µs of bandwidth (H100 trace,
        # session 28, h100/trace-decode-…T040820). Narrower blocks on more programs did not shorten it: alone at tp=1,
        # batch 1, 4.49 / 4.41 / 4.86 / 5.57 µs at 32 / 16 / 8 / 4 columns, at batch 8 13.3 / 14.4 / 17.2 / 33.9
        # (H200, session 29, bench-gdn-…T043938): the call is latency-bound. Fewer warps: 16 columns on 2 warps took
        # tp=1 batch 1 to 4.01 µs and the tp=4 shard's 2.65 to 2.32, but tp=1 batch 8 13.4 to 16.1 (…T051000), and the
        # batch-1 step did not move (2.354 against 2.353 ms, ab-chain-…T051111): 32 columns on 4 warps stay.
        # $MOELAB_GDN_BLOCK_V and $MOELAB_GDN_WARPS set them for an A/B.
        block_v = block_v or env_int("MOELAB_GDN_BLOCK_V", 0) or min(32, next_pow2(DV))
        if block_v & (block_v - 1) or block_v < 1:
            raise ValueError(f"gdn_recurrence: block_v (or $MOELAB_GDN_BLOCK_V) must be a power of two, not {block_v}")
        num_warps = num_warps or env_int("MOELAB_GDN_WARPS", 4)
        if num_warps & (num_warps - 1) or num_warps < 1:
            raise ValueError(f"gdn_recurrence: num_warps (or $MOELAB_GDN_WARPS) must be a power of two, "
                             f"not {num_warps}")
        pdl = gdn_pdl(v.device, B * T)  # read once: the kernel's wait and the launch attribute must agree
        # Asked by the engine, whose state's one writer in a step is this layer's recurrence of the previous step (as
        # the attention split reads its cache rows before its wait).
        early = pdl and state_early and B * T <= env_int("MOELAB_GDN_STATE_EARLY_MAX_T", GDN_STATE_EARLY_MAX_T)
        _gdn_recurrence_kernel[(B * HV, cdiv(DV, block_v))](
            q_, k_, v_, b_, a_, a_log, dt_bias, state, o, HV, DK, DV, T, *q_.stride()[:3], *k_.stride()[:3],
            *v_.stride()[:3], *b_.stride()[:2], *a_.stride()[:2], *o.stride()[:3], DK ** 0.5,
            REP=HV // HK, DK_PAD=next_pow2(DK), BLOCK_V=block_v, num_warps=num_warps, PDL=pdl, STATE_EARLY=early,
            **({"launch_pdl": True} if pdl else {}))
    return o if seq else o[:, 0]


def gdn_norm_gate(o: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm(o) per head · w · SiLU(z) (Qwen3-Next's gated norm): o, z [..., Hv, Dv] (any leading dims: [B] at
    decode, [B, T] in a prefill), w [Dv] -> [..., Hv·Dv] in o's dtype. Contract as
    `moelab.ops.gdn.gdn_norm_gate_reference`."""
    check_device(o, "gdn_norm_gate: o")
    if o.dim() < 2 or z.shape != o.shape or tuple(w.shape) != (o.shape[-1],):
        raise ValueError(f"gdn_norm_gate: o and z must be [..., Hv, Dv] alike and w [Dv]; got o {tuple(o.shape)}, "
                         f"z {tuple(z.shape)}, w {tuple(w.shape)}")
    if o.dim() != 3:  # the leading dims as rows: views where the strides allow it (a prefill's z does)
        lead = o.shape[:-2]
        return gdn_norm_gate(o.reshape(-1, *o.shape[-2:]), z.reshape(-1, *z.shape[-2:]), w, eps).view(
            *lead, o.shape[-2] * o.shape[-1])
    for name, t in (("o", o), ("z", z), ("w", w)):
        _dtype(f"gdn_norm_gate: {name}", t)
        _last_contiguous(f"gdn_norm_gate: {name}", t)
        if t.device != o.device:
            raise ValueError(f"gdn_norm_gate: {name} is on {t.device}, o on {o.device}")
    B, HV, DV = o.shape
    out = torch.empty(B, HV * DV, dtype=o.dtype, device=o.device)
    if B == 0 or HV == 0:
        return out
    pdl = gdn_pdl(o.device, B)
    _gdn_norm_gate_kernel[(B * HV,)](o, z, w, out, DV, o.stride(0), o.stride(1), z.stride(0), z.stride(1),
                                     out.stride(0), HV, float(eps), DV_PAD=next_pow2(DV),
                                     PROD=_PROD[torch.promote_types(w.dtype, o.dtype)], num_warps=4,
                                     PDL=pdl, **({"launch_pdl": True} if pdl else {}))
    return out
