#!/usr/bin/env python3
"""Plants one-line bugs, one at a time, and reports which tests catch each (docs/development.md).

First the baseline: the test binaries are built, tests/node's npm packages installed if any is
missing (the node tests and the tokenizer's parity fixtures need them), and every selected case
is run once with nothing planted; a case that fails or skips then cannot count as a catch.
Then, for each mutation: replace one exact line fragment in one source file, rebuild only the
targets that could notice (the build tool recompiles that one file and relinks), run only the
cases named for it, record the cases that fail, and restore the file. The file is restored on any exit, Ctrl-C and SIGTERM included; a
SIGKILL leaves build/mutation-check.restore, which the next run (or `--restore`) puts back before
anything else. A mutation nobody catches is a hole in the suite. Needs a configured build/
(scripts/build.sh).

  python3 scripts/mutation-check.py            # every mutation, then the table
  python3 scripts/mutation-check.py sampler    # those whose name contains "sampler"
  python3 scripts/mutation-check.py --list     # names, files and selected cases
  python3 scripts/mutation-check.py --check    # each bug's line is in its file exactly once (ctest mutation_plants)
  python3 scripts/mutation-check.py --restore  # only put back a file a killed run left planted
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
RESTORE = BUILD / "mutation-check.restore"  # {"path": ..., "text": ...} while a file is planted
NODE_DIR = ROOT / "tests" / "node"
CTEST_TIMEOUT_S = 300  # a planted bug that hangs a case fails it (counted as caught) in 5 minutes

# name, file, original fragment, planted fragment, build targets, the cases that can notice
# (ctest name prefixes, "<area>: <case>" or node_<name>; each matches at least one case).
MUTATIONS = [
    # --- the gates between the network and the model (server) -----------------------------
    ("API key: only the last byte of a same-length key is compared",
     "server/routes/request_gate.cpp",
     "for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);",
     "for (size_t i = 0; i < a.size(); ++i) diff = static_cast<unsigned char>(a[i] ^ b[i]);",
     ["tests_server"], ["server: API key"]),
    ("API key: --metrics-auth no longer closes the figures",
     "server/routes/request_gate.cpp",
     "bool needs_key = !is_public && (!is_figures_path(path) || config().metrics_auth);",
     "bool needs_key = !is_public && !is_figures_path(path);",
     ["tests_server"], ["server: API key"]),
    ("Host guard: a Host that starts with an allowed name passes",
     "server/routes/request_gate.cpp",
     "[&](const std::string& h) { return iequals(h, host); });",
     "[&](const std::string& h) { return iequals(h, host.substr(0, h.size())); });",
     ["tests_server"], ["server: Host guard", "server: cross-site protection"]),
    ("Host guard: 0.0.0.0 taken for a loopback address (the guard on a LAN daemon)",
     "server/routes/request_gate.cpp",
     "return host == \"localhost\" || host == \"::1\" || host.rfind(\"127.\", 0) == 0;",
     "return host == \"localhost\" || host == \"::1\" || host.rfind(\"127.\", 0) == 0 || host == \"0.0.0.0\";",
     ["tests_server"], ["server: Host guard"]),
    ("CORS: an origin that starts with the configured one is allowed",
     "server/routes/request_gate.cpp",
     "} else if (req.header(\"Origin\") == allowed) {",
     "} else if (req.header(\"Origin\").rfind(allowed, 0) == 0) {",
     ["tests_server"], ["server: CORS"]),
    ("JSON only: any media type that starts with application/json",
     "server/routes/request_gate.cpp",
     "if (req.method == \"POST\" && !iequals(media_type(req.header(\"Content-Type\")), \"application/json\")) {",
     "if (req.method == \"POST\" && media_type(req.header(\"Content-Type\")).rfind(\"application/json\", 0) != 0) {",
     ["tests_server"], ["server: JSON bodies only", "server: cross-site protection"]),
    ("body limit: a body of exactly the limit is refused",
     "server/http/request_parser.cpp",
     "if (has_length && length > limits_.max_body)",
     "if (has_length && length >= limits_.max_body)",
     ["tests_server"], ["server: body limit", "server: an oversized body"]),
    ("JSON pre-scan: a body exactly at the depth limit is refused",
     "server/wire/json_body.cpp",
     "if (shape.depth > limits.max_depth)",
     "if (shape.depth >= limits.max_depth)",
     ["tests_server"], ["server: JSON pre-scan", "server: bad input"]),
    ("JSON pre-scan: an escaped quote ends the string",
     "server/wire/json_body.cpp",
     "else if (ch == '\\\\') escaped = true;",
     "else if (ch == '\\\\') continue;",
     ["tests_server"], ["server: JSON pre-scan", "server: a body of many small JSON values"]),
    ("API key: X-Api-Key read only when no Authorization header is sent",
     "server/routes/request_gate.cpp",
     "if (key.empty()) key = req.header(\"X-Api-Key\");",
     "if (!req.has_header(\"Authorization\")) key = req.header(\"X-Api-Key\");",
     ["tests_server"], ["server: API key", "server: Messages API over loopback"]),
    # --- the Messages API and the tolerance policy (server/anthropic, server/openai) --------
    ("Messages: a tool_use block accepted in a user turn",
     "server/anthropic/request.cpp",
     "} else if (type == \"tool_use\" && role == \"assistant\") {",
     "} else if (type == \"tool_use\") {",
     ["tests_server"], ["server: Messages request: "]),
    ("Messages: system blocks in reverse order",
     "server/anthropic/request.cpp",
     "parts.push_back({{\"type\", \"text\"}, {\"text\", string_field(b, \"text\", at + \".text\")}});",
     "parts.insert(parts.begin(), json{{\"type\", \"text\"}, {\"text\", string_field(b, \"text\", at + \".text\")}});",
     ["tests_server"], ["server: Messages request: "]),
    ("Messages: a tool_result marked is_error by default",
     "server/anthropic/request.cpp",
     "if (get_bool(b, \"is_error\").value_or(false)) body = error_result(std::move(body));",
     "if (get_bool(b, \"is_error\").value_or(true)) body = error_result(std::move(body));",
     ["tests_server"], ["server: Messages request: "]),
    ("Messages: tool_choice any taken as auto",
     "server/anthropic/request.cpp",
     "else if (type == \"any\") chat[\"tool_choice\"] = \"required\";",
     "else if (type == \"any\") chat[\"tool_choice\"] = \"auto\";",
     ["tests_server"], ["server: Messages request: "]),
    ("Messages: disable_parallel_tool_use false also disables them",
     "server/anthropic/request.cpp",
     "if (auto d = get_bool(c, \"disable_parallel_tool_use\"); d && *d) chat[\"parallel_tool_calls\"] = false;",
     "if (auto d = get_bool(c, \"disable_parallel_tool_use\"); d) chat[\"parallel_tool_calls\"] = false;",
     ["tests_server"], ["server: Messages request: "]),
    ("Messages: a thinking signature trusted without its hash",
     "server/anthropic/response.cpp",
     "if (!text || fnv_hex(*text) != signature.substr(dot + 1)) return std::nullopt;",
     "if (!text) return std::nullopt;",
     ["tests_server"], ["server: Messages request: thinking"]),
    ("Messages: a call cut off by the length limit announced as a tool_use",
     "server/anthropic/response.cpp",
     "if (current_ == Block::ToolUse && e.finish_reason != FinishReason::ToolCalls) unfinished_call_ = blocks_.size() - 1;",
     "if (false) unfinished_call_ = blocks_.size() - 1;",
     ["tests_server"], ["server: Messages answer: "]),
    ("Messages: a stop sequence reported as end_turn",
     "server/anthropic/response.cpp",
     "stop_reason_ = stop_reason_name(e.finish_reason, !e.stop_sequence.empty());",
     "stop_reason_ = stop_reason_name(e.finish_reason, e.stop_sequence.empty());",
     ["tests_server"], ["server: Messages answer: "]),
    ("Messages: input_tokens counts the tokens read from the prompt cache",
     "server/anthropic/response.cpp",
     "return {{\"input_tokens\", u.prompt_tokens - u.cached_tokens},",
     "return {{\"input_tokens\", u.prompt_tokens},",
     ["tests_server"], ["server: Messages answer: "]),
    ("Messages: display omitted still streams the thinking text",
     "server/anthropic/response.cpp",
     "if (!hide_reasoning_) delta({{\"type\", \"thinking_delta\"}, {\"thinking\", e.reasoning}});",
     "delta({{\"type\", \"thinking_delta\"}, {\"thinking\", e.reasoning}});",
     ["tests_server"], ["server: Messages answer: "]),
    ("Messages: errors on /v1/messages in the OpenAI shape (only its subpaths in Anthropic's)",
     "server/anthropic/response.cpp",
     "bool is_anthropic_path(const std::string& path) { return path == \"/v1/messages\" || path.rfind(\"/v1/messages/\", 0) == 0; }",
     "bool is_anthropic_path(const std::string& path) { return path.rfind(\"/v1/messages/\", 0) == 0; }",
     ["tests_server"], ["server: Messages "]),
    ("tolerance: a hosted tool on chat completions not named in X-K3-Ignored-Tools",
     "server/openai/tools.cpp",
     "note_ignored_tool(type.empty() ? where : type);",
     "continue;",
     ["tests_server"], ["server: bad input"]),
    ("tolerance: only web search taken for a hosted Messages tool (bash_20250124 offered to the model)",
     "server/anthropic/request.cpp",
     "if (!type.empty() && type != \"custom\") {",
     "if (type.rfind(\"web_search\", 0) == 0) {",
     ["tests_server"], ["server: Messages "]),
    ("tool_choice: a function named \"\" taken as any tool",
     "server/openai/tools.cpp",
     "if (!name || !name->is_string() || name->get_ref<const std::string&>().empty())",
     "if (!name || !name->is_string())",
     ["tests_server"], ["server: bad input", "server: Messages request: "]),
    # --- what the worker does with the model's tokens (server) ------------------------------
    ("stop matcher: the last listed stop wins, not the earliest",
     "server/worker/stop_matcher.cpp",
     "if (size_t at = held_.find(s); at < first) {",
     "if (size_t at = held_.find(s); at != std::string::npos) {",
     ["tests_server"], ["server: stop strings"]),
    ("stop matcher: a one-character start of a stop is not held back",
     "server/worker/stop_matcher.cpp",
     "for (size_t len = max_len; len > keep; --len)",
     "for (size_t len = max_len; len > keep + 1; --len)",
     ["tests_server"], ["server: stop strings"]),
    ("logprobs: normalised without the max logit (log-sum-exp shifted)",
     "server/worker/token_output.cpp",
     "double log_z = max_logit + std::log(sum);",
     "double log_z = std::log(sum);",
     ["tests_server"], ["server: logprobs"]),
    ("logprobs: top alternatives least likely first",
     "server/worker/token_output.cpp",
     "return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;",
     "return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] < logits[size_t(b)] : a < b;",
     ["tests_server"], ["server: logprobs"]),
    # --- wire formats and UI-facing status ---------------------------------------------------
    ("status: loading progress as a percentage, not a fraction",
     "server/routes/status.cpp",
     "if (std::regex_search(status, m, percent)) return std::stod(m[1]) / 100.0;",
     "if (std::regex_search(status, m, percent)) return std::stod(m[1]);",
     ["tests_server", "k3serve_fake_daemon"], ["server: GET /v1/status", "node_web_ui_states"]),
    ("finish reason: a length stop reported as max_tokens (the Messages API's name)",
     "server/openai/response.cpp",
     "case FinishReason::Length: return \"length\";",
     "case FinishReason::Length: return \"max_tokens\";",
     ["tests_server", "k3serve_fake_daemon"], ["server: completions: greedy text", "server: chat: max_completion_tokens", "node_openai_client"]),
    ("web UI: the API key sent without the space after Bearer",
     "web/api.js",
     "if (key) h.Authorization = 'Bearer ' + key;",
     "if (key) h.Authorization = 'Bearer' + key;",
     ["k3serve", "k3serve_fake_daemon"], ["node_web_ui"]),
    # --- chat output parsing (engine/chat) -------------------------------------------------
    ("tool calls: a number argument takes any JSON scalar",
     "engine/chat/output_parser.cpp",
     "if (type == xtml::kTypeNumber) return v.is_number();",
     "if (type == xtml::kTypeNumber) return v.is_primitive();",
     ["tests_chat"], ["chat: parser: "]),
    ("tool calls: a json element's body need not be an object",
     "engine/chat/output_parser.cpp",
     "if (value.is_discarded() || !value.is_object())",
     "if (value.is_discarded())",
     ["tests_chat"], ["chat: parser: "]),
    ("reasoning: text after the response's close tag is still content",
     "engine/chat/output_parser.cpp",
     "else if (t.name == xtml::kResponse) next = tag_is_open ? Section::Response : Section::Trailer;",
     "else if (t.name == xtml::kResponse) next = Section::Response;",
     ["tests_chat"], ["chat: output parser", "chat: parser: "]),
    # --- sampling (engine/sampling) -------------------------------------------------------
    ("sampler: ties at the top-k cut go to the higher id",
     "engine/sampling/sampler.cpp",
     "return a.first != b.first ? a.first > b.first : a.second < b.second;",
     "return a.first != b.first ? a.first > b.first : a.second > b.second;",
     ["tests_sampling"], ["sampling: ties at the top-k cut"]),
    ("sampler: top_p taken of an unnormalised mass as if it summed to 1",
     "engine/sampling/sampler.cpp",
     "const double target = params_.top_p * total;",
     "const double target = params_.top_p;",
     ["tests_sampling"], ["sampling: sampled frequencies", "sampling: top_p over"]),
    ("sampler: min_p relative to the total mass, not the most likely token",
     "engine/sampling/sampler.cpp",
     "const float floor = params_.min_p;",
     "const float floor = params_.min_p * float(total);",
     ["tests_sampling"], ["sampling: sampled frequencies"]),
    # --- grammar masks (engine/grammar) ---------------------------------------------------
    ("grammar mask: a token one byte past a dead prefix is walked from a stale state",
     "engine/grammar/matcher.cpp",
     "if (common >= dead_at) continue;  // starts with the dead prefix",
     "if (common > dead_at) continue;  // starts with the dead prefix",
     ["tests_grammar"], ["grammar: masks equal brute force", "grammar: the token budget", "grammar: control tokens"]),
    ("grammar mask: the end token allowed before the output is complete",
     "engine/grammar/matcher.cpp",
     "if (m.is_end(id)) return m.automaton.accepting(m.state);",
     "if (m.is_end(id)) return true;",
     ["tests_grammar"], ["grammar: masks equal brute force", "grammar: the token budget", "grammar: control tokens"]),
    # --- number formats and kernels (engine/kernels) -----------------------------------------
    ("E8M0: the exponent bias off by one",
     "engine/kernels/format.cpp",
     "return std::ldexp(1.0f, static_cast<int>(s) - 127);",
     "return std::ldexp(1.0f, static_cast<int>(s) - 128);",
     ["tests_kernels"], ["kernels: e8m0", "kernels: MXFP4 known-value", "kernels: reference kernels agree"]),
    ("bf16: narrowing rounds ties up, not to even",
     "engine/kernels/format.cpp",
     "u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even",
     "u += 0x8000u;  // round to nearest, ties to even",
     ["tests_kernels"], ["kernels: bf16"]),
    ("MXFP4: the reference reads the high nibble first",
     "engine/kernels/ref.cpp",
     "acc.add_product(lane, kE2M1[byte & 0x0f] * scale, x[2 * j]);",
     "acc.add_product(lane, kE2M1[byte >> 4] * scale, x[2 * j]);",
     ["tests_kernels"], ["kernels: e8m0", "kernels: MXFP4 known-value", "kernels: reference kernels agree"]),
    # --- the model (engine/model) -------------------------------------------------------
    ("forward: the cancel flag is honoured only before layer 0",
     "engine/model/model.cpp",
     "if (cancel && cancel->load(std::memory_order_relaxed)) return {StatusCode::Cancelled, \"cancelled\"};",
     "if (il == 0 && cancel && cancel->load(std::memory_order_relaxed)) return {StatusCode::Cancelled, \"cancelled\"};",
     ["tests_model"], ["model: forward: a cancel", "model: session: a cancel"]),
    ("MLA: attention scale over the nope width only",
     "engine/model/mla.cpp",
     "const float scale = 1.0f / std::sqrt(float(QK));",
     "const float scale = 1.0f / std::sqrt(float(NOPE));",
     ["tests_model"], ["model: golden gates"]),
    # --- the weight store (engine/store, engine/api) -------------------------------------
    ("prompt cache: a node matches on its first token only",
     "engine/api/prompt_cache.cpp",
     "while (j < child->seg.size() && pos + j < tokens.size() && child->seg[j] == tokens[pos + j]) ++j;",
     "while (j < child->seg.size() && pos + j < tokens.size()) ++j;",
     ["tests_api"], ["api: session: prefix reuse", "api: prompt cache disk"]),
    ("trunk ring: read-ahead may overwrite a layer in use",
     "engine/store/ring_schedule.cpp",
     "if (e.state == State::Reading || e.state == State::InUse) return true;",
     "if (e.state == State::Reading) return true;",
     ["tests_store"], ["store: a read-ahead layer", "store: a ring that holds", "store: a layer larger", "store: random sizes"]),
    ("expert cache: an expert in use may be evicted",
     "engine/store/expert_cache.cpp",
     "if (c.state != SlotState::Ready || c.users > 0) continue;",
     "if (c.state != SlotState::Ready) continue;",
     ["tests_store"], ["store: slots being read", "store: the current layer", "store: on a "]),
    ("expert cache: LRU evicts the most recently used",
     "engine/store/expert_cache.cpp",
     "better = c.last_use < b.last_use;",
     "better = c.last_use > b.last_use;",
     ["tests_store"], ["store: slots being read", "store: the current layer", "store: on a "]),
    ("memory plan: auto forgets the resident bytes in its reserve",
     "engine/store/memory_plan.cpp",
     "kAutoReserveFraction * avail_gb) + model.resident_bytes +",
     "kAutoReserveFraction * avail_gb) +",
     ["tests_store"], ["store: auto: "]),
]


def run(cmd, cwd=ROOT, **kw):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kw)


def cmake_regex(prefixes):
    """ctest -R for names starting with any of `prefixes` (CMake's regex syntax)."""
    def esc(s):
        return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", s)
    return "^(" + "|".join(esc(p) for p in prefixes) + ")"


def write_atomically(path, text):
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def restore_left_over():
    """Puts back a file that a killed run left planted (its text saved in RESTORE)."""
    if not RESTORE.exists():
        return False
    saved = json.loads(RESTORE.read_text())
    write_atomically(ROOT / saved["path"], saved["text"])
    RESTORE.unlink()
    print(f"restored {saved['path']} (left planted by an interrupted run)", flush=True)
    return True


class Planted:
    """The mutation in the file for the `with` block; the original back on any exit."""

    def __init__(self, rel, source, planted):
        self.rel, self.path, self.source, self.planted = rel, ROOT / rel, source, planted

    def __enter__(self):
        write_atomically(RESTORE, json.dumps({"path": self.rel, "text": self.source}))
        write_atomically(self.path, self.planted)
        return self

    def __exit__(self, *exc):
        write_atomically(self.path, self.source)
        RESTORE.unlink(missing_ok=True)
        return False


def raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def build(targets):
    return run(["cmake", "--build", str(BUILD), "-j2", "--target", *targets])


def run_cases(prefixes):
    """{case: status} for the selected cases; status is passed, failed or skipped."""
    with tempfile.NamedTemporaryFile(suffix=".xml", dir=BUILD, delete=False) as f:
        junit = pathlib.Path(f.name)
    try:
        run(["ctest", "-R", cmake_regex(prefixes), "-j2", "--timeout", str(CTEST_TIMEOUT_S),
             "--output-junit", str(junit)], cwd=BUILD)
        results = {}
        if junit.stat().st_size == 0:
            return results
        for case in ET.parse(junit).getroot().iter("testcase"):
            status = case.get("status", "run")
            if case.find("failure") is not None or case.find("error") is not None or status == "fail":
                results[case.get("name")] = "failed"
            elif case.find("skipped") is not None or status in ("notrun", "disabled"):
                results[case.get("name")] = "skipped"
            else:
                results[case.get("name")] = "passed"
        return results
    finally:
        junit.unlink(missing_ok=True)


def listed_cases(prefixes):
    r = run(["ctest", "-N", "-R", cmake_regex(prefixes)], cwd=BUILD)
    return re.findall(r"^\s*Test\s+#\d+: (.*)$", r.stdout, re.M)


def ensure_node_packages():
    """tests/node's npm packages, installed when missing: without them every node_* case fails
    at once, and so does every tokenizer and chat case (they read tiktoken's encoder files from
    tests/node/node_modules), which would read as catches."""
    wanted = json.loads((NODE_DIR / "package.json").read_text()).get("dependencies", {})
    missing = [p for p in wanted if not (NODE_DIR / "node_modules" / p / "package.json").exists()]
    if not missing:
        return
    print(f"npm install in tests/node (missing: {', '.join(missing)})", flush=True)
    r = run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR)
    if r.returncode != 0:
        sys.exit("npm install failed in tests/node:\n" + r.stdout[-2000:] + r.stderr[-2000:])


def unplantable(mutations):
    """The bugs whose original fragment is not in its file exactly once: an edit elsewhere moved or
    reworded the line, and the bug would not be planted (so a run could not test that check)."""
    bad = []
    for name, rel, original, _, _, _ in mutations:
        path = ROOT / rel
        n = path.read_text().count(original) if path.exists() else 0
        if n != 1:
            bad.append(f"'{name}': its line occurs {n} times in {rel} (update this script)")
    return bad


def load():
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main():
    args = sys.argv[1:]
    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGHUP, raise_interrupt)
    restore_left_over()
    if args == ["--restore"]:
        return 0
    if args == ["--list"]:
        for name, rel, _, _, targets, cases in MUTATIONS:
            print(f"{name}\n    {rel}; build {' '.join(targets)}; cases {cmake_regex(cases)}")
        return 0
    if args == ["--check"]:
        bad = unplantable(MUTATIONS)
        print("\n".join(bad) or f"all {len(MUTATIONS)} bugs can be planted")
        return 1 if bad else 0
    wanted = args[0] if args else ""
    chosen = [m for m in MUTATIONS if wanted in m[0]]
    if not chosen:
        sys.exit(f"no mutation's name contains '{wanted}' (--list shows them)")
    bad = unplantable(chosen)
    if bad:
        sys.exit("\n".join(bad))
    if not (BUILD / "CMakeCache.txt").exists():
        sys.exit("no configured build/: run scripts/build.sh first")
    started, load_at_start = time.monotonic(), load()

    # Baseline: every target, every selected case, nothing planted.
    all_targets = sorted({t for m in chosen for t in m[4]})
    all_cases = sorted({c for m in chosen for c in m[5]})
    ensure_node_packages()
    b = build(all_targets)
    if b.returncode != 0:
        sys.exit("the tree does not build with nothing planted:\n" + b.stdout[-3000:] + b.stderr[-2000:])
    for name, _, _, _, _, cases in chosen:
        for prefix in cases:
            if not listed_cases([prefix]):
                sys.exit(f"'{name}': no ctest case starts with '{prefix}' (update this script)")
    baseline = run_cases(all_cases)
    unusable = {c for c, s in baseline.items() if s != "passed"}
    baseline_s = time.monotonic() - started
    print(f"baseline: {len(baseline)} cases in {baseline_s:.0f} s, {len(unusable)} not passing "
          f"(not counted: {'; '.join(sorted(unusable)) or 'none'})", flush=True)

    rows = []
    try:
        for name, rel, original, planted, targets, cases in chosen:
            t0 = time.monotonic()
            source = (ROOT / rel).read_text()
            if source.count(original) != 1:
                rows.append((name, rel, "NOT PLANTED: the line is not in the source exactly once (update this script)", 0))
                print(f"{name}: {rows[-1][2]}", flush=True)
                continue
            with Planted(rel, source, source.replace(original, planted)):
                b = build(targets)
                if b.returncode != 0:
                    result = "DOES NOT BUILD:\n" + b.stdout[-2000:] + b.stderr[-2000:]
                else:
                    got = run_cases(cases)
                    caught = sorted(c for c, s in got.items() if s == "failed" and c not in unusable)
                    result = "\n".join(caught) if caught else "NOT CAUGHT"
            rows.append((name, rel, result, time.monotonic() - t0))
            print(f"{name}: {result.replace(chr(10), '; ')} ({rows[-1][3]:.0f} s)", flush=True)
    except KeyboardInterrupt:
        print("interrupted: the planted file is restored", file=sys.stderr)
        raise
    finally:
        # Rebuild with the sources restored, so build/ matches the tree again.
        build(all_targets)

    total = time.monotonic() - started
    caught_all = all(not r[2].startswith(("NOT ", "DOES NOT")) for r in rows)
    print(f"\n{sum(not r[2].startswith(('NOT ', 'DOES NOT')) for r in rows)} of {len(rows)} caught; "
          f"{total / 60:.1f} min in all ({baseline_s:.0f} s of build and baseline), "
          f"load {load_at_start} at the start, {load()} at the end\n")
    print("| planted bug | caught by | s |\n| --- | --- | --- |")
    for name, rel, result, seconds in rows:
        failed = result.startswith(("NOT ", "DOES NOT"))
        cases = f"**{result.splitlines()[0]}**" if failed else "; ".join(f"`{c}`" for c in result.splitlines())
        print(f"| {name} (`{rel}`) | {cases} | {seconds:.0f} |")
    return 0 if caught_all else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
