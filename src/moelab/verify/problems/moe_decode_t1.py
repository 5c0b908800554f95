"""MoE SwiGLU layer, E=128 experts, top-8, T=1 tokens, hidden 2048, expert width 768 (decode at Qwen3-30B-A3B shapes, one token)."""

import torch

from moelab.verify.problems._moe import MoESwiGLU as Model, moe_bytes, moe_flops, router_logits

E, T, H, I, K = 128, 1, 2048, 768, 8
T_ALT = 3  # the other-shape check: an odd token count the timing does not use
PRECISION = "bf16"
TRANSFORM_INPUTS = (0,)  # reshape x's distribution; the router logits keep their tie-free grid
LARGE_SCALE = 16.0  # x·16 keeps SwiGLU's products inside fp16's range
BYTES, FLOPS = moe_bytes, moe_flops


def get_inputs():
    return [torch.randn(T, H), router_logits(T, E)]


def get_inputs_alt():
    return [torch.randn(T_ALT, H), router_logits(T_ALT, E)]


def get_init_inputs():
    return [E, H, I, K]
