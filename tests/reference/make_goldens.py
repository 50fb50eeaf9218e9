#!/usr/bin/python3
"""Writes the golden fixtures the C++ forward pass is gated on.

For each preset (default: tiny and tiny-wide) it
  1. runs `k3serve make-model DIR --preset P --seed S` into a temporary directory,
  2. records the sha256 of every file of the generated checkpoint (so a test can prove the
     generator still writes the checkpoint these goldens were computed from),
  3. picks fixed prompt ids (PROMPT_LEN distinct ids below vocab_size - 256, i.e. no special
     slot), and generates N_GEN greedy tokens with the reference by repeated full prefill
     (argmax, ties to the lowest index),
  4. evaluates the whole sequence (prompt + generated) once and writes
       tests/fixtures/golden/<preset>.json        facts below
       tests/fixtures/golden/<preset>.logits.f32  float32 little-endian, row-major
                                                  [positions][vocab], positions = EVERY position
                                                  of the whole sequence (prompt + generated)
     Row t holds the logits that predict token t+1 from tokens 0..t.

<preset>.json fields: preset, seed, make_model_args, files {relative path: sha256},
vocab_size, prompt_ids, n_prompt, n_generated, greedy_ids (the full sequence: prompt then
generated), argmax (per position of the full sequence; argmax[t] == greedy_ids[t+1] for every
generated token), logits_file, logits_shape [positions, vocab], logits_dtype, min_top2_margin
(the smallest gap between the best and second-best logit over all positions, as a fraction of
that position's logit RMS), reference_dtype, fp32_reference_rel_l2 (how far the same reference
run in float32 lands from the golden: the fixture's sensitivity to rounding), and
`mechanisms` (facts showing every part of the model is engaged; see fixture_facts.py).

Usage: make_goldens.py [--bin PATH/TO/k3serve] [--preset tiny --preset tiny-wide] [--seed 7]
                       [--out tests/fixtures/golden]
The binary defaults to $K3SERVE_BIN, then build/k3serve of this source tree.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixture_facts import fixture_facts  # noqa: E402
from k3_reference import K3Reference  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(SOURCE_DIR, "tests", "fixtures", "golden")
DEFAULT_PRESETS = ["tiny", "tiny-wide"]
DEFAULT_SEED = 7
PROMPT_LEN = 12
N_GEN = 20
# A golden argmax is only a fair gate when the best logit clearly beats the runner-up: an fp32
# engine within its rel-L2 gate (at most 1e-4) must not be able to flip it. Prompts are drawn
# (deterministically) until every position has a gap of at least this fraction of the
# position's logit RMS.
MIN_TOP2_MARGIN = 5e-3
SPECIAL_SLOTS = 256


def default_binary():
    return os.environ.get("K3SERVE_BIN") or os.path.join(SOURCE_DIR, "build", "k3serve")


def make_model(binary, out_dir, preset, seed):
    """Runs the generator; returns the argument list it was given (recorded in the fixture)."""
    args = ["make-model", out_dir, "--preset", preset, "--seed", str(seed)]
    result = subprocess.run([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(args)} failed with exit {result.returncode}:\n{result.stderr}")
    return args


def file_hashes(model_dir):
    """{relative path: sha256 hex} for every file under model_dir."""
    hashes = {}
    for root, _, files in os.walk(model_dir):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                hashes[os.path.relpath(path, model_dir)] = hashlib.sha256(f.read()).hexdigest()
    return dict(sorted(hashes.items()))


def candidate_prompt(vocab_size, attempt):
    """The attempt-th fixed prompt: PROMPT_LEN distinct non-special ids."""
    ordinary = vocab_size - SPECIAL_SLOTS if vocab_size > 2 * SPECIAL_SLOTS else vocab_size
    rng = np.random.default_rng(1000 + attempt)
    return [int(i) for i in rng.choice(ordinary, size=PROMPT_LEN, replace=False)]


def top2_margins(logits):
    """Per position: (best - second best logit) / RMS of the position's logits."""
    top2 = np.sort(logits, axis=-1)[:, -2:]
    return (top2[:, 1] - top2[:, 0]) / np.sqrt(np.mean(logits.astype(np.float64) ** 2, axis=-1))


def golden_for(model, vocab_size):
    """Greedy sequence and its full-sequence logits for the first prompt with clear argmaxes."""
    for attempt in range(20):
        prompt = candidate_prompt(vocab_size, attempt)
        ids = model.greedy(prompt, N_GEN)
        logits = model.forward(ids)
        argmax = np.argmax(logits, axis=-1)
        consistent = all(int(argmax[t - 1]) == ids[t] for t in range(PROMPT_LEN, len(ids)))
        if consistent and top2_margins(logits).min() >= MIN_TOP2_MARGIN:
            return prompt, ids, logits
        print(f"  prompt attempt {attempt}: argmax too close to a tie, trying the next prompt")
    raise RuntimeError("no prompt with clear argmaxes at every position in 20 attempts")


def write_json(path, obj):
    """One top-level key per line (nested dicts one entry per line), lists kept on one line."""
    lines = []
    for key, value in obj.items():
        if isinstance(value, dict):
            inner = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
            lines.append(f" {json.dumps(key)}: {{\n{inner}\n }}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


def fp32_rounding_rel_l2(model_dir, ids, golden_logits):
    """rel-L2 between the float32 reference and the float64 golden: how much plain fp32 rounding
    moves this fixture's logits (test_reference.py asserts it stays below 1e-5)."""
    fp32 = K3Reference(model_dir, dtype=np.float32).forward(ids)
    return float(np.linalg.norm(fp32 - golden_logits) / np.linalg.norm(golden_logits))


def write_golden(out_dir, preset, seed, make_args, model_dir):
    # Goldens are evaluated in float64 (the same code as the fp32 reference, without its
    # rounding): an fp32 engine is then compared against the exact value, not against another
    # fp32 rounding of it.
    model = K3Reference(model_dir, dtype=np.float64)
    vocab = model.cfg.vocab_size
    prompt, ids, logits = golden_for(model, vocab)
    logits_name = f"{preset}.logits.f32"
    logits.astype("<f4").tofile(os.path.join(out_dir, logits_name))
    facts = fixture_facts(model, model_dir, ids)
    golden = {
        "preset": preset,
        "seed": seed,
        "make_model_args": make_args[2:],  # without the output directory
        "files": file_hashes(model_dir),
        "vocab_size": vocab,
        "prompt_ids": prompt,
        "n_prompt": len(prompt),
        "n_generated": len(ids) - len(prompt),
        "greedy_ids": ids,
        "argmax": [int(i) for i in np.argmax(logits, axis=-1)],
        "logits_file": logits_name,
        "logits_shape": list(logits.shape),
        "logits_dtype": "float32 little-endian, row-major [positions][vocab]; positions = the whole greedy_ids sequence",
        "min_top2_margin": float(top2_margins(logits).min()),
        "reference_dtype": "float64 (stored as float32)",
        "fp32_reference_rel_l2": fp32_rounding_rel_l2(model_dir, ids, logits),
        "mechanisms": facts,
    }
    write_json(os.path.join(out_dir, f"{preset}.json"), golden)
    print(f"{preset}: {len(ids)} positions x {vocab} logits, greedy {ids[len(prompt):]}, "
          f"min top-2 margin {golden['min_top2_margin']:.4g} of the logit RMS, "
          f"fp32 reference within rel-L2 {golden['fp32_reference_rel_l2']:.3g}")
    print(f"  layer RMS: {' '.join(f'{r:.3g}' for r in facts['layer_rms'])}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=default_binary(), help="the k3serve binary (default $K3SERVE_BIN or build/k3serve)")
    ap.add_argument("--preset", action="append", help="preset to generate (repeatable; default tiny and tiny-wide)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--from-dir", help="use this existing checkpoint instead of running make-model "
                    "(one --preset names it; the fixture then records no seed)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.from_dir:
        if not args.preset or len(args.preset) != 1:
            ap.error("--from-dir needs exactly one --preset NAME for the fixture files")
        write_golden(args.out, args.preset[0], None, ["make-model", args.from_dir], args.from_dir)
        return 0
    for preset in args.preset or DEFAULT_PRESETS:
        with tempfile.TemporaryDirectory(prefix=f"k3golden-{preset}-") as tmp:
            model_dir = os.path.join(tmp, preset)
            make_args = make_model(args.bin, model_dir, preset, args.seed)
            write_golden(args.out, preset, args.seed, make_args, model_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
