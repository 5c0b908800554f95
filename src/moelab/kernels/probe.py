"""Per-program timestamps for timeline probes (`benchmarks/probe_timeline.py`): where a kernel's fixed cost goes.

A kernel built with its PROBE constexpr on writes, for each program, a few readings of the GPU's global
nanosecond clock (%globaltimer, one clock for all SMs) and the SM it ran on into a caller's int64 buffer. Off (the
default, and always under the interpreter) it compiles to nothing. Inline PTX: GPU only.
"""

import triton
import triton.language as tl


@triton.jit
def now_ns(dep):
    """%globaltimer in ns, read after `dep` (an int32 scalar) exists: pass a value the reading must follow."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def sm_id(dep):
    """The SM this program runs on (%smid)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dep], dtype=tl.int32, is_pure=False, pack=1)
