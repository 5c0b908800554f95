"""Model specs (from config.json or shipped presets) and the decode-step op graph built from them."""

from moelab.models.graph import GROUPS, Op, decode_step_ops, expected_distinct_experts
from moelab.models.spec import ModelSpec, list_presets, load_spec, spec_from_config

__all__ = ["GROUPS", "ModelSpec", "Op", "decode_step_ops", "expected_distinct_experts", "list_presets",
           "load_spec", "spec_from_config"]
