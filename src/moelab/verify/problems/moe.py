"""MoE SwiGLU layer, E=8 experts, top-2, T=1024 tokens, hidden 2048, expert width 1408 (second worklog's 'moe' (8 experts); T, H, I are moelab's choice)."""

import torch

from moelab.verify.problems._moe import MoESwiGLU as Model, moe_bytes, moe_flops, router_logits

E, T, H, I, K = 8, 1024, 2048, 1408, 2
T_ALT = 37  # the other-shape check: an odd token count the timing does not use
PRECISION = "fp32"
TRANSFORM_INPUTS = (0,)  # reshape x's distribution; the router logits keep their tie-free grid
LARGE_SCALE = 16.0  # x·16 keeps SwiGLU's products inside fp16's range
BYTES, FLOPS = moe_bytes, moe_flops


def get_inputs():
    return [torch.randn(T, H), router_logits(T, E)]


def get_inputs_alt():
    return [torch.randn(T_ALT, H), router_logits(T_ALT, E)]


def get_init_inputs():
    return [E, H, I, K]
