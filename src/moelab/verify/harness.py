"""`verify(candidate, problem)`: prepare inputs and the oracle in this process, run the candidate in its
own, and judge everything it returns. The order of the checks and the reasons they give are documented in
`moelab.verify`.
"""

from __future__ import annotations

import copy
import math
import os
import secrets
from pathlib import Path
from typing import Any

from moelab.errors import UserError
from moelab.verify import checks as C
from moelab.verify import static
from moelab.verify.problem import Problem, load_problem
from moelab.verify.sandbox import run_worker
from moelab.verify.verdict import Verdict

TOO_FAST = 0.9  # a median below 90 % of the floor is physically impossible beyond the timer's noise


def _meta(problem: Problem, name: str, inputs: list, init: list, dtype) -> float | None:
    v = problem.meta(name)
    if v is None:
        return None
    return float(v(inputs, init, dtype) if callable(v) else v)


def _fresh(problem: Problem, fn_name: str, seed: int, dist: str, dtype, large: float) -> list:
    """One input set: the problem's generator under `seed`, reshaped to `dist`, cast to the task dtype."""
    import torch
    torch.manual_seed(seed)
    try:
        made = getattr(problem.module, fn_name)()
    except Exception as e:  # noqa: BLE001 - the problem's generator: a user error
        raise UserError(f"the problem's {fn_name}() failed: {type(e).__name__}: {e}") from None
    raw = [x.cpu() if isinstance(x, torch.Tensor) else x for x in made]
    gen = torch.Generator().manual_seed(seed ^ 0x5EED)
    which = problem.meta("TRANSFORM_INPUTS")
    return C.cast_inputs(C.transform(raw, dist, gen, which, large), dtype)


def _oracle(model, inputs: list, device: str) -> list:
    import torch
    with torch.no_grad():
        out = model(*[x.to(device) if isinstance(x, torch.Tensor) else x for x in C.to_oracle(inputs)])
    return [o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in C.flatten(out)]


def verify(candidate: str | Path, problem: str | Path, *, precision: str | None = None, trials: int = 5,
           timeout_s: float = 300.0, time_it: bool = True, seed: int | None = None,
           compile: bool | None = None, samples: int = 15, profile: bool | None = None,
           memory_gb: float | None = 32.0, ceilings: Any = "auto") -> Verdict:
    """Judge `candidate` (a file defining `ModelNew`) on `problem` (a shipped name or a problem file).

    precision: the task's ("fp32" | "fp16" | "bf16"; default the problem's PRECISION or fp32).
    trials: correctness trials, each on fresh inputs from its own secret seed and a different input
      distribution (normal, uniform, heavy-tailed, large); plus one at another shape when the problem
      has `get_inputs_alt`. seed: fix the seeds (reproduce a verdict); default drawn with `secrets`.
    time_it: time candidate, eager and torch.compile interleaved (host clock without CUDA).
    compile: include the torch.compile baseline (default: only when CUDA is present).
    profile: check with the torch profiler which kernels ran (default: when CUDA is present).
    ceilings: a `moelab.hardware.Ceilings` for the roofline floor, None for no floor, "auto" for this
      GPU's (none without CUDA).
    Raises UserError for a missing candidate, unknown problem or bad precision; a candidate's failure
    of any kind is a FAIL verdict, never an exception.
    """
    import torch

    cand = Path(candidate)
    if cand.suffix != ".py" or not cand.is_file():
        raise UserError(f"candidate must be an existing .py file: {cand}")
    if trials < 1:
        raise UserError(f"--trials must be at least 1, not {trials}")
    prob = load_problem(problem)
    precision = precision or prob.precision
    if precision not in C.PRECISIONS:
        raise UserError(f"precision must be one of {', '.join(C.PRECISIONS)}, not {precision!r}")
    dtype = C.PRECISIONS[precision]
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    compile = cuda if compile is None else compile
    profile = cuda if profile is None else profile
    v = Verdict(candidate=str(cand), problem=prob.name, precision=precision)
    tol = C.tolerance(precision, prob.meta("TOLERANCE"))
    v.tolerance = tol

    # 1. Static scan: reasons of its own, and it tells the profiler which kernels to look for.
    findings, info = static.scan(cand.read_text(errors="replace"), precision)
    for f in findings:
        v.fail(f.code, f.message)
    v.check("static", not findings)
    if any(f.code == "compile_error" for f in findings):
        return v.finish()
    if not cuda and info["jit_functions"] and os.environ.get("TRITON_INTERPRET") != "1":
        v.notes.append("no GPU here: Triton kernels run only with TRITON_INTERPRET=1 in the environment")

    # 2. The reference's weights, an oracle in float64, and every input set, all made here.
    rng = secrets.SystemRandom() if seed is None else __import__("random").Random(seed)
    draw = lambda: rng.getrandbits(62)  # noqa: E731
    cseed = draw()
    init = list(prob.module.get_init_inputs())
    torch.manual_seed(cseed)
    try:
        ref = prob.module.Model(*init).to(dtype).eval()
    except Exception as e:  # noqa: BLE001
        raise UserError(f"the problem's Model(*get_init_inputs()) failed: {type(e).__name__}: {e}") from None
    oracle = copy.deepcopy(ref).double().to(device)
    ref = ref.to(device)
    large = float(prob.meta("LARGE_SCALE", 100.0))
    dists = list(prob.meta("DISTRIBUTIONS", C.DISTRIBUTIONS))

    calls, kinds = [], []
    for t in range(trials):
        calls.append({"inputs": _fresh(prob, "get_inputs", draw(), dists[t % len(dists)], dtype, large),
                      "twice": t == 0})
        kinds.append(("trial", dists[t % len(dists)]))
    if hasattr(prob.module, "get_inputs_alt"):
        calls.append({"inputs": _fresh(prob, "get_inputs_alt", draw(), "normal", dtype, large)})
        kinds.append(("other_shape", "normal"))
    else:
        v.notes.append("the problem has no get_inputs_alt(): no check at a shape the timing does not use")
    try:
        expected = [_oracle(oracle, c["inputs"], device) for c in calls]
    except Exception as e:  # noqa: BLE001 - the problem's own Model: a user error, said in one line
        raise UserError(f"the problem's Model fails in float64, which the oracle needs: "
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    with torch.no_grad():
        ref_out = [o for o in C.flatten(ref(*[x.to(device) if isinstance(x, torch.Tensor) else x
                                               for x in calls[0]["inputs"]]))]
    del ref
    # Sizes of the outputs, for the worker to NaN-poison before each call.
    poison = sorted({(o.numel(), str(o.dtype).replace("torch.", "")) for o in ref_out
                     if isinstance(o, torch.Tensor)})
    tsets = [_fresh(prob, "get_inputs", draw(), "normal", dtype, large) for _ in range(2)]
    refill = [_fresh(prob, "get_inputs", draw(), "normal", dtype, large) for _ in range(2)]

    job = {"problem": str(prob.path), "precision": precision, "dtype": str(dtype).replace("torch.", ""),
           "device": device, "seed": cseed, "init_inputs": init, "calls": calls, "poison": poison,
           "time_it": time_it, "compile": compile, "samples": samples, "profile": profile,
           "timing_seed": draw(), "timing_check": {"sets": tsets, "refill": refill},
           "gpu_memory_fraction": 0.9}
    watch = sorted({cand.resolve(), prob.path})
    out = run_worker(job, cand, watch, timeout_s=timeout_s, memory_gb=memory_gb, cuda=cuda)
    v.isolation = {**out.isolation, "worker_wall_s": round(out.wall_s, 2)}

    # 3. How the process ended.
    res = out.result
    if out.timed_out:
        v.fail("timeout", f"the candidate's process ran past {timeout_s:g} s and was killed")
    elif res is None:
        rc = out.returncode
        code = "exit" if rc is not None and rc >= 0 else "crash"
        tail = out.stderr_tail.strip().splitlines()[-1:] or [""]
        v.fail(code, f"the candidate's process ended (exit status {rc}) without a result: {tail[0][:200]}")
    elif res.get("error"):
        v.fail(res["error"]["code"], res["error"]["message"])
    for p in out.wrote_outside:
        v.fail("write_outside", f"the candidate's process changed {p}")
    v.check("isolation", not out.wrote_outside)
    if res is None:
        return v.finish()

    # 4. Correctness, call by call.
    _judge_calls(v, res.get("calls", []), calls, kinds, expected, ref_out, precision, tol)

    # 5. Flags the candidate changed.
    patched = res.get("patched", [])
    for name in patched:
        v.fail("patch", f"the candidate replaced {name} (restored before timing)")
    v.check("no_patching", not patched if res.get("stage") not in ("import", "construct", "correctness")
            else None)
    tf32 = res.get("tf32") or {}
    if precision == "fp32" and tf32:
        on = [k for k, val in tf32.items() if val not in (False, "highest")]
        for k in on:
            v.fail("precision", f"the candidate switched on TF32 ({k} = {tf32[k]}) in an fp32 task")
        v.check("fp32_flags", not on)

    # 6. Timing, the re-check after it, the floor and the profiler.
    if time_it and "timing" in res:
        _judge_timing(v, res, prob, calls[0]["inputs"], init, ref_out, dtype, tol, job, oracle, device,
                      ceilings, cuda)
    elif not time_it:
        v.notes.append("not timed (time_it=False)")
    if "profile" in res:
        _judge_profile(v, res["profile"], info)
    elif profile and res.get("stage") == "done":
        v.check("profiler", None)
    return v.finish()


def _classify(v: Verdict, err: float, precision: str, tol: float, what: str, wrong_code: str) -> bool:
    if err <= tol:
        return True
    if not math.isfinite(err):
        v.fail("nan", f"{what}: output has NaN or inf")
    elif precision != "bf16" and err <= C.LOOSE[precision]:
        v.fail("precision", f"{what}: relative error {err:.2e} > {precision} tolerance {tol:.0e} but within "
                            f"{C.LOOSE[precision]:.0e}: the answer of a lower precision")
    else:
        v.fail(wrong_code, f"{what}: relative error {err:.2e} > tolerance {tol:.0e}")
    return False


def _judge_calls(v: Verdict, got: list[dict], calls: list, kinds: list, expected: list, ref_out: list,
                 precision: str, tol: float) -> None:
    import torch
    worst = {"trial": 0.0, "other_shape": 0.0}
    for i, rec in enumerate(got):
        kind, dist = kinds[i]
        what = f"{'trial ' + str(i) if kind == 'trial' else 'other shape'} ({dist} inputs)"
        outs, exp = rec["outputs"], expected[i]
        if len(outs) != len(exp):
            v.fail("shape", f"{what}: {len(outs)} outputs, the reference returns {len(exp)}")
            v.check("shape", False)
            continue
        for j, (o, e) in enumerate(zip(outs, exp)):
            name = f"{what}, output {j}" if len(exp) > 1 else what
            if o is None:
                v.fail("dtype", f"{name}: not a tensor ({rec['meta'][j].get('type')})")
                continue
            if tuple(o.shape) != tuple(e.shape):
                v.fail("shape", f"{name}: shape {tuple(o.shape)}, expected {tuple(e.shape)}")
                v.check("shape", False)
                continue
            v.check("shape", True)
            want = ref_out[j].dtype if j < len(ref_out) else o.dtype
            ok = o.dtype == want
            v.check("dtype", ok)
            if not ok:
                v.fail("dtype", f"{name}: dtype {o.dtype}, the reference returns {want}")
            if kind == "trial" and j < len(ref_out) and tuple(e.shape) == tuple(ref_out[j].shape):
                got_s = tuple(s for s, n in zip(rec["meta"][j]["stride"], o.shape) if n > 1)
                ok = got_s == C.significant_strides(ref_out[j])
                v.check("stride", ok)
                if not ok:
                    v.fail("stride", f"{name}: strides {rec['meta'][j]['stride']}, the reference's are "
                                     f"{tuple(ref_out[j].stride())}")
            err = C.rel_error(o, e)
            worst[kind] = max(worst[kind], err)
            ok = _classify(v, err, precision, tol, name,
                           "incorrect" if kind == "trial" else "incorrect_other_shape")
            v.check("correct" if kind == "trial" else "other_shape", ok)
            if not torch.isfinite(o.double()).all():
                v.check("finite", False)
        if rec.get("mutated"):
            v.fail("mutation", f"{what}: the candidate changed input(s) {rec['mutated']}")
        v.check("no_mutation", not rec.get("mutated"))
        if rec.get("alias"):
            v.fail("alias", f"{what}: an output shares memory with input(s) {rec['alias']}")
        v.check("no_alias", not rec.get("alias"))
        if rec.get("overwrote_previous"):
            v.fail("stale_output", f"{what}: the call overwrote the output returned by the previous call "
                                   "(one output buffer reused across calls)")
        v.check("fresh_output", not rec.get("overwrote_previous"))
        if "outputs2" in rec:
            d = max((C.rel_error(a, b) if a is not None and b is not None and a.shape == b.shape
                     else math.inf) for a, b in zip(rec["outputs"], rec["outputs2"])) if rec["outputs"] else 0.0
            ok = d <= tol
            v.check("deterministic", ok)
            if not ok:
                v.fail("nondeterministic", f"two calls on the same inputs differ by {d:.2e} (relative)")
    v.errors = {k: val for k, val in worst.items() if k == "trial" or any(kd == k for kd, _ in kinds)}
    if len(got) < len(calls):
        return

    # Same answer for different inputs: a stale buffer or a constant.
    trial_ix = [i for i, (k, _) in enumerate(kinds) if k == "trial"]
    for a, b in zip(trial_ix, trial_ix[1:]):
        oa, ob = got[a]["outputs"], got[b]["outputs"]
        if all(x is not None and y is not None and C.same_bits(x, y) for x, y in zip(oa, ob)) and not all(
                C.same_bits(x, y) for x, y in zip(expected[a], expected[b])):
            v.fail("stale_output", f"trials {a} and {b} returned bitwise the same output for different inputs")

    # Near-constant problems: a constant, or an input returned unchanged, is within a hair of the truth.
    fit = C.trivial_fit([expected[i][0] for i in trial_ix], [calls[i]["inputs"] for i in trial_ix]) \
        if all(isinstance(expected[i][0], torch.Tensor) for i in trial_ix) else None
    if fit:
        what, spread, trivial = fit
        v.notes.append(f"the true output is within {spread:.1e} (relative) of {what}: the candidate is "
                       "judged on the part a trivial kernel would miss")
        worst_var = 0.0
        for i, t in zip(trial_ix, trivial):
            o = got[i]["outputs"][0]
            worst_var = max(worst_var, C.varying_part_error(o, expected[i][0], t)
                            if o is not None and o.shape == t.shape else math.inf)
        v.errors["varying_part"] = worst_var
        limit = C.NEAR_CONSTANT_TOL[precision]
        v.check("near_constant", worst_var <= limit)
        if not worst_var <= limit:
            v.fail("near_constant", f"the true output is within {spread:.1e} of {what}; the candidate misses "
                                    f"the rest by {worst_var:.2e} (> {limit:g}) of its size: a trivial kernel "
                                    "would look correct")


def _judge_timing(v: Verdict, res: dict, prob: Problem, inputs: list, init: list, ref_out: list, dtype,
                  tol: float, job: dict, oracle, device: str, ceilings: Any, cuda: bool) -> None:
    import torch
    t = res["timing"]
    v.timing = t
    cand = t.get("candidate", {}).get("median_us")
    eager = t.get("eager", {}).get("median_us")
    comp = t.get("compile", {}).get("median_us")
    v.times.update(candidate_us=cand, eager_us=eager, compile_us=comp,
                   speedup_vs_eager=eager / cand if cand and eager else None,
                   speedup_vs_compile=comp / cand if cand and comp else None)
    for n in res.get("notes", []):
        v.notes.append(n)
    esc = t.get("candidate", {}).get("escaped_samples", 0)
    v.check("timer_bracket", esc == 0 if cuda else None)
    if esc:
        v.fail("side_stream", f"{esc} timed samples ran longer on the host clock than on the stream's "
                              "events: work escaped onto another stream")

    # The re-check after timing: same tensors again, then new values written into those tensors.
    rc = res.get("recheck", {})
    for k, (same, new) in enumerate(zip(rc.get("same", []), rc.get("refill", []))):
        old_exp = _oracle(oracle, job["timing_check"]["sets"][k], device)
        new_exp = _oracle(oracle, job["timing_check"]["refill"][k], device)
        if same and C.rel_error(same[0], old_exp[0]) > tol:
            _classify(v, C.rel_error(same[0], old_exp[0]), v.precision, tol, f"after timing, set {k}",
                      "incorrect")
            v.check("after_timing", False)
        if new:
            err_new = C.rel_error(new[0], new_exp[0])
            if err_new > tol:
                v.check("not_cached", False)
                if C.rel_error(new[0], old_exp[0]) <= tol:
                    v.fail("cached", f"set {k}: after new values were written into the same input tensors, "
                                     "the candidate returned the old answer (results cached by input pointer)")
                else:
                    _classify(v, err_new, v.precision, tol, f"after refilling set {k}", "incorrect")
            else:
                v.check("not_cached", True)
                v.check("after_timing", True)

    # The physical floor.
    ceil = ceilings
    if ceilings == "auto":
        ceil = None
        if cuda:
            try:
                from moelab import hardware
                ceil = hardware.ceilings(None)
            except Exception as e:  # noqa: BLE001 - no floor is a note, not a failure
                v.notes.append(f"no roofline floor: hardware.ceilings() failed ({type(e).__name__}: {e})")
    if ceil is None or not cand:
        v.check("above_floor", None)
        return
    nbytes = _meta(prob, "BYTES", inputs, init, dtype)
    if nbytes is None:
        params = sum(x.numel() * x.element_size() for x in
                     prob.module.Model(*init).to(dtype).state_dict().values())
        nbytes = params + sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) \
            + sum(o.numel() * o.element_size() for o in ref_out if isinstance(o, torch.Tensor))
    flops = _meta(prob, "FLOPS", inputs, init, dtype) or 0.0
    rate = ceil.fp16_tflops if dtype == torch.float16 else ceil.bf16_tflops  # fp32 can be no faster
    floor = max(nbytes / (ceil.read_gbps * 1e3), flops / (rate * 1e6))
    v.times.update(floor_us=floor, pct_of_floor=100.0 * floor / cand)
    ok = cand >= TOO_FAST * floor
    v.check("above_floor", ok)
    if not ok:
        v.fail("too_fast", f"median {cand:.2f} µs is below the roofline floor {floor:.2f} µs "
                           f"({nbytes / 1e6:.2f} MB, {flops / 1e9:.2f} GFLOP on {ceil.name}): impossible")


def _judge_profile(v: Verdict, prof: dict, info: dict) -> None:
    kernels = prof.get("kernels", [])
    v.kernels = kernels
    ok = bool(kernels)
    if not kernels:
        v.fail("profiler", "the profiler saw no GPU kernel run during the candidate's forward")
    jit = info.get("jit_functions", [])
    if jit and kernels and not any(any(j in k for k in kernels) for j in jit):
        ok = False
        v.fail("profiler", f"none of the candidate's Triton kernels ({', '.join(jit)}) ran; the GPU ran "
                           f"{', '.join(kernels[:4])}")
    v.check("profiler", ok)
    extra = sorted(set(prof.get("streams", [])) - set(prof.get("eager_streams", [])))
    if extra and prof.get("eager_streams"):
        v.fail("side_stream", f"kernels ran on stream(s) {extra}, which the reference never uses")
    v.check("one_stream", not extra)
