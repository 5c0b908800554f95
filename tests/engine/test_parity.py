"""Parity with Hugging Face transformers on CPU: the loader on the real file format and the forward at once.

For a tiny random model of each family saved by `save_pretrained`, moelab's engine must give the same
logits (fp32: relative error <= 1e-4) for a whole prompt and for 32 greedy decode steps, and the same
greedy tokens.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

from moelab.engine import build

REL_TOL = 1e-4  # fp32, as the issue asks
PROMPT_LEN, STEPS, BATCH = 7, 32, 2


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


@torch.no_grad()
def hf_greedy(model, prompt: torch.Tensor, steps: int) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """HF's prompt logits [B,P,V], then `steps` greedy decode steps with its own cache: their logits, tokens."""
    # transformers renamed `past_key_values` to `cache` (5.2x); an unknown keyword is swallowed by **kwargs, and
    # the reference would silently run every decode step without its cache (the GPU machine has 5.17).
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    out = model(prompt, use_cache=True)
    prompt_logits = out.logits
    cache = getattr(out, kw)
    tok = prompt_logits[:, -1].argmax(-1)
    tokens, logits = [tok], []
    for _ in range(steps):
        out = model(tok[:, None], use_cache=True, **{kw: cache})
        cache = getattr(out, kw)
        logits.append(out.logits[:, -1])
        tok = logits[-1].argmax(-1)
        tokens.append(tok)
    return prompt_logits, logits, torch.stack(tokens, dim=1)


@pytest.mark.parametrize("family", ["qwen3_moe", "qwen2_moe", "olmoe", "mixtral", "qwen3_5_moe_text",
                                    "qwen3_next"])
def test_matches_transformers_eager(checkpoint, family):
    model, folder = checkpoint(family)
    prompt = torch.randint(0, 128, (BATCH, PROMPT_LEN), generator=torch.Generator().manual_seed(3))
    ref_prompt, ref_steps, ref_tokens = hf_greedy(model, prompt, STEPS)

    eng = build(folder, batch=BATCH, max_len=PROMPT_LEN + STEPS + 1, impl="eager", device="cpu",
                keep_logits=True)
    with torch.inference_mode():
        got_prompt = eng.model.prefill(prompt, eng.cache, all_logits=True)
    assert got_prompt.shape == ref_prompt.shape
    assert rel_err(got_prompt, ref_prompt) <= REL_TOL

    tokens = eng.generate(prompt, STEPS + 1)  # the first from the prefill, then STEPS decode steps
    assert len(eng.step_logits) == STEPS
    errs = [rel_err(g, r) for g, r in zip(eng.step_logits, ref_steps)]
    assert max(errs) <= REL_TOL, f"decode-step logits differ from transformers: worst rel err {max(errs):.2e}"
    assert torch.equal(tokens, ref_tokens)
    # the check must be able to fail: the tokens are not constant
    assert len(set(tokens.flatten().tolist())) > 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the bf16 parity check runs on a CUDA GPU")
@pytest.mark.parametrize("impl", ["eager", "moelab"])
@pytest.mark.parametrize("family", ["qwen3_moe"])  # the hybrids: test_bf16_as_accurate_as_transformers_bf16
def test_matches_transformers_bf16_on_gpu(checkpoint, impl, family):
    """bf16 on the GPU: logits within 2e-2 of transformers' for the prompt and the first decode steps
    (greedy bf16 paths may part later, so only the steps before the tokens first differ are compared)."""
    model, folder = checkpoint(family)
    model = copy.deepcopy(model).to(device="cuda", dtype=torch.bfloat16)  # the fixture's stays fp32 on the CPU
    prompt = torch.randint(0, 128, (BATCH, PROMPT_LEN), generator=torch.Generator().manual_seed(3)).cuda()
    ref_prompt, ref_steps, ref_tokens = hf_greedy(model, prompt, 8)
    eng = build(folder, batch=BATCH, max_len=PROMPT_LEN + 9, impl=impl, dtype="bf16", device="cuda",
                keep_logits=True)
    with torch.inference_mode():
        assert rel_err(eng.model.prefill(prompt, eng.cache, all_logits=True), ref_prompt) <= 2e-2
    tokens = eng.generate(prompt, 9)
    agree = int((tokens == ref_tokens).all(0).int().cumprod(0).sum())
    assert agree >= 2, "the first decoded tokens already differ from transformers'"
    for i in range(agree - 1):
        assert rel_err(eng.step_logits[i], ref_steps[i]) <= 2e-2, f"decode step {i}"


@pytest.mark.parametrize("impl,device", [
    ("eager", "cpu"),
    pytest.param("moelab", "cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(), reason="moelab's bf16 kernels run on a CUDA GPU (the interpreter has no bf16 dot)")),
])
@pytest.mark.parametrize("family", ["qwen3_moe", "qwen3_5_moe_text", "qwen3_next"])
def test_bf16_as_accurate_as_transformers_bf16(checkpoint, impl, device, family):
    """bf16 against the fp32 truth: the engine's error is transformers' own bf16 error, not more.

    A direct bf16 comparison with transformers is ill-posed on the tiny random hybrids: transformers' bf16 logits
    are 4-55 % (relative) away from its own fp32 ones (every top-k routing decision near a tie flips under bf16
    noise, and the Gated DeltaNet layers amplify it), so two correct bf16 implementations differ by as much.
    Measured instead, over four seeds: the relative error to transformers' fp32 logits of the prompt's logits and
    of teacher-forced decode steps (prefill the first P - D tokens, then decode the last D tokens one at a time, so
    every step sees the same tokens as the fp32 forward at those positions), against transformers' bf16 error at
    the same positions. A decode step that read a stale state or a wrong cache position is O(1) off."""
    P, D, seeds = 12, 4, range(4)
    ours_pre, ours_dec, theirs_pre, theirs_dec = [], [], [], []
    for seed in seeds:
        model, folder = checkpoint(family, seed=seed)
        prompt = torch.randint(0, 128, (BATCH, P), generator=torch.Generator().manual_seed(seed + 3))
        with torch.no_grad():
            truth = model(prompt).logits.double()
            hf16 = copy.deepcopy(model).to(device=device, dtype=torch.bfloat16)(prompt.to(device)).logits.cpu()
        eng = build(folder, batch=BATCH, max_len=P + 1, impl=impl, dtype="bf16", device=device)
        tokens = prompt.to(device)
        with torch.inference_mode():
            pre = eng.model.prefill(tokens, eng.cache, all_logits=True).cpu()
            eng.model.prefill(tokens[:, :P - D], eng.cache)  # the same cache rows, refilled: the states restart
            steps = [eng.model.decode(tokens[:, p], torch.full((BATCH,), p, device=device), eng.cache).cpu()
                     for p in range(P - D, P)]
        ours_pre.append(rel_err(pre, truth))
        ours_dec.append(rel_err(torch.stack(steps, 1), truth[:, P - D:]))
        theirs_pre.append(rel_err(hf16, truth))
        theirs_dec.append(rel_err(hf16[:, P - D:], truth[:, P - D:]))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    for what, ours, theirs in (("prompt", ours_pre, theirs_pre), ("decode", ours_dec, theirs_dec)):
        assert mean(ours) <= 1.25 * mean(theirs) + 5e-3, (
            f"{what}: moelab bf16 rel err {mean(ours):.3f} vs transformers bf16 {mean(theirs):.3f} "
            f"(per seed {[round(x, 3) for x in ours]} vs {[round(x, 3) for x in theirs]})")
        print(f"{family} {impl} {what}: ours {mean(ours):.4f} transformers {mean(theirs):.4f}")
