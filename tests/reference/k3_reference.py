#!/usr/bin/python3
"""An independent fp32 reference of the Kimi K3 forward pass, in numpy.

Written from Kimi K3's model definition (docs/model.md "The model's definition": the math,
"Tensor names" and "MXFP4"), with these decisions:
  - q_a_layernorm / kv_a_layernorm use eps 1e-6; every other RMSNorm uses rms_norm_eps;
  - routed weights are renormalised only when num_experts_per_token > 1;
  - the KDA q/k L2 norm is x * rsqrt(sum(x^2) + 1e-6);
  - an E8M0 scale byte of 255 decodes to 0.
It deliberately shares no code with the C++ engine: its value is that it was written apart.

Evaluation is full-sequence (prefill): forward(ids) returns logits for every position.
Everything is computed in float32 (`dtype=np.float64` is available as a self-check of the
reference's own rounding). Weights are widened exactly from their stored bf16 / MXFP4 bytes.

`mutations` injects deliberate mistakes (see MUTATIONS); the teeth test uses
them to prove the golden fixtures catch each one.

Command line:  k3_reference.py MODEL_DIR --ids 1,2,3 [--gen N] [--dump-logits PATH] [--dump-hidden PATH]
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import load_checkpoint  # noqa: E402

MODEL = "language_model.model."
LM_HEAD = "language_model.lm_head.weight"

MLA_LORA_NORM_EPS = 1e-6   # Decision 1: first-party default for q_a/kv_a layernorm
KDA_L2_EPS = 1e-6          # Decision 1: x * rsqrt(sum(x^2) + 1e-6)
MXFP4_GROUP = 32           # docs/model.md "MXFP4": one E8M0 scale per 32 consecutive inputs of a row
# docs/model.md "MXFP4": nibble code -> E2M1 value; bit 3 is the sign.
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)

# Deliberate mistakes, each a flag in `mutations`: the goldens must catch every one.
MUTATIONS = {
    "swap_w1_w3": "routed experts use w3 as the gate and w1 as the up projection",
    "swap_nibbles": "MXFP4 high nibble taken as the even element",
    "mla_norm_eps_1e5": "q_a_layernorm / kv_a_layernorm use eps 1e-5 instead of 1e-6",
    "softmax_scale_nope_only": "MLA softmax scale 1/sqrt(qk_nope) instead of 1/sqrt(qk_nope+qk_rope)",
    "router_bias_in_weights": "expert weights taken from the biased scores s + bias",
    "norm_after_up_proj": "latent MoE RMSNorm applied after routed_expert_up_proj (unit gain) instead of before",
    "a_log_per_channel": "A_log broadcast over channels (A_log[channel % len]) instead of one value per head",
    "layer_map_zero_based": "full_attn_layers read as zero-based",
    # More of the model definition's classic silent failures, to show the fixtures catch
    # those too.
    "rope_scores_dropped": "MLA scores use q_nope.k_nope only, the shared rope slot is never scored",
    "attn_res_mixes_normed_sources": "AttnRes mixes the RMS-normalised sources instead of the raw ones",
    "attn_res_no_clear": "an attention-residual snapshot is taken but the running residual is not cleared",
    "model_level_mix_skipped": "the final norm is applied to the last residual without the model-level AttnRes",
    "conv_without_silu": "the KDA short conv output is used without its SiLU",
    "l2_norm_mean": "KDA q/k normalised by the root MEAN square instead of the root sum of squares",
    "delta_rule_read_before_write": "KDA output read from the state before the delta write",
    "kda_gate_before_norm": "KDA sigmoid gate applied before the head RMSNorm",
    "dt_bias_outside_decay_scale": "KDA decay argument a*z + dt_bias instead of a*(z + dt_bias)",
    "situ_sigmoid_of_capped_gate": "SiTU-GLU sigmoid taken of the capped gate b1*tanh(g/b1)",
    "expert_norm_per_expert": "latent MoE RMSNorm applied to each expert's output instead of the aggregate",
    "router_softmax": "router scores from a softmax over experts instead of independent sigmoids",
}


class ConfigError(Exception):
    pass


class MissingTensor(Exception):
    """A tensor the (possibly mutated) model needs is not in the checkpoint."""


# ---------------------------------------------------------------------------------------------
# Configuration (docs/model.md "Configuration"): nested release form or flat form.
# ---------------------------------------------------------------------------------------------

class K3Config:
    """The model shape, read from config.json. Field names follow the config keys."""

    # (field, [spellings], kind, default or None when required)
    _KEYS = [
        ("hidden_size", ["hidden_size"], int, None),
        ("num_hidden_layers", ["num_hidden_layers"], int, None),
        ("vocab_size", ["vocab_size"], int, None),
        ("rms_norm_eps", ["rms_norm_eps"], float, None),
        ("intermediate_size", ["intermediate_size"], int, None),
        ("first_k_dense_replace", ["first_k_dense_replace"], int, None),
        ("attn_res_block_size", ["attn_res_block_size"], int, None),
        ("num_attention_heads", ["num_attention_heads"], int, None),
        ("q_lora_rank", ["q_lora_rank"], int, None),
        ("kv_lora_rank", ["kv_lora_rank"], int, None),
        ("qk_nope_head_dim", ["qk_nope_head_dim"], int, None),
        ("qk_rope_head_dim", ["qk_rope_head_dim"], int, None),
        ("v_head_dim", ["v_head_dim"], int, None),
        ("mla_use_output_gate", ["mla_use_output_gate"], bool, True),
        ("kda_num_heads", ["num_heads", "kda_num_heads"], int, None),
        ("kda_head_dim", ["head_dim", "kda_head_dim"], int, None),
        ("short_conv_kernel_size", ["short_conv_kernel_size"], int, None),
        ("gate_lower_bound", ["gate_lower_bound"], float, None),
        ("full_attn_layers", ["full_attn_layers"], list, None),
        ("num_experts", ["num_experts"], int, None),
        ("num_experts_per_token", ["num_experts_per_token"], int, None),
        ("num_shared_experts", ["num_shared_experts"], int, None),
        ("routed_expert_hidden_size", ["routed_expert_hidden_size"], int, None),
        ("moe_intermediate_size", ["moe_intermediate_size"], int, None),
        ("routed_scaling_factor", ["routed_scaling_factor"], float, None),
        ("moe_renormalize", ["moe_renormalize"], bool, True),
        ("latent_moe_use_norm", ["latent_moe_use_norm"], bool, True),
        ("activation_situ_beta", ["activation_situ_beta", "situ_beta"], float, None),
        ("activation_situ_linear_beta", ["activation_situ_linear_beta", "situ_linear_beta"], float, None),
    ]
    # KDA keys are looked up in linear_attn_config first, so a generic "head_dim" or
    # "num_heads" elsewhere in text_config can never shadow them.
    _KDA_FIELDS = {"kda_num_heads", "kda_head_dim", "short_conv_kernel_size", "gate_lower_bound", "full_attn_layers"}

    def __init__(self, raw, origin="config.json"):
        text = raw.get("text_config", {})
        linear = text.get("linear_attn_config", raw.get("linear_attn_config", {}))
        missing = []
        for field, spellings, kind, default in self._KEYS:
            scopes = [linear, text, raw] if field in self._KDA_FIELDS else [text, linear, raw]
            value = None
            for scope in scopes:
                for spelling in spellings:
                    if value is None and spelling in scope:
                        value = scope[spelling]
            if value is None:
                if default is None:
                    missing.append(spellings[0])
                    continue
                value = default
            setattr(self, field, kind(value) if kind is not list else [int(v) for v in value])
        if missing:
            raise ConfigError(f"{origin}: missing required keys: {', '.join(missing)}")
        n = self.num_hidden_layers
        for layer in self.full_attn_layers:
            if not 1 <= layer <= n:
                raise ConfigError(f"{origin}: full_attn_layers entry {layer} outside 1..{n} (the list is one-based)")

    def mla_layers(self, zero_based_mistake=False):
        """Zero-based indices of the MLA layers. full_attn_layers is ONE-based (docs/model.md "Layer stack")."""
        if zero_based_mistake:
            return {i for i in self.full_attn_layers if i < self.num_hidden_layers}
        return {i - 1 for i in self.full_attn_layers}


def load_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        return K3Config(json.load(f), path)


# ---------------------------------------------------------------------------------------------
# Primitives (docs/model.md "Numerics")
# ---------------------------------------------------------------------------------------------

def sigmoid(x):
    with np.errstate(over="ignore"):  # exp(-x) -> inf for very negative x gives the right 0
        return 1.0 / (1.0 + np.exp(-x))


def rms_norm(x, weight, eps):
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps), times the gain (if any)."""
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * inv if weight is None else (weight * x) * inv


def l2_norm(x, eps=KDA_L2_EPS, mean_mistake=False):
    """KDA q/k norm over the last axis: x * rsqrt(sum(x^2) + eps) (sum, not mean)."""
    reduce = np.mean if mean_mistake else np.sum
    return x / np.sqrt(reduce(x * x, axis=-1, keepdims=True) + eps)


def situ_glu(gate, up, beta, linear_beta, capped_sigmoid_mistake=False):
    """SiTU-GLU: a = b1*tanh(g/b1)*sigmoid(g) (sigmoid of the uncapped g), u = b2*tanh(up/b2)."""
    capped = beta * np.tanh(gate / beta)
    a = capped * sigmoid(capped if capped_sigmoid_mistake else gate)
    u = linear_beta * np.tanh(up / linear_beta)
    return a * u


def dequantize_mxfp4(packed, scales, swap_nibbles=False):
    """MXFP4 -> float (docs/model.md "MXFP4"). packed [rows][in/2], scales [rows][in/32] E8M0.

    Low nibble = even element, high nibble = odd element; value = E2M1[code] * 2^(s-127),
    with s = 255 decoding to 0 (Decision 1).
    """
    rows = packed.shape[0]
    low, high = packed & 0x0F, packed >> 4
    if swap_nibbles:
        low, high = high, low
    codes = np.empty((rows, packed.shape[1] * 2), dtype=np.uint8)
    codes[:, 0::2], codes[:, 1::2] = low, high
    multiplier = np.where(scales == 255, 0.0, np.ldexp(1.0, scales.astype(np.int32) - 127))
    values = E2M1[codes] * np.repeat(multiplier, MXFP4_GROUP, axis=1)
    return values  # exact in float64; every value is also exact in float32


def delta_rule(q, k, v, beta, alpha, read_before_write_mistake=False):
    """KDA recurrence (docs/model.md "Kimi Delta Attention"), sequential over t, all heads at once.

    q, k, v, alpha [T][H][D]; beta [T][H]. State S[h] is [D_k][D_v], row i = key channel:
      S[i][:] *= alpha[i]; u = k^T S; S += outer(k, beta*(v - u)); o = (q/sqrt(D))^T S (updated S).
    """
    T, H, D = q.shape
    S = np.zeros((H, D, D), dtype=q.dtype)
    o = np.zeros((T, H, D), dtype=q.dtype)
    q_scaled = q * q.dtype.type(1.0 / np.sqrt(D))
    for t in range(T):
        S = S * alpha[t][:, :, None]                                            # 1. decay rows
        u = np.einsum("hi,hij->hj", k[t], S)                                    # 2. read decayed S
        if read_before_write_mistake:
            o[t] = np.einsum("hi,hij->hj", q_scaled[t], S)
        S = S + k[t][:, :, None] * (beta[t][:, None] * (v[t] - u))[:, None, :]  # 3. delta write
        if not read_before_write_mistake:
            o[t] = np.einsum("hi,hij->hj", q_scaled[t], S)                      # 4. read updated S
    return o


def nope_attention(q_nope, q_rope, k_nope, k_rope, v, scale, drop_rope_mistake=False):
    """Causal softmax attention of gated NoPE MLA (docs/model.md "Gated NoPE MLA").

    q_nope [T][H][nope], q_rope [T][H][rope], k_nope [T][H][nope], k_rope [T][rope] (ONE
    unrotated key slot shared by all heads), v [T][H][vd]. score = (q_nope.k_nope + q_rope.k_rope)
    * scale over positions s <= t. Returns [T][H][vd].
    """
    T = q_nope.shape[0]
    scores = np.einsum("thd,shd->hts", q_nope, k_nope)
    if not drop_rope_mistake:
        scores = scores + np.einsum("thd,sd->hts", q_rope, k_rope)
    scores = scores * scale
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    scores = np.where(future, -np.inf, scores)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------

class K3Reference:
    def __init__(self, model_dir, mutations=None, dtype=np.float32):
        unknown = set(mutations or {}) - set(MUTATIONS)
        if unknown:
            raise ValueError(f"unknown mutations: {sorted(unknown)}")
        self.mut = {m: bool((mutations or {}).get(m)) for m in MUTATIONS}
        self.dt = dtype
        self.cfg = load_config(model_dir)
        self.w, self.dtypes = load_checkpoint(model_dir)
        self.mla = self.cfg.mla_layers(zero_based_mistake=self.mut["layer_map_zero_based"])
        self._experts = {}  # layer -> (w1, w2, w3) dequantised, [experts][rows][in]

    # ---- weights ----

    def tensor(self, name, shape=None):
        """A checkpoint tensor in the compute dtype, checked against the shape the config implies."""
        if name not in self.w:
            raise MissingTensor(f"checkpoint has no tensor {name}")
        t = self.w[name]
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise ValueError(f"tensor {name}: shape {list(t.shape)}, config implies {list(shape)}")
        return t.astype(self.dt)

    def layer_tensor(self, il, name, shape=None):
        return self.tensor(f"{MODEL}layers.{il}.{name}", shape)

    def experts(self, il):
        """Routed experts of layer il, dequantised: w1, w3 [E][I][L], w2 [E][L][I]."""
        if il not in self._experts:
            c = self.cfg
            out = []
            for role, rows, cols in (("w1", c.moe_intermediate_size, c.routed_expert_hidden_size),
                                     ("w2", c.routed_expert_hidden_size, c.moe_intermediate_size),
                                     ("w3", c.moe_intermediate_size, c.routed_expert_hidden_size)):
                mats = []
                for e in range(c.num_experts):
                    p = f"{MODEL}layers.{il}.block_sparse_moe.experts.{e}.{role}."
                    packed = self.w.get(p + "weight_packed")
                    scales = self.w.get(p + "weight_scale")
                    if packed is None or scales is None:
                        raise MissingTensor(f"checkpoint has no tensor {p}weight_packed/weight_scale")
                    if packed.shape != (rows, cols // 2) or scales.shape != (rows, cols // MXFP4_GROUP):
                        raise ValueError(f"{p}: packed {packed.shape} / scale {scales.shape}, config implies "
                                         f"({rows}, {cols // 2}) / ({rows}, {cols // MXFP4_GROUP})")
                    mats.append(dequantize_mxfp4(packed, scales, self.mut["swap_nibbles"]))
                out.append(np.stack(mats).astype(self.dt))
            self._experts[il] = tuple(out)
        return self._experts[il]

    # ---- docs/model.md "Layer stack": model-level pass ----

    def forward(self, ids, trace=None):
        """Logits [T][vocab] for every position of `ids` (full-sequence evaluation).

        `trace`, when a dict, collects per-layer facts (residual RMS, routing, snapshots) and,
        under "steps", the named intermediates in the engine's order and spelling
        (engine/model/trace.h): embed, blk.N.{attn_in,attn_out,ffn_in,mlp_out|moe_out,out},
        result_norm, each [T][hidden].
        """
        c = self.cfg
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0 or ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token ids must be a non-empty list in [0, {c.vocab_size})")
        E = c.hidden_size
        # h[t] = widen_bf16(embed_tokens[id_t]), no scaling
        h = self.tensor(MODEL + "embed_tokens.weight", (c.vocab_size, E))[ids]
        blocks = []  # attention-residual snapshots, each [T][E]
        if trace is not None:
            trace.update(layer_rms=[], layer_kind=[], routing=[], n_snapshots=0, hidden=[], steps=[])
        self.step(trace, "embed", h)
        for il in range(c.num_hidden_layers):
            h = self.decoder_layer(il, h, blocks, trace)
        # model-level aggregator over the snapshots and the final residual, then the final norm
        fold_out = self.fold(MODEL + "output_attn_res_norm.weight", MODEL + "output_attn_res_proj.weight")
        if not self.mut["model_level_mix_skipped"]:
            h = self.attn_res(blocks + [h], fold_out)
        x = rms_norm(h, self.tensor(MODEL + "norm.weight", (E,)), c.rms_norm_eps)
        self.step(trace, "result_norm", x)
        if trace is not None:
            trace["n_snapshots"] = len(blocks)
            trace["final_rms"] = float(np.sqrt(np.mean(h.astype(np.float64) ** 2)))
        return x @ self.tensor(LM_HEAD, (c.vocab_size, E)).T

    @staticmethod
    def step(trace, name, value, il=None):
        """Records a named intermediate (engine/model/trace.h spelling) when tracing."""
        if trace is not None:
            trace["steps"].append((name if il is None else f"blk.{il}.{name}", value))

    # ---- docs/model.md "Layer stack": AttnRes aggregator ----

    def fold(self, norm_name, proj_name):
        """fold = norm.weight * proj.weight (proj is a [1][E] scoring vector)."""
        E = self.cfg.hidden_size
        return self.tensor(norm_name, (E,)) * self.tensor(proj_name, (1, E))[0]

    def attn_res(self, sources, fold):
        """Softmax over sources of (RMSNorm_noweight(v_s) . fold); mix of the RAW sources."""
        v = np.stack(sources)                                   # [S][T][E]
        keys = rms_norm(v, None, self.cfg.rms_norm_eps)         # normalised, no gain
        scores = keys @ fold                                    # [S][T]
        p = np.exp(scores - scores.max(axis=0, keepdims=True))
        p = p / p.sum(axis=0, keepdims=True)
        return np.einsum("st,ste->te", p, keys if self.mut["attn_res_mixes_normed_sources"] else v)

    # ---- docs/model.md "Layer stack": decoder layer ----

    def decoder_layer(self, il, h, blocks, trace):
        c = self.cfg
        E = c.hidden_size
        fold_attn = self.fold(f"{MODEL}layers.{il}.self_attention_res_norm.weight",
                              f"{MODEL}layers.{il}.self_attention_res_proj.weight")
        fold_mlp = self.fold(f"{MODEL}layers.{il}.mlp_res_norm.weight", f"{MODEL}layers.{il}.mlp_res_proj.weight")
        pref = h                                  # running residual ("prefix_sum")
        have = True
        if blocks:                                # pre-attention mix only when snapshots exist
            h = self.attn_res(blocks + [pref], fold_attn)
        self.step(trace, "attn_in", h, il)
        if il % c.attn_res_block_size == 0:       # snapshot then CLEAR
            blocks.append(pref)
            have = self.mut["attn_res_no_clear"]
        x = rms_norm(h, self.layer_tensor(il, "input_layernorm.weight", (E,)), c.rms_norm_eps)
        a = self.mla_attention(il, x) if il in self.mla else self.kda_attention(il, x)
        self.step(trace, "attn_out", a, il)
        pref = pref + a if have else a
        h = self.attn_res(blocks + [pref], fold_mlp)   # pre-MLP mix, always
        self.step(trace, "ffn_in", h, il)
        x2 = rms_norm(h, self.layer_tensor(il, "post_attention_layernorm.weight", (E,)), c.rms_norm_eps)
        if il < c.first_k_dense_replace:
            m = self.dense_mlp(il, x2)
        else:
            m = self.latent_moe(il, x2, trace)
        self.step(trace, "mlp_out" if il < c.first_k_dense_replace else "moe_out", m, il)
        pref = pref + m
        self.step(trace, "out", pref, il)
        if trace is not None:
            trace["layer_rms"].append(float(np.sqrt(np.mean(pref.astype(np.float64) ** 2))))
            trace["hidden"].append(pref)
            trace["layer_kind"].append("MLA" if il in self.mla else "KDA")
        return pref

    # ---- docs/model.md "Kimi Delta Attention": KDA ----

    def short_conv(self, x, taps):
        """Causal depthwise conv over time, then SiLU. x [T][P], taps [P][K]; tap K-1 = current input."""
        T, K = x.shape[0], taps.shape[1]
        padded = np.concatenate([np.zeros((K - 1, x.shape[1]), dtype=x.dtype), x])
        acc = np.zeros_like(x)
        for j in range(K):                        # tap j sees input t-(K-1)+j (raw, pre-conv)
            acc = acc + taps[:, j] * padded[j:j + T]
        return acc if self.mut["conv_without_silu"] else acc * sigmoid(acc)

    def kda_attention(self, il, x):
        c = self.cfg
        T, E = x.shape
        H, D, K = c.kda_num_heads, c.kda_head_dim, c.short_conv_kernel_size
        P = H * D
        lt = lambda name, shape: self.layer_tensor(il, "self_attn." + name, shape)  # noqa: E731
        # 1. projections; ONE low-rank f_a/f_b pair shared by all heads
        q, k, v = (x @ lt(f"{n}_proj.weight", (P, E)).T for n in "qkv")
        b = x @ lt("b_proj.weight", (H, E)).T                                     # [T][H]
        z = (x @ lt("f_a_proj.weight", (D, E)).T) @ lt("f_b_proj.weight", (P, D)).T  # [T][P]
        # 2. causal short conv with SiLU on q, k, v (own taps [P][1][K])
        q = self.short_conv(q, lt("q_conv1d.weight", (P, 1, K))[:, 0, :])
        k = self.short_conv(k, lt("k_conv1d.weight", (P, 1, K))[:, 0, :])
        v = self.short_conv(v, lt("v_conv1d.weight", (P, 1, K))[:, 0, :])
        q, k, v = (t.reshape(T, H, D) for t in (q, k, v))
        # 3. L2 norm per head on q and k only
        q, k = (l2_norm(t, mean_mistake=self.mut["l2_norm_mean"]) for t in (q, k))
        # 4. beta: one scalar per head
        beta = sigmoid(b)                                                           # [T][H]
        # 5. decay: g = lb * sigmoid(exp(A_log[h]) * (z + dt_bias)), alpha = exp(g)
        a_log = self.layer_tensor(il, "self_attn.A_log")
        if a_log.ndim != 1 or a_log.shape[0] < H:
            raise ValueError(f"layer {il} A_log: shape {list(a_log.shape)}, need at least {H} entries")
        if self.mut["a_log_per_channel"]:
            a = np.exp(a_log[np.arange(P) % a_log.shape[0]]).reshape(H, D)
        else:
            a = np.repeat(np.exp(a_log[:H])[:, None], D, axis=1)                   # A_log indexed PER HEAD
        dt_bias = lt("dt_bias", (P,)).reshape(H, D)
        if self.mut["dt_bias_outside_decay_scale"]:
            g = c.gate_lower_bound * sigmoid(a * z.reshape(T, H, D) + dt_bias)
        else:
            g = c.gate_lower_bound * sigmoid(a * (z.reshape(T, H, D) + dt_bias))
        alpha = np.exp(g)                                                           # [T][H][D]
        # 6. delta-rule recurrence per head
        o = delta_rule(q, k, v, beta, alpha, self.mut["delta_rule_read_before_write"])
        # 7. per-head RMSNorm of o (gain o_norm shared by heads), 8. then the sigmoid gate
        gate = sigmoid(x @ lt("g_proj.weight", (P, E)).T)
        if self.mut["kda_gate_before_norm"]:
            o = rms_norm((o.reshape(T, P) * gate).reshape(T, H, D), lt("o_norm.weight", (D,)), c.rms_norm_eps)
            o = o.reshape(T, P)
        else:
            o = rms_norm(o, lt("o_norm.weight", (D,)), c.rms_norm_eps).reshape(T, P) * gate
        # 9. output projection
        return o @ lt("o_proj.weight", (E, P)).T

    # ---- docs/model.md "Gated NoPE MLA": gated NoPE MLA ----

    def mla_attention(self, il, x):
        c = self.cfg
        T, E = x.shape
        H, nope, rope, vd = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        lora_eps = 1e-5 if self.mut["mla_norm_eps_1e5"] else MLA_LORA_NORM_EPS
        lt = lambda name, shape: self.layer_tensor(il, "self_attn." + name, shape)  # noqa: E731
        # low-rank q with its own norm; per head [q_nope | q_rope]
        qa = rms_norm(x @ lt("q_a_proj.weight", (c.q_lora_rank, E)).T,
                      lt("q_a_layernorm.weight", (c.q_lora_rank,)), lora_eps)
        q = (qa @ lt("q_b_proj.weight", (H * (nope + rope), c.q_lora_rank)).T).reshape(T, H, nope + rope)
        q_nope, q_rope = q[:, :, :nope], q[:, :, nope:]
        # compressed kv: latent (normed) + ONE shared, unrotated rope key per position
        ckv = x @ lt("kv_a_proj_with_mqa.weight", (c.kv_lora_rank + rope, E)).T
        latent = rms_norm(ckv[:, :c.kv_lora_rank], lt("kv_a_layernorm.weight", (c.kv_lora_rank,)), lora_eps)
        k_rope = ckv[:, c.kv_lora_rank:]                                            # [T][rope]
        kv = (latent @ lt("kv_b_proj.weight", (H * (nope + vd), c.kv_lora_rank)).T).reshape(T, H, nope + vd)
        k_nope, v = kv[:, :, :nope], kv[:, :, nope:]
        # scores over the full qk width, causal softmax
        width = nope if self.mut["softmax_scale_nope_only"] else nope + rope
        o = nope_attention(q_nope, q_rope, k_nope, k_rope, v, self.dt(1.0 / np.sqrt(width)),
                           self.mut["rope_scores_dropped"]).reshape(T, H * vd)
        # output gate before o_proj, no norm
        if c.mla_use_output_gate:
            o = o * sigmoid(x @ lt("g_proj.weight", (H * vd, E)).T)
        return o @ lt("o_proj.weight", (E, H * vd)).T

    # ---- dense MLP (layers < first_k_dense_replace) ----

    def dense_mlp(self, il, x):
        c = self.cfg
        E, F = c.hidden_size, c.intermediate_size
        gate = x @ self.layer_tensor(il, "mlp.gate_proj.weight", (F, E)).T
        up = x @ self.layer_tensor(il, "mlp.up_proj.weight", (F, E)).T
        a = situ_glu(gate, up, c.activation_situ_beta, c.activation_situ_linear_beta,
                     self.mut["situ_sigmoid_of_capped_gate"])
        return a @ self.layer_tensor(il, "mlp.down_proj.weight", (E, F)).T

    # ---- docs/model.md "Latent MoE": latent MoE ----

    def route(self, il, x):
        """Top-k selection by s + bias (ties -> lowest index); weights from the unbiased s."""
        c = self.cfg
        NE, k = c.num_experts, c.num_experts_per_token
        p = "block_sparse_moe.gate."
        logits = x @ self.layer_tensor(il, p + "weight", (NE, c.hidden_size)).T       # [T][NE]
        if self.mut["router_softmax"]:
            s = np.exp(logits - logits.max(axis=-1, keepdims=True))
            s = s / s.sum(axis=-1, keepdims=True)
        else:
            s = sigmoid(logits)                                                     # independent, no softmax
        bias = self.layer_tensor(il, p + "e_score_correction_bias", (NE,))
        biased = s + bias
        # stable sort of -biased: equal scores keep ascending expert order
        chosen = np.argsort(-biased, axis=-1, kind="stable")[:, :k]                 # [T][k]
        source = biased if self.mut["router_bias_in_weights"] else s
        weights = np.take_along_axis(source, chosen, axis=-1)
        if c.moe_renormalize and k > 1:                                             # Decision 1
            weights = weights / (weights.sum(axis=-1, keepdims=True) + self.dt(1e-20))
        weights = weights * self.dt(c.routed_scaling_factor)
        return chosen, weights, s

    def latent_moe(self, il, x, trace):
        c = self.cfg
        T, E = x.shape
        L, NE = c.routed_expert_hidden_size, c.num_experts
        b1, b2 = c.activation_situ_beta, c.activation_situ_linear_beta
        chosen, weights, unbiased = self.route(il, x)
        if trace is not None:
            by_unbiased = np.argsort(-unbiased, axis=-1, kind="stable")[:, :c.num_experts_per_token]
            trace["routing"].append({
                "layer": il,
                "chosen": chosen.tolist(),
                "bias_changed_selection": int(sum(set(a) != set(b) for a, b in zip(chosen.tolist(),
                                                                                 by_unbiased.tolist()))),
            })
        # down-project into the latent width the experts run in
        z = x @ self.layer_tensor(il, "block_sparse_moe.routed_expert_down_proj.weight", (L, E)).T  # [T][L]
        w1, w2, w3 = self.experts(il)
        if self.mut["swap_w1_w3"]:
            w1, w3 = w3, w1
        # acc[t] = sum over the token's top-k of w * w2(SiTU-GLU(w1 z, w3 z))
        acc = np.zeros((T, L), dtype=self.dt)
        for e in range(NE):
            rows, slots = np.nonzero(chosen == e)
            if len(rows) == 0:
                continue
            ze = z[rows]
            y = situ_glu(ze @ w1[e].T, ze @ w3[e].T, b1, b2, self.mut["situ_sigmoid_of_capped_gate"]) @ w2[e].T
            if self.mut["expert_norm_per_expert"]:
                y = rms_norm(y, self.layer_tensor(il, "block_sparse_moe.routed_expert_norm.weight", (L,)),
                             c.rms_norm_eps)
            acc[rows] += weights[rows, slots][:, None] * y
        # RMSNorm of the weighted aggregate, then up-project back to the hidden width
        up = self.layer_tensor(il, "block_sparse_moe.routed_expert_up_proj.weight", (E, L))
        if self.mut["norm_after_up_proj"]:
            routed = rms_norm(acc @ up.T, None, c.rms_norm_eps)
        else:
            if c.latent_moe_use_norm and not self.mut["expert_norm_per_expert"]:
                acc = rms_norm(acc, self.layer_tensor(il, "block_sparse_moe.routed_expert_norm.weight", (L,)),
                               c.rms_norm_eps)
            routed = acc @ up.T
        # shared experts (one fused MLP) on the ORIGINAL full-width x, unweighted
        SI = c.moe_intermediate_size * c.num_shared_experts
        sp = "block_sparse_moe.shared_experts."
        shared = situ_glu(x @ self.layer_tensor(il, sp + "gate_proj.weight", (SI, E)).T,
                          x @ self.layer_tensor(il, sp + "up_proj.weight", (SI, E)).T, b1, b2,
                          self.mut["situ_sigmoid_of_capped_gate"])
        shared = shared @ self.layer_tensor(il, sp + "down_proj.weight", (E, SI)).T
        return routed + shared

    # ---- greedy decoding by repeated full prefill ----

    def greedy(self, prompt_ids, n_gen):
        """Appends n_gen argmax tokens (ties -> lowest index), re-running the whole sequence each step."""
        ids = list(prompt_ids)
        for _ in range(n_gen):
            ids.append(int(np.argmax(self.forward(ids)[-1])))
        return ids


def write_trace(path, steps):
    """steps [(name, [T][W] array)] -> PATH (float32 LE, concatenated) + PATH.json (the index)."""
    index = []
    with open(path, "wb") as out:
        for name, value in steps:
            value = np.asarray(value, dtype="<f4")
            index.append({"name": name, "shape": list(value.shape)})
            out.write(value.tobytes())
    with open(path + ".json", "w") as out:
        json.dump({"steps": index}, out, indent=1)


def main(argv):
    ap = argparse.ArgumentParser(description="Independent numpy reference of the Kimi K3 forward pass.")
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--gen", type=int, default=0, help="greedy tokens to generate (full prefill per step)")
    ap.add_argument("--dump-logits", help="write the prompt's logits, float32 LE [positions][vocab]")
    ap.add_argument("--dump-hidden", help="write every decoder layer's output (the residual), float32 LE "
                    "[layers][positions][hidden]")
    ap.add_argument("--dump-trace", help="write the named intermediates (engine/model/trace.h), float32 LE, "
                    "one after another, and PATH.json listing each step's name and [positions, hidden]")
    ap.add_argument("--float64", action="store_true", help="compute in float64 (self-check of rounding)")
    ap.add_argument("--mutate", action="append", default=[], choices=sorted(MUTATIONS),
                    help="inject a deliberate mistake (repeatable)")
    args = ap.parse_args(argv)
    model = K3Reference(args.model_dir, {m: True for m in args.mutate}, np.float64 if args.float64 else np.float32)
    prompt = [int(t) for t in args.ids.split(",") if t.strip()]
    trace = {}
    logits = model.forward(prompt, trace)
    if args.dump_logits:
        logits.astype("<f4").tofile(args.dump_logits)
    if args.dump_hidden:
        np.stack(trace["hidden"]).astype("<f4").tofile(args.dump_hidden)
    if args.dump_trace:
        write_trace(args.dump_trace, trace["steps"])
    print("layer kinds:", " ".join(trace["layer_kind"]))
    print("residual RMS per layer:", " ".join(f"{r:.3g}" for r in trace["layer_rms"]))
    print("argmax per position:", ",".join(str(int(i)) for i in np.argmax(logits, axis=-1)))
    if args.gen:
        print("greedy ids:", ",".join(str(i) for i in model.greedy(prompt, args.gen)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
