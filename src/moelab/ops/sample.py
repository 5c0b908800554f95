"""The greedy end of a decode step: the plain-torch reference and its registration.

`greedy_emit(logits, tok, out, step, pos)`: in place, tok = argmax(logits) per row (torch.argmax: the first index of
the maximum; a NaN counts as the maximum), out[:, step] = tok, step += 1, pos += 1 — what the engine's decode loop
does after each step's logits, on device tensors only (no host sync, so it can be graph-captured).
"""

from __future__ import annotations

import torch

from moelab import ops
from moelab.kernels.sample import greedy_emit as _greedy_emit_kernel


def greedy_emit_reference(logits: torch.Tensor, tok: torch.Tensor, out: torch.Tensor, step: torch.Tensor,
                          pos: torch.Tensor) -> None:
    nxt = logits.argmax(dim=-1)
    tok.copy_(nxt)
    out.scatter_(1, step.view(1, 1).expand(out.shape[0], 1), nxt.view(-1, 1))
    step.add_(1)
    pos.add_(1)


ops.register("greedy_emit", greedy_emit_reference, _greedy_emit_kernel,
             doc="argmax of each row of logits, written to tok and out[:, step]; step and pos advanced (in place)")
