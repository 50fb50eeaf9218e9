#!/usr/bin/python3
"""The floor-plan figures of docs/architecture.md: files per folder, include cycles, the largest
functions. Reads a source tree (default: this checkout); to measure an older commit, extract it
first:  git archive 7e2a37c | tar -x -C /tmp/before && scripts/floor_plan.py /tmp/before

  files per folder   .cpp/.h files in each folder of engine/, server/ and cli/
  include cycles     strongly connected components of the #include "..." graph, between files
                     and between folders (a folder cycle: two layers that include each other)
  units and floors   a unit is a header with its .cpp; a unit's floor is 1 + the highest floor of
                     the units of its own top folder (engine/, server/, cli/) it includes, 0 for
                     one that includes none; the floors of a top folder are its highest + 1
  upward includes    the facade `k3/engine.h` included from below it (engine/ outside api/: the
                     engine's layers must not depend on what is built over them), or a folder of
                     server/ including the server's root (the route table and the daemon's wiring)
  largest functions  the longest function bodies in engine/ and server/ (lines, from universal-ctags)

  the map           every folder of engine/, server/ and cli/ has its row in docs/architecture.md's
                     table "What each folder holds" (a row whose first cell is the folder's path)

--check (ctest `floor_plan`): exits 1 when there is an include cycle, between files or between
folders, when a public header (engine/include, cli/include) includes a private one, when
there is an upward include (only api/, cli/, server/ and tests include k3/engine.h), or when a
folder is missing from the map.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_DIRS = ["engine", "server", "cli"]


def sources(root):
    for top in SOURCE_DIRS:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".cpp", ".h")):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, including, name):
    """The file an #include "name" means: next to the includer, then the include roots."""
    # (engine/cli/include: where k3/cli.h was before cli/ left engine/, for measuring old commits)
    bases = [os.path.dirname(including), "engine", "engine/include", "cli/include", "engine/cli/include", "server", "."]
    for b in bases:
        p = os.path.normpath(os.path.join(b, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def include_graph(root, files):
    g = {f: set() for f in files}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = INCLUDE.match(line)
                if m:
                    t = resolve(root, f, m.group(1))
                    if t and t != f:
                        g[f].add(t)
    return g


def cycles(g):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in g:
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop(); on.discard(w); comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
                continue
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]; counter[0] += 1
                stack.append(nxt); on.add(nxt)
                work.append((nxt, iter(sorted(g.get(nxt, ())))))
            elif nxt in on:
                low[v] = min(low[v], index[nxt])
    return out


def folder(f):
    d = os.path.dirname(f)
    return "engine/include" if d.startswith("engine/include") else d


def largest_functions(root, files, n):
    if not shutil.which("ctags"):
        return None
    out = subprocess.run(["ctags", "-x", "--c++-kinds=f", "--fields=+ne", "--_xformat=%N\t%F\t%n\t%e",
                          "-o", "-"] + files, cwd=root, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        name, path, start, end = line.split("\t")
        if name.startswith("__anon") or not end.isdigit():
            continue  # lambdas are counted inside their function
        rows.append((int(end) - int(start) + 1, f"{path}:{start}", name))
    return sorted(rows, reverse=True)[:n]


FACADE = "engine/include/k3/engine.h"
# Who may include the facade: what is built over the engine (tests are not scanned here).
FACADE_USERS = ("engine/api/", "engine/cli/", "cli/", "server/")


def unit(f):
    return os.path.splitext(f)[0]


def floors(g, top):
    """(units, floors) of the include graph between the units of one top folder."""
    ug = collections.defaultdict(set)
    for f, targets in g.items():
        if not f.startswith(top + "/"):
            continue
        ug[unit(f)]
        for t in targets:
            if t.startswith(top + "/") and unit(t) != unit(f):
                ug[unit(f)].add(unit(t))
    floor = {}

    def of(u):
        if u not in floor:
            floor[u] = 0  # a cycle (reported on its own) does not recurse for ever
            floor[u] = 1 + max((of(v) for v in ug[u]), default=-1)
        return floor[u]

    return len(ug), (max(of(u) for u in ug) + 1) if ug else 0


def upward_includes(g):
    out = []
    for f, targets in g.items():
        for t in targets:
            if t == FACADE and f.startswith("engine/") and not f.startswith(FACADE_USERS):
                out.append(f"{f} -> {t}")
            # a server subfolder including a file at server/'s root
            if (f.startswith("server/") and os.path.dirname(f) != "server" and t.startswith("server/")
                    and os.path.dirname(t) == "server"):
                out.append(f"{f} -> {t}")
    return sorted(out)


def is_public(f):
    return f.startswith(("engine/include/", "cli/include/", "engine/cli/include/"))


MAP = "docs/architecture.md"
MAP_SECTION = "## What each folder holds"


def unmapped_folders(root, folders):
    """The folders without a row in the map's folder table (None: the tree has no map)."""
    path = os.path.join(root, MAP)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    start = text.find(MAP_SECTION)
    if start < 0:
        return sorted(folders)
    end = text.find("\n## ", start + len(MAP_SECTION))
    section = text[start:end if end >= 0 else len(text)]
    named = set()
    for line in section.splitlines():
        # | `engine/tokenizer/`, `engine/chat/` | ... : every path in the first cell
        if line.startswith("| "):
            named.update(p.rstrip("/") for p in re.findall(r"`([^`]+)`", line.split("|")[1]))
    # engine/include/k3/ names engine/include (folder() counts the public headers as one folder)
    named.update(folder(n + "/x") for n in list(named))
    return sorted(f for f in folders if f not in named)


def main(argv):
    parser = argparse.ArgumentParser(prog="floor_plan.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."),
                        help="the source tree to measure (default: this checkout)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on an include cycle, a leaking public header or an upward include")
    args = parser.parse_args(argv[1:])
    if not os.path.isdir(args.tree):
        parser.error(f"{args.tree} is not a directory")
    check = args.check
    root = os.path.abspath(args.tree)
    files = list(sources(root))
    per_folder = collections.Counter(folder(f) for f in files)
    print(f"files per folder ({len(files)} .cpp/.h files in {' '.join(SOURCE_DIRS)}):")
    for d, k in sorted(per_folder.items()):
        print(f"  {k:4d}  {d}/")
    g = include_graph(root, files)
    file_cycles = cycles(g)
    print(f"include cycles between files: {len(file_cycles)}")
    for c in file_cycles:
        print("  " + " <-> ".join(c))
    fg = collections.defaultdict(set)
    for f, targets in g.items():
        for t in targets:
            if folder(t) != folder(f):
                fg[folder(f)].add(folder(t))
            fg.setdefault(folder(t), set())
    folder_cycles = cycles(dict(fg))
    print(f"include cycles between folders: {len(folder_cycles)}")
    for c in folder_cycles:
        print("  " + " <-> ".join(c))
    leaks = sorted(f"{f} -> {t}" for f, targets in g.items() if is_public(f) for t in targets if not is_public(t))
    print(f"public headers that include a private one: {len(leaks)}")
    for leak in leaks:
        print("  " + leak)
    upward = upward_includes(g)
    print(f"upward includes: {len(upward)}")
    for u in upward:
        print("  " + u)
    for top in SOURCE_DIRS:
        n_units, n_floors = floors(g, top)
        if n_units:
            print(f"{top}/: {n_units} units on {n_floors} floors")
    unmapped = unmapped_folders(root, per_folder.keys())
    if unmapped is not None:
        print(f"folders missing from {MAP}'s table: {len(unmapped)}")
        for f in unmapped:
            print("  " + f)
    if check:
        return 1 if file_cycles or folder_cycles or leaks or upward or unmapped else 0
    rows = largest_functions(root, files, 10)
    if rows is None:
        print("largest functions: universal-ctags is not installed (apt-get install universal-ctags)")
    else:
        print("largest functions (lines):")
        for n, where, name in rows:
            print(f"  {n:4d}  {name}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
