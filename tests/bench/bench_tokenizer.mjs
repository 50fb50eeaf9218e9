// npm tiktoken (WASM build of the reference) on the same corpus and passes as bench_tokenizer.cpp.
//   node tests/bench/bench_tokenizer.mjs   (after npm install in tests/node)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { KIMI_PATTERN } from "../reference/kimi_pattern.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "node", "package.json"));
const { Tiktoken } = require("tiktoken/lite");
const o200k = require("tiktoken/encoders/o200k_base.json");
const cl100k = require("tiktoken/encoders/cl100k_base.json");

const corpus = readFileSync(join(root, "fixtures", "tokenizer", "corpus.jsonl"), "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l));
const bytes = corpus.reduce((n, s) => n + Buffer.byteLength(s), 0);

const typical = corpus.filter((s) => Buffer.byteLength(s) < 1000);
const typicalBytes = typical.reduce((n, s) => n + Buffer.byteLength(s), 0);

function mbPerS(enc, rounds, cases = corpus, total = bytes) {
  let best = Infinity, tokens = 0;
  for (let r = 0; r < rounds; ++r) {
    const t0 = process.hrtime.bigint();
    tokens = 0;
    for (const text of cases) tokens += enc.encode_ordinary(text).length;
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return [total / best / 1e6, tokens];
}

const kimi = new Tiktoken(o200k.bpe_ranks, {}, KIMI_PATTERN);
const cl = new Tiktoken(cl100k.bpe_ranks, cl100k.special_tokens, cl100k.pat_str);
const [k, nk] = mbPerS(kimi, 5);
const [c, nc] = mbPerS(cl, 5);
console.log(`tiktoken kimi/o200k: ${k.toFixed(2)} MB/s (${nk} tokens)`);
console.log(`tiktoken cl100k: ${c.toFixed(2)} MB/s (${nc} tokens)`);
const [kt, nkt] = mbPerS(kimi, 5, typical, typicalBytes);
const [ct, nct] = mbPerS(cl, 5, typical, typicalBytes);
console.log(`tiktoken typical kimi/o200k: ${kt.toFixed(2)} MB/s (${nkt} tokens)`);
console.log(`tiktoken typical cl100k: ${ct.toFixed(2)} MB/s (${nct} tokens)`);
let letters = "";
while (letters.length < 1 << 20) letters += "abcdefghij";
const t0 = process.hrtime.bigint();
try {
  const n = kimi.encode_ordinary(letters).length;
  console.log(`tiktoken 1 MiB one-piece line: ${(Number(process.hrtime.bigint() - t0) / 1e9).toFixed(3)} s (${n} tokens)`);
} catch (e) {
  console.log(`tiktoken 1 MiB one-piece line: failed (${e.message})`);
}
