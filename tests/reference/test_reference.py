#!/usr/bin/python3
"""Tests of the numpy reference and of the golden fixtures it wrote.

  TestPrimitives   the reference's building blocks against the definition's loop-level text
  TestGoldens      for each committed fixture (tests/fixtures/golden/<preset>.json):
    (a) `k3serve make-model` with the recorded preset and seed regenerates the recorded files;
    (b) the reference reproduces the committed golden logits, argmaxes and greedy ids;
    (c) teeth: each deliberate mistake (and more classic silent failures,
        k3_reference.MUTATIONS) changes an argmax or moves the logits to
        rel-L2 >= 1e-2 (100x the C++ gate) on at least one fixture;
    (d) the fixtures engage every mechanism;
    (e) activations neither vanish nor explode through the layers.

Run: K3SERVE_BIN=build/k3serve /usr/bin/python3 -m unittest -v tests/reference/test_reference.py
(ctest runs it as `reference_model`). K3_TEST_TMP names a scratch directory (default: a temp dir).
"""

import json
import os
import re
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_reference as k3  # noqa: E402
from fixture_facts import fixture_facts  # noqa: E402
from make_goldens import default_binary, file_hashes, make_model, top2_margins  # noqa: E402

SOURCE_DIR = os.environ.get("K3_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
GOLDEN_DIR = os.path.join(SOURCE_DIR, "tests", "fixtures", "golden")
GOLDEN_PRESETS = ["tiny", "tiny-wide"]
# The C++ gates against these goldens (tests/model/golden_tolerance.h) are 1.3x the engine's
# measured worst (2.05e-5 tiny, 2.3e-6 tiny-wide), which pins the engine's own reduction order.
# The reference's bounds are its own: how far float32 rounding alone may move it (measured
# 5.5e-6 tiny, 2.4e-6 tiny-wide), and how far a deliberate mistake must move it at least.
FP32_ROUNDING_REL_L2 = 1e-5
TEETH_REL_L2 = 1e-2
REGEN_HINT = "the generator no longer writes the checkpoint the goldens were computed from: rerun " \
             "`/usr/bin/python3 tests/reference/make_goldens.py --bin build/k3serve` and commit tests/fixtures/golden"


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


# ---------------------------------------------------------------------------------------------
# Fixtures: the committed goldens and their regenerated checkpoints (built once per run)
# ---------------------------------------------------------------------------------------------

_scratch = None
_fixtures = {}


def scratch_dir():
    global _scratch
    if _scratch is None:
        base = os.environ.get("K3_TEST_TMP")
        if base:
            _scratch = os.path.join(base, "reference")
            shutil.rmtree(_scratch, ignore_errors=True)
            os.makedirs(_scratch)
        else:
            _scratch = tempfile.mkdtemp(prefix="k3reference-")
    return _scratch


class Fixture:
    """One golden: its json, logits, and the checkpoint regenerated from its preset and seed."""

    def __init__(self, preset):
        self.preset = preset
        with open(os.path.join(GOLDEN_DIR, f"{preset}.json")) as f:
            self.golden = json.load(f)
        g = self.golden
        self.logits = np.fromfile(os.path.join(GOLDEN_DIR, g["logits_file"]), dtype="<f4").reshape(g["logits_shape"])
        self.ids = g["greedy_ids"]
        binary = default_binary()
        if not os.path.exists(binary):
            raise AssertionError(f"no k3serve binary at {binary}: set K3SERVE_BIN or build the k3serve target")
        self.model_dir = os.path.join(scratch_dir(), preset)
        make_model(binary, self.model_dir, preset, g["seed"])
        self.hashes = file_hashes(self.model_dir)
        self._models = {}

    def model(self, dtype=np.float64, mutation=None):
        key = (np.dtype(dtype).name, mutation)
        if key not in self._models:
            self._models[key] = k3.K3Reference(self.model_dir, {mutation: True} if mutation else None, dtype)
        return self._models[key]


def fixture(preset):
    """The fixture, built once; a failure to build it is remembered and re-raised, not retried."""
    if preset not in _fixtures:
        try:
            _fixtures[preset] = Fixture(preset)
        except Exception as e:  # noqa: BLE001 (re-raised by every test that needs it)
            _fixtures[preset] = e
    if isinstance(_fixtures[preset], Exception):
        raise _fixtures[preset]
    return _fixtures[preset]


def tearDownModule():
    if _scratch and not os.environ.get("K3_TEST_TMP"):
        shutil.rmtree(_scratch, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Primitives against the loop-level definitions (docs/model.md "The model's definition")
# ---------------------------------------------------------------------------------------------

class TestPrimitives(unittest.TestCase):
    def test_mxfp4_decodes_low_nibble_first_and_scale_255_to_zero(self):
        # byte 0x21: low nibble 1 (+0.5) is element 0, high nibble 2 (+1.0) is element 1;
        # byte 0xF9: low 9 (-0.5), high 15 (-6). Scale 128 doubles, 255 zeroes the group.
        packed = np.array([[0x21, 0xF9] + [0] * 14, [0x21, 0xF9] + [0] * 14, [0x21] * 16], dtype=np.uint8)
        scales = np.array([[127], [128], [255]], dtype=np.uint8)
        w = k3.dequantize_mxfp4(packed, scales)
        np.testing.assert_array_equal(w[0, :4], [0.5, 1.0, -0.5, -6.0])
        np.testing.assert_array_equal(w[1, :4], [1.0, 2.0, -1.0, -12.0])
        np.testing.assert_array_equal(w[2], np.zeros(32))
        np.testing.assert_array_equal(k3.dequantize_mxfp4(packed, scales, swap_nibbles=True)[0, :4],
                                      [1.0, 0.5, -6.0, -0.5])
        # smallest and largest scales stay exact
        self.assertEqual(k3.dequantize_mxfp4(np.array([[0x02] + [0] * 15], np.uint8), np.array([[0]], np.uint8))[0, 0],
                         2.0 ** -127)

    def test_norms_follow_the_decisions(self):
        x = np.array([3.0, 4.0], dtype=np.float64)
        np.testing.assert_allclose(k3.l2_norm(x), x / np.sqrt(25 + 1e-6))          # eps inside the sqrt, sum
        np.testing.assert_allclose(k3.rms_norm(x, np.array([2.0, 1.0]), 1e-5), np.array([6.0, 4.0]) / np.sqrt(12.5 + 1e-5))

    def test_situ_glu_caps_and_uses_uncapped_sigmoid(self):
        g, u = np.array([10.0, -3.0]), np.array([100.0, 2.0])
        expect = 4 * np.tanh(g / 4) / (1 + np.exp(-g)) * 25 * np.tanh(u / 25)
        np.testing.assert_allclose(k3.situ_glu(g, u, 4.0, 25.0), expect)

    def test_short_conv_matches_the_history_form(self):
        # docs/model.md "Kimi Delta Attention": acc = w[K-1]*cur + sum_j w[j]*hist[j] (hist oldest first, raw inputs)
        rng = np.random.default_rng(0)
        T, P, K = 7, 5, 4
        x, taps = rng.normal(size=(T, P)), rng.normal(size=(P, K))
        model = k3.K3Reference.__new__(k3.K3Reference)
        model.mut = {m: False for m in k3.MUTATIONS}
        got = model.short_conv(x, taps)
        hist = np.zeros((P, K - 1))
        for t in range(T):
            acc = taps[:, K - 1] * x[t] + (taps[:, :K - 1] * hist).sum(axis=1)
            hist = np.concatenate([hist[:, 1:], x[t][:, None]], axis=1)
            np.testing.assert_allclose(got[t], acc / (1 + np.exp(-acc)), rtol=1e-12)

    def test_delta_rule_matches_the_scalar_loops(self):
        rng = np.random.default_rng(1)
        T, H, D = 5, 2, 4
        q, k, v = (rng.normal(size=(T, H, D)) for _ in range(3))
        beta, alpha = rng.uniform(size=(T, H)), rng.uniform(0.1, 1, size=(T, H, D))
        got = k3.delta_rule(q, k, v, beta, alpha)
        for h in range(H):
            S = [[0.0] * D for _ in range(D)]
            for t in range(T):
                qs = [q[t, h, i] / np.sqrt(D) for i in range(D)]
                for i in range(D):
                    for j in range(D):
                        S[i][j] *= alpha[t, h, i]
                u = [sum(k[t, h, i] * S[i][j] for i in range(D)) for j in range(D)]
                for i in range(D):
                    for j in range(D):
                        S[i][j] += k[t, h, i] * beta[t, h] * (v[t, h, j] - u[j])
                o = [sum(qs[i] * S[i][j] for i in range(D)) for j in range(D)]
                np.testing.assert_allclose(got[t, h], o, rtol=1e-12)

    def test_config_reads_nested_and_flat_forms_alike(self):
        text = dict(hidden_size=8, num_hidden_layers=3, vocab_size=16, rms_norm_eps=1e-5, intermediate_size=4,
                    first_k_dense_replace=1, attn_res_block_size=2, num_attention_heads=2, q_lora_rank=4,
                    kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2, num_experts=4,
                    num_experts_per_token=2, num_shared_experts=1, routed_expert_hidden_size=32,
                    moe_intermediate_size=32, routed_scaling_factor=1.0, activation_situ_beta=4.0,
                    activation_situ_linear_beta=25.0, head_dim=99)  # a stray head_dim must not shadow KDA's
        linear = dict(num_heads=2, head_dim=4, short_conv_kernel_size=3, gate_lower_bound=-5.0, full_attn_layers=[3])
        a = k3.K3Config({"text_config": dict(text, linear_attn_config=linear)})
        flat = {k: v for k, v in text.items() if k not in ("head_dim", "activation_situ_beta", "activation_situ_linear_beta")}
        flat.update(kda_num_heads=2, kda_head_dim=4, short_conv_kernel_size=3, gate_lower_bound=-5.0,
                    full_attn_layers=[3], situ_beta=4.0, situ_linear_beta=25.0)
        b = k3.K3Config(flat)
        self.assertEqual(vars(a), vars(b))
        self.assertEqual(a.kda_head_dim, 4)
        self.assertEqual(a.mla_layers(), {2})
        self.assertEqual(a.mla_layers(zero_based_mistake=True), set())
        with self.assertRaisesRegex(k3.ConfigError, "missing required keys: vocab_size, q_lora_rank"):
            k3.K3Config({k: v for k, v in flat.items() if k not in ("vocab_size", "q_lora_rank")})
        with self.assertRaisesRegex(k3.ConfigError, "outside 1..3"):
            k3.K3Config(dict(flat, full_attn_layers=[0]))

    def test_safetensors_widens_bf16_exactly_and_checks_the_index(self):
        from safetensors_np import CheckpointError, load_checkpoint
        with tempfile.TemporaryDirectory() as d:
            bf16 = np.array([0x3F80, 0xC0A0, 0x0001, 0x7F7F], dtype="<u2")  # 1.0, -5.0, tiny subnormal, max
            u8 = np.arange(6, dtype=np.uint8)
            header = {"a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
                      "b": {"dtype": "U8", "shape": [6], "data_offsets": [8, 14]}}
            raw = json.dumps(header).encode()
            with open(os.path.join(d, "m.safetensors"), "wb") as f:
                f.write(len(raw).to_bytes(8, "little") + raw + bf16.tobytes() + u8.tobytes())
            arrays, dtypes = load_checkpoint(d)
            expect = (bf16.astype(np.uint32) << 16).view(np.float32).reshape(2, 2)
            np.testing.assert_array_equal(arrays["a"], expect)
            self.assertEqual(arrays["a"][0, 1], -5.0)
            np.testing.assert_array_equal(arrays["b"], u8)
            self.assertEqual(dtypes, {"a": "BF16", "b": "U8"})
            with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
                json.dump({"weight_map": {"a": "m.safetensors", "b": "other.safetensors"}}, f)
            with self.assertRaisesRegex(CheckpointError, "puts b in other.safetensors"):
                load_checkpoint(d)

    def router(self, logits, bias, top_k, mutations=None):
        """route() of a one-layer model whose gate maps the identity input to `logits`."""
        n = len(logits)
        model = k3.K3Reference.__new__(k3.K3Reference)
        model.cfg = type("Cfg", (), dict(num_experts=n, num_experts_per_token=top_k, hidden_size=n,
                                         moe_renormalize=True, routed_scaling_factor=2.0))()
        model.dt, model.mut = np.float64, {m: bool((mutations or {}).get(m)) for m in k3.MUTATIONS}
        model.w = {k3.MODEL + "layers.1.block_sparse_moe.gate.weight": np.diag(np.array(logits, np.float64)),
                   k3.MODEL + "layers.1.block_sparse_moe.gate.e_score_correction_bias": np.array(bias, np.float64)}
        chosen, weights, _ = model.route(1, np.ones((1, n)))
        return list(chosen[0]), weights[0]

    def test_router_selects_with_bias_and_weighs_without(self):
        s = 1 / (1 + np.exp(-np.array([0.0, 0.0, 1.0, -1.0])))
        chosen, w = self.router([0.0, 0.0, 1.0, -1.0], [0.0, 0.1, -0.5, 0.0], 2)
        self.assertEqual(chosen, [1, 0])                          # biased: .6, .5, .23, .27
        np.testing.assert_allclose(w, 2.0 * s[[1, 0]] / (s[1] + s[0] + 1e-20))
        chosen, w = self.router([0.0, 0.0, 1.0, -1.0], [0.0, 0.1, -0.5, 0.0], 2, {"router_bias_in_weights": True})
        np.testing.assert_allclose(w, 2.0 * (s[[1, 0]] + [0.1, 0.0]) / (s[1] + s[0] + 0.1 + 1e-20))

    def test_router_ties_go_to_the_lowest_index_and_top1_is_not_renormalised(self):
        chosen, _ = self.router([0.5, 0.5, 0.5, 0.5], [0.0] * 4, 3)
        self.assertEqual(chosen, [0, 1, 2])
        chosen, w = self.router([0.0, 2.0, 0.0, 0.0], [0.0] * 4, 1)
        self.assertEqual(chosen, [1])
        np.testing.assert_allclose(w, [2.0 / (1 + np.exp(-2.0))])  # sigmoid * scale, no renormalisation

    def test_nope_attention_matches_the_per_position_loop(self):
        rng = np.random.default_rng(2)
        T, H, nope, rope, vd = 4, 2, 3, 2, 3
        qn, qr, kn, v = rng.normal(size=(T, H, nope)), rng.normal(size=(T, H, rope)), \
            rng.normal(size=(T, H, nope)), rng.normal(size=(T, H, vd))
        kr = rng.normal(size=(T, rope))
        scale = 1 / np.sqrt(nope + rope)
        got = k3.nope_attention(qn, qr, kn, kr, v, scale)
        for h in range(H):
            for t in range(T):
                s = np.array([(qn[t, h] @ kn[j, h] + qr[t, h] @ kr[j]) * scale for j in range(t + 1)])
                p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                np.testing.assert_allclose(got[t, h], sum(p[j] * v[j, h] for j in range(t + 1)), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# Golden fixtures
# ---------------------------------------------------------------------------------------------

class TestGoldens(unittest.TestCase):
    def each_fixture(self):
        for preset in GOLDEN_PRESETS:
            yield preset, fixture(preset)

    def test_a_generator_reproduces_the_recorded_checkpoint(self):
        for preset, fx in self.each_fixture():
            with self.subTest(preset=preset):
                self.assertEqual(sorted(fx.hashes), sorted(fx.golden["files"]), f"{preset}: file list differs; {REGEN_HINT}")
                for name, digest in fx.golden["files"].items():
                    self.assertEqual(fx.hashes[name], digest, f"{preset}: {name} differs; {REGEN_HINT}")

    def test_b_reference_reproduces_the_goldens(self):
        for preset, fx in self.each_fixture():
            with self.subTest(preset=preset):
                g = fx.golden
                self.assertEqual(fx.logits.shape, (len(fx.ids), g["vocab_size"]))
                logits = fx.model().forward(fx.ids)
                self.assertLess(rel_l2(logits, fx.logits), 1e-6, f"{preset}: float64 reference vs golden")
                self.assertEqual(list(np.argmax(logits, axis=-1)), g["argmax"])
                # greedy by repeated full prefill regenerates the recorded continuation
                self.assertEqual(fx.model().greedy(g["prompt_ids"], g["n_generated"]), fx.ids)
                # teacher forcing agrees with greedy: row t predicts token t+1
                for t in range(g["n_prompt"], len(fx.ids)):
                    self.assertEqual(g["argmax"][t - 1], fx.ids[t])
                # float32 rounding of the same graph stays this close to the float64 golden
                fp32 = rel_l2(fx.model(np.float32).forward(fx.ids), fx.logits)
                print(f"\n  {preset}: fp32 reference vs golden rel-L2 {fp32:.2e}, "
                      f"min top-2 margin {top2_margins(fx.logits).min():.3g} of the logit RMS")
                self.assertLess(fp32, FP32_ROUNDING_REL_L2)
                self.assertGreater(top2_margins(fx.logits).min(), 1e-3)

    def test_b_logits_are_causal(self):
        # a prefix's logits do not depend on later tokens (conv, recurrence and mask are causal)
        for preset, fx in self.each_fixture():
            with self.subTest(preset=preset):
                n = fx.golden["n_prompt"]
                prefix = fx.model().forward(fx.ids[:n])
                self.assertLess(rel_l2(prefix, fx.logits[:n]), 1e-6)

    def test_c_every_mutation_has_teeth(self):
        print("\n  " + "mutation".ljust(30) + "".join(f"{p:>32s}" for p in GOLDEN_PRESETS))
        for mutation in k3.MUTATIONS:
            with self.subTest(mutation=mutation):
                caught, cells = False, []
                for preset, fx in self.each_fixture():
                    try:
                        logits = fx.model(np.float32, mutation).forward(fx.ids)
                    except k3.MissingTensor as e:
                        # the mistaken layer map asks for tensors of the wrong attention kind:
                        # a checkpoint-bound model refuses to load, which is caught too
                        where = re.search(r"layers\.(\d+)\.self_attn\.([a-z_]+)", str(e))
                        cells.append(f"refused: no layers.{where[1]} {where[2]}" if where else "refused")
                        caught = True
                        continue
                    r = rel_l2(logits, fx.logits)
                    flips = int((np.argmax(logits, axis=-1) != np.array(fx.golden["argmax"])).sum())
                    cells.append(f"rel-L2 {r:8.2e}, argmax {flips:2d}/{len(fx.ids)}")
                    caught = caught or r >= TEETH_REL_L2 or flips > 0
                print(f"  {mutation:30s}" + "".join(f"{c:>32s}" for c in cells))
                self.assertTrue(caught, f"{mutation} ({k3.MUTATIONS[mutation]}) is not caught by any golden")

    def test_c_layer_map_fixture_distinguishes_one_and_zero_based(self):
        for preset, fx in self.each_fixture():
            with self.subTest(preset=preset):
                cfg = fx.model().cfg
                self.assertNotEqual(cfg.mla_layers(), cfg.mla_layers(zero_based_mistake=True))

    def test_d_fixtures_engage_every_mechanism(self):
        for preset, fx in self.each_fixture():
            with self.subTest(preset=preset):
                m = fixture_facts(fx.model(), fx.model_dir, fx.ids)
                self.assertEqual(m, fx.golden["mechanisms"] | {"layer_rms": m["layer_rms"], "final_rms": m["final_rms"],
                                                              "embed_rms": m["embed_rms"]})
                self.assertGreaterEqual(m["n_mla_layers"], 2)
                self.assertGreaterEqual(m["n_kda_layers"], 2)
                self.assertIn("MLA", m["layer_kinds"][:-1], "an MLA layer before the last one")
                self.assertGreaterEqual(m["attn_res_completed_blocks"], 2, "two complete attention-residual blocks")
                self.assertGreater(fx.model().cfg.num_hidden_layers % m["attn_res_block_size"], 0,
                                   "a block still in progress at the model-level mix")
                self.assertGreaterEqual(m["n_shards"], 2)
                self.assertGreater(m["router_bias_changed_selection_total"], 0, "router bias reorders selection")
                self.assertGreater(sum(1 for v in m["router_bias_changed_selection"].values() if v), 1)
                self.assertEqual(m["experts_used"], m["num_experts"], "every expert is chosen somewhere")
                self.assertGreater(m["num_experts_per_token"], 1, "top-k > 1 so renormalisation is exercised")
                self.assertGreaterEqual(m["mxfp4"]["scale_max"] - m["mxfp4"]["scale_min"], 3, "MXFP4 scales span a range")
                self.assertEqual(m["mxfp4"]["all_zero_groups"], 0)
        self.assertGreaterEqual(max(fixture(p).golden["mechanisms"]["n_dense_layers"] for p in GOLDEN_PRESETS), 2,
                                "one fixture has two dense layers")

    def test_e_activations_neither_vanish_nor_explode(self):
        for preset, fx in self.each_fixture():
            with self.subTest(preset=preset):
                m = fixture_facts(fx.model(), fx.model_dir, fx.ids)
                rms = m["layer_rms"] + [m["final_rms"]]
                print(f"\n  {preset} residual RMS: embed {m['embed_rms']:.3g} | layers "
                      + " ".join(f"{r:.3g}" for r in m["layer_rms"]) + f" | model-level mix {m['final_rms']:.3g}")
                self.assertGreater(min(rms), 1e-2 * m["embed_rms"])
                self.assertLess(max(rms), 1e2 * m["embed_rms"])
                logits = fx.logits.astype(np.float64)
                self.assertTrue(np.isfinite(logits).all())
                self.assertGreater(np.std(logits), 1e-3)


if __name__ == "__main__":
    unittest.main()
