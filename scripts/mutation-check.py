#!/usr/bin/env python3
"""Plants one-line bugs, one at a time, and reports which tests catch each (docs/development.md).

For each mutation: replace one exact line fragment in one source file, rebuild the test binaries
that could notice, run the ctest selection, record the cases that failed, and restore the file
(always, also on Ctrl-C). A mutation nobody catches is a hole in the suite. Needs a configured
build/ (scripts/build.sh). Takes a few minutes per mutation on two cores.

  python3 scripts/mutation-check.py            # all mutations
  python3 scripts/mutation-check.py sampler    # those whose name contains "sampler"
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"

# name, file, original fragment, planted fragment, build targets, ctest -R selection
MUTATIONS = [
    ("stop matcher: the last listed stop wins, not the earliest",
     "server/worker/stop_matcher.cpp",
     "for (const auto& s : stops_) first = std::min(first, held_.find(s));",
     "for (const auto& s : stops_) if (held_.find(s) != std::string::npos) first = held_.find(s);",
     ["tests_server"], r"^server: "),
    ("sampler: ties at the top-k cut go to the higher id",
     "engine/sampling/sampler.cpp",
     "return a.first != b.first ? a.first > b.first : a.second < b.second;",
     "return a.first != b.first ? a.first > b.first : a.second > b.second;",
     ["tests_sampling", "tests_server"], r"^(sampling|server): "),
    ("forward: the cancel flag is honoured only before layer 0",
     "engine/model/model.cpp",
     "if (cancel && cancel->load(std::memory_order_relaxed)) return {StatusCode::Cancelled, \"cancelled\"};",
     "if (il == 0 && cancel && cancel->load(std::memory_order_relaxed)) return {StatusCode::Cancelled, \"cancelled\"};",
     ["tests_model", "tests_api"], r"^(model|api): "),
    ("MLA: attention scale over the nope width only",
     "engine/model/mla.cpp",
     "const float scale = 1.0f / std::sqrt(float(QK));",
     "const float scale = 1.0f / std::sqrt(float(NOPE));",
     ["tests_model"], r"^model: "),
    ("memory plan: auto forgets the resident bytes in its reserve",
     "engine/store/memory_plan.cpp",
     "kAutoReserveFraction * avail_gb) + model.resident_bytes;",
     "kAutoReserveFraction * avail_gb);",
     ["tests_store"], r"^store: "),
]


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=kw.pop("cwd", ROOT), capture_output=True, text=True, **kw)


def failed_cases(selection):
    r = run(["ctest", "-R", selection, "-j2", "--timeout", "600"], cwd=BUILD)
    # ctest lists failures as "  N - name (Failed)" after "The following tests FAILED:".
    tail = r.stdout.split("The following tests FAILED:")[-1] if "FAILED:" in r.stdout else ""
    return [m.group(1) for m in re.finditer(r"^\s*\d+ - (.*?) \((?:Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\)",
                                           tail, re.M)]


def main():
    wanted = sys.argv[1] if len(sys.argv) > 1 else ""
    rows = []
    # What fails with nothing planted is not a catch: a selection run on its own can miss the
    # fixtures a whole-suite run sets up first. Those cases are measured once and left out.
    baseline = {}
    for name, rel, original, planted, targets, selection in MUTATIONS:
        if wanted not in name:
            continue
        path = ROOT / rel
        source = path.read_text()
        if source.count(original) != 1:
            rows.append((name, "NOT PLANTED: the line is not in the source exactly once (update this script)"))
            continue
        if selection not in baseline:
            run(["cmake", "--build", str(BUILD), "-j2", "--target", *targets])
            baseline[selection] = set(failed_cases(selection))
        try:
            path.write_text(source.replace(original, planted))
            b = run(["cmake", "--build", str(BUILD), "-j2", "--target", *targets])
            if b.returncode != 0:
                rows.append((name, "does not build:\n" + b.stdout[-2000:] + b.stderr[-2000:]))
                continue
            caught = [c for c in failed_cases(selection) if c not in baseline[selection]]
            rows.append((name, "; ".join(caught) if caught else "NOT CAUGHT"))
        finally:
            path.write_text(source)
        print(f"{name}: {rows[-1][1]}", flush=True)
    # Rebuild with the sources restored, so build/ matches the tree again.
    run(["cmake", "--build", str(BUILD), "-j2", "--target", *sorted({t for m in MUTATIONS for t in m[4]})])
    print("\n| planted bug | caught by |\n| --- | --- |")
    for name, result in rows:
        print(f"| {name} | {result} |")
    return 0 if all(r[1] not in ("NOT CAUGHT",) and not r[1].startswith("NOT PLANTED") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
