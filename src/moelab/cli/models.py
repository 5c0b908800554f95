"""`moelab models`: the shipped model presets with their total and active parameter counts."""

from __future__ import annotations

import typer

from moelab.cli import app


@app.command("models")
def models_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the shipped presets (the real models' config.json files): architecture, experts, and
    parameter counts.

    Active parameters are what one decoded token uses: attention, router, the top-k routed experts,
    shared and dense MLPs, and the lm_head; the input embedding is not counted (one row of it is read).
    Any preset name, or a path to a config.json or checkpoint folder, is accepted as MODEL by
    `moelab roofline`, `profile` and `decode`.
    """
    from moelab.models import list_presets, load_spec
    from moelab.report import emit_json, table

    rows = []
    for name in list_presets():
        s = load_spec(name)
        attn = "MLA" if s.attention == "mla" else f"{s.heads}/{s.kv_heads}x{s.head_dim}"
        if s.layer_count("linear_attention"):
            attn += f" + {s.layer_count('linear_attention')} GDN"
        if s.layer_count("sliding_attention"):
            attn += f" {s.layer_count('sliding_attention')} SWA"
        rows.append({
            "preset": name, "model_type": s.model_type, "layers": s.layers, "hidden": s.hidden,
            "attention": attn, "experts": s.num_experts, "top_k": s.top_k,
            "expert_width": s.expert_intermediate, "shared_width": s.shared_intermediate,
            "total_b": s.total_params() / 1e9, "active_b": s.active_params() / 1e9,
            "active_with_embedding_b": s.active_params("both") / 1e9,
        })
    if json_out:
        emit_json(rows)
        return
    table(rows, ["preset", "layers", "hidden", "attention", "experts", "top_k", "expert_width", "total_b",
                 "active_b"],
          headers={"total_b": "total B", "active_b": "active B", "expert_width": "width", "top_k": "k"},
          title="moelab presets",
          caption="active = attention + router + k experts + shared/dense MLP + lm_head (input embedding excluded)")
