"""Facts showing that a fixture checkpoint engages every mechanism of the model.

A golden fixture can only catch a mistake in a part of the model it exercises: a router whose
bias never changes the selection cannot tell "bias in the weights" from "bias for selection
only", one MXFP4 scale value cannot tell a scale mistake from a global gain, and so on. These
facts are recorded in the golden json (make_goldens.py) and asserted by test_reference.py.
"""

import os

import numpy as np

from k3_reference import MODEL


def mxfp4_facts(model):
    """Spread of E8M0 scale bytes and zero groups over every routed expert tensor."""
    scales, zero_groups, groups = [], 0, 0
    for name, array in model.w.items():
        if name.endswith(".weight_scale"):
            scales.append(array.ravel())
        elif name.endswith(".weight_packed"):
            # a group of 32 elements is 16 bytes; it is all zeros when every nibble is +-0
            nib_zero = ((array & 0x7) == 0) & (((array >> 4) & 0x7) == 0)
            per_group = nib_zero.reshape(array.shape[0], -1, 16).all(axis=-1)
            zero_groups += int(per_group.sum())
            groups += per_group.size
    s = np.concatenate(scales) if scales else np.zeros(0, dtype=np.uint8)
    return {
        "scale_min": int(s.min()) if s.size else None,
        "scale_max": int(s.max()) if s.size else None,
        "scale_distinct": int(np.unique(s).size),
        "scale_255_count": int((s == 255).sum()),
        "all_zero_groups": zero_groups,
        "groups": groups,
    }


def completed_attn_res_blocks(n_layers, block_size):
    """Blocks [b, b + block_size) that lie entirely inside the layer stack."""
    return sum(1 for b in range(0, n_layers, block_size) if b + block_size <= n_layers)


def fixture_facts(model, model_dir, ids):
    c = model.cfg
    trace = {}
    model.forward(ids, trace)
    bias_changes = {str(r["layer"]): r["bias_changed_selection"] for r in trace["routing"]}
    chosen = np.concatenate([np.asarray(r["chosen"]).ravel() for r in trace["routing"]]) if trace["routing"] else []
    return {
        "layer_kinds": trace["layer_kind"],
        "n_mla_layers": trace["layer_kind"].count("MLA"),
        "n_kda_layers": trace["layer_kind"].count("KDA"),
        "n_dense_layers": c.first_k_dense_replace,
        "n_shards": sum(1 for n in os.listdir(model_dir) if n.endswith(".safetensors")),
        "attn_res_block_size": c.attn_res_block_size,
        "attn_res_snapshots": trace["n_snapshots"],
        "attn_res_completed_blocks": completed_attn_res_blocks(c.num_hidden_layers, c.attn_res_block_size),
        "router_bias_changed_selection": bias_changes,
        "router_bias_changed_selection_total": int(sum(bias_changes.values())),
        "experts_used": int(np.unique(chosen).size) if len(chosen) else 0,
        "num_experts": c.num_experts,
        "num_experts_per_token": c.num_experts_per_token,
        "mxfp4": mxfp4_facts(model),
        "layer_rms": [round(r, 6) for r in trace["layer_rms"]],
        "final_rms": round(trace["final_rms"], 6),
        "embed_rms": float(np.sqrt(np.mean(model.w[MODEL + "embed_tokens.weight"][ids].astype(np.float64) ** 2))),
    }
