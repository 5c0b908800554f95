"""The shipped MoE SwiGLU problem at test size: E=8, top-2, T=12, hidden 64, width 32."""
import torch

from moelab.verify.problems._moe import MoESwiGLU as Model, moe_bytes, moe_flops, router_logits  # noqa: F401

E, T, H, I, K = 8, 12, 64, 32, 2
TRANSFORM_INPUTS = (0,)
LARGE_SCALE = 16.0
BYTES, FLOPS = moe_bytes, moe_flops


def get_inputs():
    return [torch.randn(T, H), router_logits(T, E)]


def get_inputs_alt():
    return [torch.randn(5, H), router_logits(5, E)]


def get_init_inputs():
    return [E, H, I, K]
