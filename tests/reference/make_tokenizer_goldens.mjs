// Golden token ids for the tokenizer parity suite, from the reference implementation: the npm
// package `tiktoken` (a WASM build of OpenAI's Rust tiktoken core), with
//   (a) the Kimi K3 split pattern (docs/model.md "Pre-tokenizer", verbatim, in the Rust regex syntax the reference
//       compiles) over the o200k_base ranks, and the Kimi special-token names mapped to ids
//       after those ranks;
//   (b) the cl100k_base pattern, ranks and special tokens.
// Reads tests/fixtures/tokenizer/corpus.jsonl and special_cases.jsonl (hand-written), writes
// golden_kimi_o200k.jsonl, golden_cl100k.jsonl (one JSON id array per corpus line),
// golden_specials.jsonl ({allowed, plain} per special case) and kimi_o200k_specials.json.
//   (cd tests/node && npm install) && node tests/reference/make_tokenizer_goldens.mjs [--check]
// --check writes nothing and fails if the committed goldens differ from what tiktoken gives now
// (registered with ctest as tokenizer_goldens_current).
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { KIMI_PATTERN } from "./kimi_pattern.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "node", "package.json"));
const { Tiktoken } = require("tiktoken/lite");
const o200k = require("tiktoken/encoders/o200k_base.json");
const cl100k = require("tiktoken/encoders/cl100k_base.json");
const fixtures = join(root, "fixtures", "tokenizer");


// Kimi's named special tokens (docs/model.md "Tokenizer files"), placed after o200k_base's ranks with the same
// offsets they have after Kimi's 163584 ranks.
const kimiNamed = {
  0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
  6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]", 18: "<|media_begin|>",
  19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>", 65: "<osagent_mode>",
  254: "[UNK]", 255: "[PAD]",
};
const nRanks = o200k.bpe_ranks.split(" ").length - 2;
const kimiSpecials = {};
for (const [offset, name] of Object.entries(kimiNamed)) kimiSpecials[name] = nRanks + Number(offset);

const readJsonl = (name) => readFileSync(join(fixtures, name), "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
const check = process.argv.includes("--check");
let stale = 0;
const writeText = (name, text) => {
  if (!check) return writeFileSync(join(fixtures, name), text);
  if (readFileSync(join(fixtures, name), "utf8") !== text) {
    console.error(`${name} differs from what tiktoken gives: regenerate with make_tokenizer_goldens.mjs`);
    ++stale;
  }
};
const writeJsonl = (name, rows) => writeText(name, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");

const kimi = new Tiktoken(o200k.bpe_ranks, kimiSpecials, KIMI_PATTERN);
const cl = new Tiktoken(cl100k.bpe_ranks, cl100k.special_tokens, cl100k.pat_str);
const corpus = readJsonl("corpus.jsonl");
writeJsonl("golden_kimi_o200k.jsonl", corpus.map((text) => Array.from(kimi.encode_ordinary(text))));
writeJsonl("golden_cl100k.jsonl", corpus.map((text) => Array.from(cl.encode_ordinary(text))));
const specialCases = readJsonl("special_cases.jsonl");
writeJsonl("golden_specials.jsonl", specialCases.map((text) => ({
  allowed: Array.from(kimi.encode(text, "all")),
  plain: Array.from(kimi.encode_ordinary(text)),
})));
writeText("kimi_o200k_specials.json", JSON.stringify({ n_ranks: nRanks, specials: kimiSpecials }, null, 1) + "\n");
console.log(`goldens: ${corpus.length} corpus cases x 2 encodings, ${specialCases.length} special cases (o200k ranks: ${nRanks})` + (check ? (stale ? `: ${stale} files STALE` : ": all current") : ""));
kimi.free();
cl.free();
process.exit(stale ? 1 : 0);
