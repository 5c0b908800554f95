"""`moelab verify`: judge a kernel — ours, a colleague's, an LLM's — with a harness built not to be fooled.

    from moelab.verify import verify, list_problems
    v = verify("my_kernel.py", "rmsnorm", precision="fp32")
    v.passed, v.reasons, v.times, v.checks, v.to_dict()

Problems are KernelBench files (`Model`, `get_inputs`, `get_init_inputs`; see `problem.py` for the optional
metadata); a candidate defines `ModelNew` with the same constructor. The candidate runs in its own process
(`sandbox.py`, `_worker.py`); the float64 oracle, the inputs' seeds and the verdict stay in this one.

Reason codes (stable: the mining loop tallies them)

| code | the candidate ... |
|---|---|
| compile_error | does not parse or fails to import |
| crash | raises, or its process dies (signal, out of memory) |
| timeout | runs past `timeout_s` (its whole process group is killed) |
| exit | calls sys.exit / os._exit, or its process ends without a result |
| no_modelnew | defines no `ModelNew` |
| shape / dtype / stride | returns the wrong shape, dtype, or strides (size-1 dims ignored) |
| nan | returns NaN or inf (unwritten memory is NaN-poisoned before every call) |
| incorrect | relative error ‖out−ref‖/‖ref‖ above the problem's tolerance, against a float64 oracle |
| incorrect_other_shape | is right at the timed shape but wrong at the problem's `get_inputs_alt()` shape |
| nondeterministic | gives two answers farther apart than the tolerance for the same inputs |
| alias | returns memory that overlaps an input |
| mutation | changes an input |
| stale_output | returns the same bits for different inputs, or overwrites the output of its previous call |
| cached | after new values are written into the same input tensors, returns the old answer |
| precision | is right only at a lower precision (error within the next precision's band), or turns TF32 on |
| static_cast | source casts below the task precision (.half(), torch/tl float16/bfloat16, autocast) |
| static_tf32_dot | source has tl.dot without input_precision="ieee" (or allow_tf32=False), or enables TF32, in fp32 |
| static_torch_call | source calls the reference `Model`, or torch compute ops where it claims a kernel |
| static_fallback | source wraps calls in try/except (a failing kernel could fall back silently) |
| static_stream | source uses other streams, threads or processes |
| static_patch | source assigns attributes of torch/time/moelab/..., imports the harness, or inspects frames |
| patch | at run time, replaced a clock, a sync, the timer or another guarded function |
| too_fast | is timed below 90 % of the roofline floor for the problem's bytes and FLOPs |
| near_constant | on a problem whose true output is within 1e-3 of a trivial answer (a constant, or an input
  unchanged), misses the part that trivial answer lacks (or the problem's output is exactly constant) |
| profiler | (GPU) ran none of its own Triton kernels, or no GPU kernel at all |
| side_stream | (GPU) left work the stream's events did not see, or launched on a stream the reference never uses |
| write_outside | changed files outside its temporary directory that the harness watches |

Where a check cannot run (no GPU, no alternative shape), `Verdict.checks[name]` is None and `notes` says why.
"""

from __future__ import annotations

from moelab.verify.harness import verify
from moelab.verify.problem import Problem, list_problems, load_problem
from moelab.verify.verdict import Reason, Verdict

__all__ = ["verify", "list_problems", "load_problem", "Problem", "Verdict", "Reason"]
