// Writes tests/fixtures/tokenizer/corpus.jsonl: the tokenizer parity corpus, one JSON string per
// line (so cases may contain CR, LF and any other character). Deterministic: a fixed-seed PRNG
// mixes hand-written fragments of every script and shape the tokenizer must get right.
//   node tests/reference/make_tokenizer_corpus.mjs
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const out = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "tokenizer", "corpus.jsonl");

// mulberry32: small, seedable, good enough to pick fragments.
let seed = 0x6b337365;
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const english = [
  "The capital of France is Paris.",
  "The quick brown fox jumps over the lazy dog.",
  "I can't believe it's already November; we'll see what they've planned.",
  "She said: \"Don't touch that!\" and he didn't.",
  "HE'S GONE, ISN'T HE? WE'LL NEVER KNOW WHAT THEY'D DONE.",
  "You'Re sure it'S fine? I'M not, and THEY'VE been told.",
  "y'all shouldn't've done that, o'clock rock'n'roll",
  "Mr. O'Neill's dog barked at 3:45 p.m. on Jan. 5th.",
  "e-mail, well-known, state-of-the-art, self-driving cars",
  "Inference on CPUs is bandwidth bound, not compute bound.",
  "Mixture-of-experts models route each token to a few experts.",
  "A sentence with    several   spaces and a trailing space ",
  "   Leading spaces before words",
  "ALL CAPS HEADLINE ABOUT SOMETHING IMPORTANT",
  "camelCaseIdentifier and PascalCaseType and snake_case_name and SCREAMING_SNAKE",
  "URLs: https://example.com/path?query=1&b=two#frag and ftp://host/x",
  "email: first.last+tag@example.co.uk, @handle #hashtag",
  "Punctuation!!! Really??? Yes... (maybe) [probably] {surely} <never>",
  "It's 100% true -- no, it's 99.9% -- well... ~50%?",
  "Ünïcödé wörds: naïve café résumé coöperate façade jalapeño",
  "Straße, größer, Ärger; ÆØÅ æøå; Œuvre; İstanbul ıi; ǅemal",
  "Contractions with curly quotes: don’t, it’s, we’ll (not ASCII apostrophes)",
  "The long s: it'ſ and IT'ſ; the Kelvin sign K and the Angstrom Å.",
  "Roman numerals Ⅻ and ⅷ, superscripts x² y³, fractions ½ ¾, circled ① ⑳",
  "Math: ∀x∈ℝ, x² ≥ 0; ∑ᵢ aᵢ = ∫₀¹ f(t) dt ≈ 3.14159 ≠ π",
];
const code = [
  "int main(int argc, char** argv) {\n    return argc > 1 ? 0 : 1;\n}",
  "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
  "for (let i = 0; i < arr.length; ++i) { total += arr[i] * 2; }",
  "fn main() -> Result<(), Box<dyn Error>> {\n\tlet x: Vec<u8> = vec![1, 2, 3];\n\tOk(())\n}",
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC;",
  "#include <vector>\n#define K3_CHECK(c) do { if (!(c)) abort(); } while (0)",
  "$ cat /etc/hosts | grep -v '^#' | awk '{print $2}' > /tmp/out.txt 2>&1",
  "if x != None and y == 0x1F:\n\t\tprint(f\"{x!r:>10} {y:#06x}\")",
  "<div class=\"row\"><span id='a'>&nbsp;&lt;tag&gt;</span></div>",
  "    // indented comment\n    /* block */ x += y << 3; z = ~w & 0xFF;",
  "std::unique_ptr<Tokenizer> tok = Tokenizer::load(dir);",
  "a=1;b=2;c=a+b;d=c**2//3%7;e=[x for x in range(10) if x&1]",
  "git commit -m \"Fix: off-by-one in split()\" && git push origin HEAD:main",
  "@media (max-width: 600px) { .nav { display: none !important; } }",
  "λx.λy.x y  -- lambda calculus; f :: Int -> Int; map (+1) [1..10]",
];
const cjk = [
  "中文English混合", "我们今天去北京大学参观。", "人工智能正在改变世界，但也带来了新的挑战！",
  "GPT4模型在2024年发布了第3版", "第12章：数据结构与算法（上）", "價格是3000元，請在5月1日前付款。",
  "日本語のテキストです。カタカナとひらがな、そして漢字。", "東京タワーは333メートルです",
  "ラーメン食べたい〜！", "々〆〇ヶ ー・「引用」『二重』【注】",
  "한국어 문장입니다. 오늘 날씨가 좋네요!", "서울특별시 강남구 테헤란로 123", "한글과 漢字 混用 Korean",
  "Kimi K3模型有2.78T参数", "abc中def文123字", "中文，English, 日本語。한국어!",
  "𠀀𠀁𪜀 (CJK Extension B) 𫝀 and 﨑 compatibility ideograph", "⺀⺁⼀⼁ radicals 〡〢〩 Hangzhou numerals",
  "漢字ABC漢字abc漢字123漢字 漢字", "「你好」他说道：“欢迎！”",
];
const otherScripts = [
  "مرحبا بالعالم! هذه جملة عربية مع أرقام ١٢٣ و 456.", "السلام عليكم ورحمة الله وبركاته",
  "नमस्ते दुनिया! यह हिंदी वाक्य है। संख्या १२३४", "क्षत्रिय ज्ञान श्री द्वार", "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ ๑๒๓",
  "Привет, мир! Это русский текст. ЁЛКИ-ПАЛКИ", "Καλημέρα κόσμε! ΑΒΓΔ αβγδ ς",
  "שלום עולם! עברית עם ניקוד: בְּרֵאשִׁית", "Tiếng Việt có dấu: Người, được, những",
  "ሰላም ዓለም (Amharic)", "Բարեւ աշխարհ (Armenian)", "გამარჯობა (Georgian)", "தமிழ் மொழி (Tamil)",
  "বাংলা ভাষা (Bengali)", "ಕನ್ನಡ (Kannada)", "ᚠᚢᚦᚨᚱᚲ runes", "ꯃꯤꯇꯩ (Meetei)",
];
const emoji = [
  "👨‍👩‍👧‍👦 family", "👍🏽👍🏿👋🏻 skin tones", "🏳️‍🌈 🏴‍☠️ flags", "🇯🇵🇺🇸🇩🇪🇨🇳", "1️⃣ #️⃣ keycaps",
  "❤️‍🔥 ❤️ ♥ hearts", "👩🏾‍💻 🧑🏼‍🚀 🧑‍🤝‍🧑", "😀😃😄😁😆😅😂🤣", "I ❤ NY 🗽!!", "🤖: hello 👋 world 🌍",
  "✅ done ❌ failed ⚠️ warning", "🏄‍♀️🏊🏽‍♂️",
];
const marks = [
  "e\u0301 a\u0300 o\u0308 n\u0303", "Z\u0351\u036b\u0343\u036a\u0302a\u0310\u0346l\u0350g\u034co\u0336",
  "\u1100\u1161\u11a8 decomposed hangul", "\u0915\u094d\u0937 virama", "\u05e9\u05c1\u05b8 hebrew points",
  "a\u20dd circle b\u20e3 keycap", "x\u0332\u0332 underline", "\u0301 leading mark",
  "ÅÅ (precomposed vs decomposed A\u030a)", "q\u0307\u0323 stacked",
];
const zeroWidth = [
  "zero\u200bwidth\u200bspace", "non\u200cjoiner", "joiner\u200dhere", "\ufeffBOM at start",
  "word\u2060joiner", "soft\u00adhyphen", "LRM\u200e RLM\u200f marks", "\u202eright-to-left override\u202c",
  "tag\u{e0041}\u{e0042} characters", "variation\ufe0f selector\ufe0e",
];
const spaces = [
  "a  b", "a   b    c", "\t", "\t\t\tindented", "a\tb\tc", "  \t  \t", "line1\r\nline2\r\n",
  "\r\n\r\n", "\n\n\n", "x \n y", "trailing   \n", "   \n   \n", "a\u00a0b\u00a0\u00a0c", "\u3000全角空格\u3000",
  "para\u2029sep\u2028line", "nel\u0085next", "vt\u000bff\u000c", "mixed \r\n\t \r\n", "end with spaces   ",
  " ", "", "\r", "\n", " \n", "a \u2003 b \u2009 c", "a\u1680b\u205fc\u202fd",
  // Whitespace other than space before a word: decides between \s+(?!\S) and the punctuation rule.
  "a  \u0085b", "a  \u00a0b", "x   \u3000y", "tab\t\t\u0085z", "a  \u000bb", "a  \u000cb", "p  \u2028q", "p  \u2029q",
  "a  \u180eb", "a  \u200bb", "a  \u2060b", "a  \ufeffb", "\u0085\u0085 x", "  \u0085", "\u00a0\u00a0\u00a0end",
];
const numbers = () => pick([
  String(int(0, 9)), String(int(10, 999)), String(int(1000, 99999999)), String(int(1, 9)).repeat(int(4, 30)),
  `${int(0, 999)}.${int(0, 99999)}`, `${int(1, 9)}.${int(0, 999)}e-${int(1, 30)}`,
  `0x${int(0, 0xffffff).toString(16)}`, `${int(1, 999)},${String(int(0, 999)).padStart(3, "0")},${String(int(0, 999)).padStart(3, "0")}`,
  `+1 (${int(200, 999)}) ${int(200, 999)}-${int(1000, 9999)}`, `${int(1900, 2100)}-${int(1, 12)}-${int(1, 28)}`,
  `v${int(0, 9)}.${int(0, 20)}.${int(0, 99)}`, `${int(1, 100)}%`, `$${int(1, 9999)}.${int(0, 99)}`, `-${int(1, 999)}`,
  "١٢٣٤٥", "१२३४५", "๑๒๓", "①②③", "ⅠⅡⅢ", "１２３４５６", "²³¹", "𝟏𝟐𝟑",
]);
const jsonValue = (depth) => {
  const r = rand();
  if (depth > 2 || r < 0.3) return pick([int(-1000, 100000), rand() * 1000, true, false, null, pick(english).slice(0, int(1, 30)), pick(cjk), pick(emoji)]);
  if (r < 0.6) return Array.from({ length: int(0, 4) }, () => jsonValue(depth + 1));
  const o = {};
  for (let i = int(0, 4); i > 0; --i) o[pick(["id", "name", "tokens", "user_id", "créé", "名前", "isValid", "x-y", "k3"])] = jsonValue(depth + 1);
  return o;
};
const json = () => (rand() < 0.5 ? JSON.stringify(jsonValue(0)) : JSON.stringify(jsonValue(0), null, pick([2, 4, "\t"])));
const specialsAsText = ["[BOS]", "[EOS]", "<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>", "<|endoftext|>", "[start_header_id]", "<|media_pad|>", "<osagent_mode>"];
const longRun = () => pick(["a", " ", "ab", "abc ", "🙂", "中", "1", "\n", "=-", "\t", "aA", "é", "ﷺ", "'s", "x ", "\r\n", "..", "ё", "한", "ไทย", "👍🏽"]).repeat(int(30, 1500));

const families = { english, code, cjk, otherScripts, emoji, marks, zeroWidth, spaces };
const fragment = () => {
  const r = rand();
  if (r < 0.08) return numbers();
  if (r < 0.12) return json();
  if (r < 0.15) return pick(specialsAsText);
  return pick(families[pick(Object.keys(families))]);
};
const separator = () => pick([" ", " ", " ", "", "\n", "\r\n", "\t", "  ", ", ", ". ", "'", "’", "-", "/", "_", "\u200b", "\u00a0", "\u3000"]);
const casing = (s) => pick([(x) => x, (x) => x, (x) => x.toUpperCase(), (x) => x.toLowerCase()])(s);

const cases = [];
// 1. Every hand-written fragment alone, and upper/lower-cased.
for (const list of Object.values(families)) for (const s of list) cases.push(s, s.toUpperCase(), s.toLowerCase());
for (const s of specialsAsText) cases.push(s, `text ${s} text`, `${s}${s}`);
// 2. Numbers and JSON.
for (let i = 0; i < 150; ++i) cases.push(numbers());
for (let i = 0; i < 120; ++i) cases.push(json());
// 3. Contractions in every case shape.
for (const w of ["it", "we", "they", "I", "you", "he", "DON", "ISN", "Rock"]) for (const c of ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D", "'ſ", "’s", "'x"]) cases.push(`${w}${c} here`);
// 4. Long repeated runs (long pieces exercise the O(n log n) merge).
for (let i = 0; i < 60; ++i) cases.push(longRun());
// 5. Random mixtures: sentences of fragments with random separators and casing.
for (let i = 0; i < 1150; ++i) {
  let s = "";
  for (let k = int(1, 6); k > 0; --k) s += casing(fragment()) + separator();
  cases.push(s);
}
// 6. Whole multi-line documents (LF or CRLF).
for (let i = 0; i < 80; ++i) {
  const eol = rand() < 0.3 ? "\r\n" : "\n";
  const lines = [];
  for (let k = int(5, 40); k > 0; --k) lines.push(rand() < 0.15 ? "" : (rand() < 0.2 ? pick(["    ", "\t", "  "]) : "") + fragment());
  cases.push(lines.join(eol) + (rand() < 0.5 ? eol : ""));
}

writeFileSync(out, cases.map((c) => JSON.stringify(c)).join("\n") + "\n");
console.log(`wrote ${cases.length} cases to ${out}`);
