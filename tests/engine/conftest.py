"""Tiny Hugging Face checkpoints of each supported family, written with transformers' save_pretrained."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():  # the kernels run on the CPU through Triton's interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before moelab's kernel modules import triton

# Per family: the HF config kwargs on top of the shared tiny shape (2 layers, hidden 64, 8 experts, top-2).
FAMILIES = {
    "qwen3_moe": dict(num_experts=8, moe_intermediate_size=32, head_dim=16, norm_topk_prob=True),
    "qwen2_moe": dict(num_experts=8, moe_intermediate_size=32, shared_expert_intermediate_size=48),
    "olmoe": dict(num_experts=8, clip_qkv=3.0),
    "mixtral": dict(num_local_experts=8),
    # Qwen3.5's text model: three Gated DeltaNet layers, then one gated full-attention layer (partial RoPE, a quarter
    # of head_dim), (1 + w) norms, a shared expert behind a sigmoid gate.
    "qwen3_5_moe_text": dict(num_experts=8, moe_intermediate_size=32, shared_expert_intermediate_size=48, head_dim=16,
                             num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4,
                             linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4),
    # Qwen3-Next: the same layers, its input projection grouped by key head (in_proj_qkvz, in_proj_ba), and a dense
    # MLP in layer 1 (mlp_only_layers) beside the MoE ones.
    "qwen3_next": dict(num_experts=8, moe_intermediate_size=32, shared_expert_intermediate_size=48, head_dim=16,
                       num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                       linear_value_head_dim=8, linear_conv_kernel_dim=4, norm_topk_prob=True, mlp_only_layers=[1]),
}
BASE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, vocab_size=128, num_experts_per_tok=2, max_position_embeddings=256,
            pad_token_id=None, bos_token_id=None, eos_token_id=None)


def hf_model(family: str, seed: int = 0, **overrides):
    """A tiny transformers model of `family` in fp32 with every weight drawn at a scale that makes the
    logits, the routing and the argmax decisive (HF's 0.02 init leaves near-ties everywhere)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(family, **{**BASE, **FAMILIES[family], **overrides})
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # non-trivial norm weights catch a norm applied to the wrong tensor
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
    return model


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    """checkpoint(family, **overrides) -> (hf_model, folder): the model saved with save_pretrained (`seed=` among
    the overrides draws other weights)."""
    made = {}

    def make(family: str, **overrides):
        key = (family, repr(sorted(overrides.items())))
        if key not in made:
            model = hf_model(family, **overrides)
            folder = tmp_path_factory.mktemp(family)
            model.save_pretrained(folder)
            made[key] = (model, folder)
        return made[key]

    return make
