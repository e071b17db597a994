#!/usr/bin/env python3
"""
check_layers.py - the layering rules of nanobox (docs/ARCHITECTURE.md,
"Layers"), checked on the built objects so that they stay true.

Who calls whom is read from the symbols each object defines and needs (nm):
a call through a header counts, a function pointer set up at start does not.

  1. No cycle between the files of any program or library: nanobox-fcgi,
     nanobox-init, nanobox-fwd, nanobox-front, the CLI, libnanobox,
     libnanobox_mcp.
  2. nanobox-fcgi's files call downward only. Each file has a rank (its
     folder's, RANKS below, or its own in FILE_RANKS): a file may call a
     file of lower rank, or a file of its own folder where that folder
     allows calls sideways (SIDEWAYS). A call to a higher rank, or to
     another folder of the same rank, breaks the rule: http and the
     engines do not know each other, and a handler (api/, e2b/) calls no
     other handler, only the helpers under it. The helpers files of one
     folder (rank 2) may call each other, without a cycle (rule 1).
  3. Only the engines speak the agent protocol: a reference to nb_agent_*
     or nba_* (the frame and field codec) from any other nanobox-fcgi file,
     or an #include "agentproto.h" outside src/fcgi/engine, breaks it.
  4. docs/ARCHITECTURE.md's file map names every source file of src/fcgi
     and src/mcp, and every other folder of src/ (check_file_map).
  5. One error vocabulary (nberr.h): no error is filled with an HTTP
     status, and below the handlers (base, engine, http, process) no code
     compares an error's slug or its code with a number.
  6. No source file of src/ over MAX_LINES lines: one that grows past it
     holds more than one concern.

A break that is known and being worked on is listed in KNOWN with the
item of the issue that removes it; a KNOWN entry that no longer happens
fails too, so the list only shrinks.

    tests/arch/check_layers.py BUILDDIR     check a build
    tests/arch/check_layers.py --self-test  the checker's own tests

Exits 1 and says which rule broke; `make check` and tests/run.sh run it.
"""

import collections
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The programs and libraries: (name, the object files' pattern under BUILDDIR).
PROGRAMS = [
    ("nanobox-fcgi", "src/fcgi/*/nanobox_fcgi-*.o"),
    ("nanobox-init", "src/*/nanobox_init-*.o"),
    ("nanobox-fwd", "src/*/nanobox_fwd-*.o"),
    ("nanobox-front", "src/front/nanobox_front-*.o"),
    ("nanobox", "src/cli/nanobox-*.o"),
    ("libnanobox", "src/common/libnanobox_a-*.o"),
    ("libnanobox_mcp", "src/mcp/libnanobox_mcp_a-*.o"),
]

# nanobox-fcgi's layers, bottom up (docs/ARCHITECTURE.md, "Layers").
RANKS = {
    "base": 0,     # the error record, where helper programs are
    "engine": 1,   # sandbox, exec, files, procs, code, ports, templates, ...
    "http": 1,     # parsing, routing, auth, answers: no engine
    "api": 3,      # the native API's handlers
    "e2b": 3,      # the E2B front's handlers
    "process": 5,  # master, workers, reaper, events follower
}
SIDEWAYS = {"base", "engine", "http", "process"}
# Files whose rank is not their folder's: what handlers share sits under
# them (e2b_route.c, the E2B front's pure path matching, with them); the
# route tables sit over them (they name the handlers): the native API's and
# the E2B front's rows (e2b_front.c, registered with the HTTP layer).
FILE_RANKS = {
    "e2b/e2b_rpc": 2,
    "e2b/e2b_route": 2,
    "e2b/e2b_sign": 2,
    "api/api_forward": 2,  # the route guard's: a sandbox of another node sent there
    "api/api_volfwd": 2,  # a volume of another node (api_forward.c) sent there
    "api/api_routes": 4,
    "e2b/e2b_front": 4,
}
HELPERS_RANK = 2  # a handler folder's shared helpers, *_common.c
HANDLER_RANK = 3
ROUTE_TABLES = {"api/api_routes", "e2b/e2b_front"}  # the files that name handlers
AGENT_SYMBOL = re.compile(r"^(nb_agent_|nba_)")

# Known breaks, each with the item of issue 23 that removes it.
KNOWN = {}


# Known breaks of the error vocabulary (rule 5).
KNOWN_VOCAB = {}

# Known cycles, per program (none left).
KNOWN_CYCLES = {}


def objects(builddir, pattern, root=ROOT):
    """The objects of a pattern whose source still exists: a build tree keeps
    the object of a file since removed."""
    out = []
    for obj in sorted(builddir.glob(pattern)):
        stem = obj.name.split("-", 1)[1][: -len(".o")]
        if (root / obj.relative_to(builddir).parent / f"{stem}.c").exists():
            out.append(obj)
    return out


def file_key(builddir, obj):
    """src/fcgi/engine/nanobox_fcgi-exec.o -> 'engine/exec' (fcgi), or
    src/init/nanobox_init-conn.o -> 'init/conn'."""
    rel = obj.relative_to(builddir)
    stem = obj.name.split("-", 1)[1][: -len(".o")]
    folder = rel.parent.name
    return f"{folder}/{stem}"


def read_nm(builddir, objs):
    defs, needs = {}, {}
    for obj in objs:
        name = file_key(builddir, obj)
        needs[name] = set()
        out = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBRVW":
                defs[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                needs[name].add(parts[1])
    return defs, needs


def call_graph(defs, needs):
    graph = collections.defaultdict(set)
    for name, syms in needs.items():
        graph.setdefault(name, set())
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


def rank(name):
    folder, stem = name.split("/", 1)
    if name in FILE_RANKS:
        return FILE_RANKS[name]
    if folder in ("api", "e2b") and stem.endswith("_common"):
        return HELPERS_RANK
    if folder not in RANKS:
        raise KeyError(f"{name}: src/fcgi/{folder} has no rank in check_layers.py's RANKS")
    return RANKS[folder]


def order_breaks(graph):
    """(caller, callee, why) for every call rule 2 forbids."""
    out = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            ra, rb = rank(a), rank(b)
            fa, fb = a.split("/")[0], b.split("/")[0]
            if rb > ra:
                out.append((a, b, f"calls up (rank {ra} -> {rb})"))
            elif rb == ra and fa != fb:
                out.append((a, b, f"calls sideways into another layer ({fa} -> {fb})"))
            elif rb == ra == HANDLER_RANK and fa not in SIDEWAYS:
                out.append((a, b, f"a handler calls another handler ({fa})"))
            elif rb == HANDLER_RANK and a not in ROUTE_TABLES:
                out.append((a, b, "reaches a handler past the route table"))
    return out


def agent_breaks(needs):
    out = []
    for name in sorted(needs):
        if name.startswith("engine/"):
            continue
        syms = sorted(s for s in needs[name] if AGENT_SYMBOL.match(s))
        if syms:
            out.append((name, ", ".join(syms)))
    return out


def agent_includes(root):
    out = []
    for src in sorted((root / "src" / "fcgi").rglob("*.[ch]")):
        if src.parent.name == "engine":
            continue
        if re.search(r'^#include "agentproto\.h"', src.read_text(), re.M):
            out.append(str(src.relative_to(root)))
    return out


BELOW_HANDLERS = ("base", "engine", "http", "process")
SLUG_CMP = re.compile(r"\bstr\w*cmp\(\s*[\w.>-]*(?:->|\.)code\b|\bstr\w*cmp\([^;]*,\s*[\w.>-]*(?:->|\.)code\)")
STATUS_SET = re.compile(r"\bnb_apierr_set\(\s*[^,]+,[^,\"]*\b[1-5][0-9][0-9]\b")
STATUS_CMP = re.compile(r"\b\w+(?:->|\.)err\s*(?:==|!=|<|>|<=|>=)\s*[0-9]")


def error_vocabulary(root):
    """(file, what) for every place below the handlers that speaks HTTP in
    an error, and for every error filled with a number anywhere: errors
    carry a domain code (nberr.h) and a slug no one compares."""
    out = []
    for src in sorted((root / "src" / "fcgi").rglob("*.c")):
        text = src.read_text()
        name = f"{src.parent.name}/{src.stem}"
        if STATUS_SET.search(text):
            out.append((name, "an error filled with an HTTP status, not a domain code"))
        if src.parent.name in BELOW_HANDLERS:
            if SLUG_CMP.search(text):
                out.append((name, "a comparison of an error's slug"))
            if STATUS_CMP.search(text):
                out.append((name, "an error's code compared with a number"))
    return out


MAX_LINES = 1500


def long_files(root):
    """(path, lines) of every C source or header of src/ over MAX_LINES."""
    out = []
    for src in sorted((root / "src").rglob("*.[ch]")):
        n = src.read_text(errors="replace").count("\n")
        if n > MAX_LINES:
            out.append((str(src.relative_to(root)), n))
    return out


def check_file_map(root):
    """Sources docs/ARCHITECTURE.md's file map does not name."""
    doc = (root / "docs" / "ARCHITECTURE.md").read_text()
    m = re.search(r"^## File map\n(.*?)(?=^## )", doc, re.M | re.S)
    table = m.group(1) if m else ""
    named = set(re.findall(r"`(src/[^`]+)`", table))
    missing = []
    for sub in ("fcgi", "mcp"):
        for src in sorted((root / "src" / sub).rglob("*.c")):
            rel = str(src.relative_to(root))
            if rel not in named:
                missing.append(rel)
    for d in sorted((root / "src").iterdir()):
        if d.is_dir() and d.name not in ("fcgi", "mcp"):
            rel = f"src/{d.name}/"
            if rel not in named and not any(n.startswith(rel) for n in named):
                missing.append(rel)
    return missing


def check(builddir, root=ROOT, known=None, known_cycles=None, known_vocab=None):
    known = KNOWN if known is None else known
    known_vocab = KNOWN_VOCAB if known_vocab is None else known_vocab
    known_cycles = KNOWN_CYCLES if known_cycles is None else known_cycles
    problems, seen_known = [], set()
    for prog, pattern in PROGRAMS:
        objs = objects(builddir, pattern, root)
        if not objs:
            problems.append(f"no objects of {prog} ({pattern}) under {builddir}: build first")
            continue
        defs, needs = read_nm(builddir, objs)
        graph = call_graph(defs, needs)
        for comp in cycles(graph):
            if prog in known_cycles:
                seen_known.add(prog)
                continue
            problems.append(f"{prog}: a cycle between files: {' <-> '.join(comp)}")
        if prog != "nanobox-fcgi":
            continue
        for a, b, why in order_breaks(graph):
            if (a, b) in known:
                seen_known.add((a, b))
                continue
            syms = sorted(s for s in needs[a] if defs.get(s) == b)
            problems.append(f"nanobox-fcgi: src/fcgi/{a}.c {why}: src/fcgi/{b}.c ({', '.join(syms[:4])})")
        for name, syms in agent_breaks(needs):
            problems.append(f"nanobox-fcgi: src/fcgi/{name}.c speaks the agent protocol ({syms}): only engine/ may")
    for path in agent_includes(root):
        problems.append(f"{path} includes agentproto.h: only src/fcgi/engine may")
    for name, what in error_vocabulary(root):
        if (name, what) in known_vocab:
            seen_known.add((name, what))
            continue
        problems.append(f"src/fcgi/{name}.c: {what} (nberr.h)")
    for path, n in long_files(root):
        problems.append(f"{path} has {n} lines, over {MAX_LINES}: split it by concern")
    for path in check_file_map(root):
        problems.append(f"docs/ARCHITECTURE.md's file map does not name {path}")
    for prog in sorted(set(known_cycles) - seen_known):
        problems.append(f"KNOWN_CYCLES lists {prog} ({known_cycles[prog]}), which has no cycle now: remove it")
    for name, what in sorted(set(known_vocab) - seen_known):
        problems.append(f"KNOWN_VOCAB lists {name}: {what} ({known_vocab[(name, what)]}), "
                        "which no longer happens: remove it")
    for a, b in sorted(set(known) - seen_known):
        problems.append(f"KNOWN lists {a} -> {b} ({known[(a, b)]}), which no longer happens: remove it")
    return problems


def self_test():
    """The rules on made-up graphs: each planted break is found."""
    g = {"engine/exec": {"engine/agent", "base/apierr"}, "api/api_exec": {"engine/exec", "http/http"},
         "http/http": {"base/apierr"}, "process/worker": {"api/api_routes", "http/http"},
         "api/api_routes": {"api/api_exec"}, "api/api_common": {"engine/exec"},
         "e2b/api_e2b_fs": {"e2b/e2b_common", "api/api_common"}, "e2b/e2b_common": {"e2b/e2b_rpc"}}
    assert order_breaks(g) == [], order_breaks(g)
    assert cycles(g) == []
    planted = [
        ({"engine/exec": {"api/api_exec"}}, "calls up"),            # engine -> handler
        ({"engine/files": {"http/http"}}, "sideways into another"),  # engine -> http
        ({"http/http": {"engine/sandbox"}}, "sideways into another"),
        ({"api/api_code": {"api/api_exec"}}, "another handler"),
        ({"e2b/api_e2b_fs": {"api/api_files"}}, "another layer"),    # front -> other front
        ({"api/api_common": {"api/api_exec"}}, "calls up"),          # helpers -> handler
        ({"e2b/e2b_common": {"api/api_common"}}, "another layer"),  # helpers -> other front's
        ({"base/apierr": {"engine/exec"}}, "calls up"),
        ({"process/worker": {"api/api_ports"}}, "past the route table"),
    ]
    for graph, why in planted:
        got = order_breaks(graph)
        assert len(got) == 1 and why in got[0][2], (graph, got)
    assert cycles({"a/x": {"a/y"}, "a/y": {"a/z"}, "a/z": {"a/x"}}) == [["a/x", "a/y", "a/z"]]
    assert agent_breaks({"api/api_exec": {"nb_agent_call", "nb_http_json"}, "engine/exec": {"nba_get_u32"}}) \
        == [("api/api_exec", "nb_agent_call")]
    assert SLUG_CMP.search('if (!strcmp(ae->code, "port_open"))')
    assert SLUG_CMP.search('if (strcmp("x", ae.code) == 0)')
    assert not SLUG_CMP.search('strcmp(t->name, code)')
    assert STATUS_SET.search('nb_apierr_set(ae, 404, "not_found", "x")')
    assert not STATUS_SET.search('nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "x")')
    assert STATUS_SET.search('nb_apierr_set(ae, n ? 422 : 400, "bad_field", "x")')
    assert not STATUS_SET.search('nb_apierr_set(ae, NB_E_LIMIT, "busy", "over %d", 100)')
    assert STATUS_CMP.search('if (ae->err == 404)')
    assert not STATUS_CMP.search('if (ae->err == NB_E_NOT_FOUND)')
    print("check_layers: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    self_test()
    problems = check(pathlib.Path(sys.argv[1]).resolve())
    for p in problems:
        print(f"check_layers: {p}")
    if problems:
        return 1
    print(f"check_layers: no cycle in any program; nanobox-fcgi calls downward only "
          f"({len(KNOWN) + len(KNOWN_VOCAB)} known breaks left, issue 23); the agent protocol only "
          f"in the engines; one error vocabulary; no file over {MAX_LINES} lines; the file map "
          "names every source")
    return 0


if __name__ == "__main__":
    sys.exit(main())
