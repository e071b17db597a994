#!/usr/bin/env python3
"""
check_layers.py - the layering rules of src/fcgi (docs/ARCHITECTURE.md,
"Layers"), checked on the built objects so that they stay true:

  1. no cycle between the files of src/fcgi: who calls whom is read from
     the symbols each object defines and needs (nm), so a call through a
     header counts, and a function pointer set up at start does not;
  2. only the engines and the agent client include agentproto.h: the
     handlers and the HTTP layer never build an agent frame.

    tests/arch/check_layers.py BUILDDIR

Exits 1 and says which rule broke; tests/run.sh runs it after the build.
"""

import collections
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
AGENT_PROTO_ALLOWED = {"agent.c", "exec.c", "files.c", "procs.c", "code.c"}


def call_graph(builddir):
    defs, needs = {}, collections.defaultdict(set)
    objs = sorted((builddir / "src" / "fcgi").glob("nanobox_fcgi-*.o"))
    if not objs:
        sys.exit(f"check_layers: no objects of nanobox-fcgi under {builddir}/src/fcgi: build first")
    for obj in objs:
        name = obj.name[len("nanobox_fcgi-"):-len(".o")]
        out = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defs[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                needs[name].add(parts[1])
    graph = collections.defaultdict(set)
    for name, syms in needs.items():
        for sym in syms:
            if sym in defs and defs[sym] != name:
                graph[name].add(defs[sym])
    return graph


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    builddir = pathlib.Path(sys.argv[1]).resolve()
    ok = True

    for comp in cycles(call_graph(builddir)):
        ok = False
        print(f"check_layers: a cycle between src/fcgi files: {' <-> '.join(comp)}")

    for src in sorted((ROOT / "src" / "fcgi").glob("*.[ch]")):
        if src.name in AGENT_PROTO_ALLOWED:
            continue
        if re.search(r'^#include "agentproto\.h"', src.read_text(), re.M):
            ok = False
            print(f"check_layers: src/fcgi/{src.name} includes agentproto.h "
                  f"(only {', '.join(sorted(AGENT_PROTO_ALLOWED))} may)")

    if ok:
        print("check_layers: no cycle in src/fcgi; agentproto.h only in the engines")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
