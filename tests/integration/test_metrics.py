"""GET /metrics (Prometheus text format) and GET /sandbox/{id}/metrics.

The text is checked twice: by a strict parser written here from the text
exposition format's spec (always), and by Prometheus's own `promtool check
metrics` where promtool is installed (tests/run.sh puts it there:
nb_install_promtool in src/setup/common.sh; without it that one test skips).

Values are compared before and after the test acts: every xdist worker has
its own stack, and the tests of one worker run one after the other, so the
differences are this test's own.
"""

import math
import re
import shutil
import subprocess
import time
import urllib.parse

import pytest

from conftest import module_stack
from nbtest import DEFAULT_MEMORY, DEFAULT_PIDS, IMAGE, assert_error, parse_json, random_uuid, wait_until

CONTENT_TYPE = "text/plain; version=0.0.4"

# ------------------------------------------------------------ the parser

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
# the suffixes a histogram's samples carry
HIST_SUFFIXES = ("_bucket", "_sum", "_count")


def _parse_value(s, where):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    assert re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", s), f"{where}: bad value {s!r}"
    return float(s)


def _parse_labels(s, where):
    """s starts after '{'; returns (labels, rest after '}')."""
    labels, i = {}, 0
    while True:
        if s[i:i + 1] == "}":
            return labels, s[i + 1:]
        m = LABEL_NAME.match(s, i)
        assert m, f"{where}: bad label name at {s[i:]!r}"
        name = m.group(0)
        assert not name.startswith("__"), f"{where}: reserved label name {name}"
        i = m.end()
        assert s[i:i + 2] == '="', f"{where}: expected =\" after {name}"
        i += 2
        value = []
        while True:
            assert i < len(s), f"{where}: unterminated label value"
            c = s[i]
            if c == "\\":
                esc = s[i + 1:i + 2]
                assert esc in ("\\", '"', "n"), f"{where}: bad escape \\{esc}"
                value.append("\n" if esc == "n" else esc)
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                assert c != "\n", f"{where}: raw newline in a label value"
                value.append(c)
                i += 1
        assert name not in labels, f"{where}: label {name} twice"
        labels[name] = "".join(value)
        if s[i:i + 1] == ",":
            i += 1
        else:
            assert s[i:i + 1] == "}", f"{where}: expected , or }} at {s[i:]!r}"


def family_of(name, families):
    """The family a sample name belongs to (a histogram's _bucket/_sum/_count)."""
    if name in families:
        return name
    for suf in HIST_SUFFIXES:
        if name.endswith(suf) and families.get(name[:-len(suf)], {}).get("type") == "histogram":
            return name[:-len(suf)]
    return None


def parse_exposition(text):
    """{family: {"type", "help", "samples": [(name, labels, value)]}}, after
    checking the text against the format: line syntax, escapes, one TYPE and
    one HELP per family before its samples, a family's samples together, no
    series twice, counters >= 0, and each histogram whole (le ascending
    with +Inf last, cumulative counts, _count equal to the +Inf bucket,
    a _sum)."""
    assert text.endswith("\n"), "the text must end with a newline"
    families, seen_series, order = {}, set(), []
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {n} {line!r}"
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                assert METRIC_NAME.fullmatch(name), f"{where}: bad metric name"
                fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
                assert not fam["samples"], f"{where}: {parts[1]} after the family's samples"
                if parts[1] == "TYPE":
                    assert fam["type"] is None, f"{where}: second TYPE"
                    assert len(parts) == 4 and parts[3] in TYPES, f"{where}: bad type"
                    fam["type"] = parts[3]
                else:
                    assert fam["help"] is None, f"{where}: second HELP"
                    fam["help"] = parts[3] if len(parts) == 4 else ""
                if name not in order:
                    order.append(name)
                current = name
            continue
        m = METRIC_NAME.match(line)
        assert m, f"{where}: bad sample name"
        name, rest = m.group(0), line[m.end():]
        labels = {}
        if rest.startswith("{"):
            labels, rest = _parse_labels(rest[1:], where)
        assert rest.startswith(" "), f"{where}: expected a space before the value"
        fields = rest[1:].split(" ")
        assert 1 <= len(fields) <= 2, f"{where}: expected value [timestamp]"
        value = _parse_value(fields[0], where)
        if len(fields) == 2:
            assert re.fullmatch(r"-?\d+", fields[1]), f"{where}: bad timestamp"
        fam_name = family_of(name, families)
        assert fam_name is not None, f"{where}: sample of a family without TYPE"
        assert fam_name == current, f"{where}: {fam_name}'s samples are not together"
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen_series, f"{where}: series twice"
        seen_series.add(key)
        fam = families[fam_name]
        if fam["type"] == "histogram":
            assert name != fam_name, f"{where}: a histogram sample needs a suffix"
            if name.endswith("_bucket"):
                assert "le" in labels, f"{where}: bucket without le"
        elif fam["type"] == "counter":
            assert value >= 0, f"{where}: negative counter"
        fam["samples"].append((name, labels, value))
    for name, fam in families.items():
        assert fam["type"] is not None, f"{name}: no TYPE"
        assert fam["help"], f"{name}: no HELP"
        if fam["type"] == "histogram":
            _check_histogram(name, fam["samples"])
    return families


def _check_histogram(name, samples):
    series = {}
    for sname, labels, value in samples:
        base = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        h = series.setdefault(base, {"buckets": [], "sum": None, "count": None})
        if sname.endswith("_bucket"):
            h["buckets"].append((_parse_value(labels["le"], name), value))
        elif sname.endswith("_sum"):
            h["sum"] = value
        else:
            h["count"] = value
    for base, h in series.items():
        where = f"{name}{dict(base)}"
        les = [le for le, _ in h["buckets"]]
        assert les == sorted(les) and len(set(les)) == len(les), f"{where}: le not ascending"
        assert les and les[-1] == math.inf, f"{where}: no +Inf bucket"
        counts = [c for _, c in h["buckets"]]
        assert counts == sorted(counts), f"{where}: buckets not cumulative"
        assert h["count"] == counts[-1], f"{where}: _count {h['count']} != +Inf bucket {counts[-1]}"
        assert h["sum"] is not None and h["sum"] >= 0, f"{where}: no _sum"


def test_parser_refuses_what_the_format_forbids():
    """The strict parser is only worth something if it says no."""
    good = "# HELP a_total x\n# TYPE a_total counter\na_total{l=\"v\"} 1\n"
    parse_exposition(good)
    bad = [
        good.rstrip("\n"),                                          # no final newline
        "a_total 1\n",                                              # no TYPE
        "# TYPE a_total counter\na_total 1\n",                      # no HELP
        good + "a_total{l=\"v\"} 2\n",                              # series twice
        good.replace('"v"', '"v\\x"'),                              # bad escape
        good.replace("1\n", "one\n"),                               # bad value
        good.replace("{l=", "{__l="),                               # reserved label
        good + "# HELP b x\n# TYPE b gauge\nb 1\na_total{l=\"w\"} 1\n",  # family split
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
        "h_sum 1\nh_count 1\n",                                     # not cumulative
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  # no +Inf
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",  # count
    ]
    for text in bad:
        with pytest.raises(AssertionError):
            parse_exposition(text)


# ------------------------------------------------------------ helpers

def scrape(api, headers=None, auth=True):
    r = api.request("GET", "/metrics", headers=headers, auth=auth)
    assert r.status_code == 200, f"/metrics -> {r.status_code} {r.text[:300]}"
    assert r.headers.get("Content-Type", "").startswith(CONTENT_TYPE), r.headers
    return r.text


def metrics(api):
    return parse_exposition(scrape(api))


def value(fams, name, **labels):
    """The sample name{labels} (a family's or a histogram's), or 0 when absent."""
    fam = fams.get(family_of(name, fams) or name)
    for sname, slabels, v in (fam or {"samples": []})["samples"]:
        if sname == name and slabels == labels:
            return v
    return 0


def hist_count(fams, name, **labels):
    return value(fams, name + "_count", **labels)


def put_file(api, sid, path, data):
    return api.request("PUT", f"/sandbox/{sid}/files?" + urllib.parse.urlencode({"path": path}),
                       data=data, headers={"Content-Type": "application/octet-stream"})


def usage(api, sid, **query):
    qs = ("?" + urllib.parse.urlencode(query)) if query else ""
    r = api.request("GET", f"/sandbox/{sid}/metrics{qs}")
    assert r.status_code == 200, f"metrics of {sid} -> {r.status_code} {r.text[:300]}"
    return parse_json(r)


# ------------------------------------------------------------ /metrics

def test_metrics_text_is_valid_and_lists_every_family(api):
    fams = metrics(api)
    want = {
        "nanobox_sandboxes": "gauge",
        "nanobox_sandbox_slots": "gauge",
        "nanobox_sandbox_slots_free": "gauge",
        "nanobox_warm_pool_size": "gauge",
        "nanobox_warm_pool_target": "gauge",
        "nanobox_warm_pool_hits_total": "counter",
        "nanobox_warm_pool_misses_total": "counter",
        "nanobox_ports_open": "gauge",
        "nanobox_workers": "gauge",
        "nanobox_workers_max": "gauge",
        "nanobox_sandbox_creates_total": "counter",
        "nanobox_sandbox_destroys_total": "counter",
        "nanobox_api_errors_total": "counter",
        "nanobox_request_duration_seconds": "histogram",
        "nanobox_docker_request_duration_seconds": "histogram",
        "nanobox_docker_errors_total": "counter",
        "nanobox_start_time_seconds": "gauge",
        "nanobox_build_info": "gauge",
        "nanobox_reconciliations_total": "counter",
        "nanobox_reconciliation_last_time_seconds": "gauge",
    }
    for name, kind in want.items():
        assert name in fams, f"{name} missing"
        assert fams[name]["type"] == kind, (name, fams[name]["type"])
    # the calls an operator watches are listed before they ever happen
    for route in ("create", "exec", "files", "code"):
        assert any(s[1].get("route") == route for s in fams["nanobox_request_duration_seconds"]["samples"])
    assert value(fams, "nanobox_sandbox_slots") == api.stack.conf_int("max_sandboxes")
    assert value(fams, "nanobox_workers_max") == api.stack.conf_int("workers_max")
    # every state of the allowed image, zero or not
    for state in ("creating", "running", "paused", "pooled", "destroying"):
        assert any(s[1] == {"state": state, "image": IMAGE} for s in fams["nanobox_sandboxes"]["samples"])
    assert abs(value(fams, "nanobox_start_time_seconds") - time.time()) < 86400
    # the start-up reconciliations have run (nbtest.wait_reconciled waits on this)
    wait_until(lambda: value(metrics(api), "nanobox_reconciliations_total") >= 2, 20,
               what="the start-up reconciliations")
    last = value(metrics(api), "nanobox_reconciliation_last_time_seconds")
    assert value(fams, "nanobox_start_time_seconds") <= last <= time.time() + 1, last


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool not installed (src/setup/common.sh nb_install_promtool)")
def test_promtool_check_metrics_accepts_the_text(api):
    sid = api.create()
    api.exec(sid, "true")
    promtool_accepts(scrape(api))


def promtool_accepts(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), \
        f"promtool check metrics ({r.returncode}):\n{r.stdout}\n{r.stderr}\n--- text ---\n{text}"


def test_values_move_when_the_api_is_used(api, stack):
    before = metrics(api)
    sid = api.create()
    during = metrics(api)
    assert value(during, "nanobox_sandboxes", state="running", image=IMAGE) == \
        value(before, "nanobox_sandboxes", state="running", image=IMAGE) + 1
    assert value(during, "nanobox_sandbox_slots_free") == value(before, "nanobox_sandbox_slots_free") - 1
    api.exec(sid, "echo hi")
    api.exec(sid, "echo again")
    assert put_file(api, sid, "/workspace/m.txt", b"abc").status_code in (200, 201, 204)
    assert_error(api.request("GET", f"/sandbox/{random_uuid()}"), 404, "not_found")
    assert api.delete(sid).status_code == 204
    api.created.remove(sid)
    after = metrics(api)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    # warm_pool is 0 in the test stacks: every create is a cold one
    assert delta("nanobox_sandbox_creates_total", source="cold") == 1
    assert delta("nanobox_sandbox_creates_total", source="warm") == 0
    assert delta("nanobox_sandbox_destroys_total", cause="api") == 1
    assert delta("nanobox_request_duration_seconds_count", route="create") == 1
    assert delta("nanobox_request_duration_seconds_count", route="exec") == 2
    assert delta("nanobox_request_duration_seconds_count", route="files") == 1
    assert delta("nanobox_request_duration_seconds_count", route="destroy") == 1
    assert delta("nanobox_request_duration_seconds_count", route="get") == 1
    # a create takes at least a millisecond: its time is in the sum
    assert delta("nanobox_request_duration_seconds_sum", route="create") > 0.001
    assert delta("nanobox_api_errors_total", status="404", code="not_found") == 1
    # Docker: the container was created, started, inspected and removed
    for op in ("create", "start", "inspect", "remove"):
        assert delta("nanobox_docker_request_duration_seconds_count", op=op) >= 1, op
    assert value(after, "nanobox_sandboxes", state="running", image=IMAGE) == \
        value(before, "nanobox_sandboxes", state="running", image=IMAGE)


def test_expiry_is_counted_as_its_own_cause(api):
    before = metrics(api)
    sid = api.create(ttl=1)
    wait_until(lambda: api.get(sid).status_code == 404, timeout=20, what="the sandbox to expire")
    api.created.remove(sid)
    after = wait_until(
        lambda: (m := metrics(api)) and value(m, "nanobox_sandbox_destroys_total", cause="expired")
        > value(before, "nanobox_sandbox_destroys_total", cause="expired") and m,
        timeout=20, what="the expiry to be counted")
    assert value(after, "nanobox_sandbox_destroys_total", cause="api") == \
        value(before, "nanobox_sandbox_destroys_total", cause="api")


def test_workers_gauge_follows_the_pool(api, stack):
    def pool():
        fams = metrics(api)
        return value(fams, "nanobox_workers", state="busy") + value(fams, "nanobox_workers", state="idle")
    assert wait_until(lambda: pool() >= stack.conf_int("workers_min"), what="the pool's workers")
    # the pool may grow while it is asked (a busy worker wants a spare): equal once it is
    # still; the master's children that serve (not the reaper, not the events follower)
    wait_until(lambda: pool() == len(stack.workers()), what="the gauge to count the workers")


def test_metrics_needs_the_key(api):
    for hdrs in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}):
        assert_error(api.request("GET", "/metrics", headers=hdrs, auth=False), 401, "unauthorized")
    scrape(api, auth="x-api-key")


def test_metrics_token_opens_metrics_and_nothing_else(make_stack):
    token = "scrape-" + random_uuid()
    st = make_stack("metrics-token", metrics_token=token)
    scrape(st.api, headers={"Authorization": f"Bearer {token}"}, auth=False)
    scrape(st.api, headers={"X-API-Key": token}, auth=False)
    scrape(st.api)  # the API key still works
    for hdrs in ({}, {"Authorization": f"Bearer {token}x"}, {"Authorization": "Bearer " + token[:-1]}):
        assert_error(st.api.request("GET", "/metrics", headers=hdrs, auth=False), 401, "unauthorized")
    # the token is no API key: every other route refuses it
    for method, path in (("GET", "/sandbox"), ("POST", "/sandbox"), ("GET", f"/sandbox/{random_uuid()}/metrics")):
        r = st.api.request(method, path, headers={"Authorization": f"Bearer {token}"}, auth=False,
                           json={} if method == "POST" else None)
        assert_error(r, 401, "unauthorized")
    # the E2B facade's too (its error shape): it once shared the token's route flag
    for method, path in (("GET", "/sandboxes"), ("POST", "/sandboxes"), ("GET", "/v2/sandboxes"),
                         ("DELETE", f"/sandboxes/{random_uuid()}")):
        for key in (token, "e2b_" + token):
            r = st.api.request(method, path, headers={"X-API-Key": key}, auth=False,
                               json={} if method == "POST" else None)
            assert r.status_code == 401, (method, path, r.status_code, r.text)
    assert st.live_containers() == []


# ------------------------------------------------------------ /sandbox/{id}/metrics

def test_sandbox_metrics_shape_and_limits(api):
    sid = api.create()
    u = usage(api, sid)
    assert u["sandboxId"] == sid and u["state"] == "running"
    assert u["cgroup_version"] in (1, 2)
    assert u["memory"]["limit"] == DEFAULT_MEMORY
    assert 0 < u["memory"]["current"] <= DEFAULT_MEMORY
    assert u["pids"]["limit"] == DEFAULT_PIDS
    assert u["pids"]["current"] >= 1
    assert u["cpu"]["usage_usec"] > 0
    assert u["cpu"]["percent"] is None  # only measured when asked (?interval=)
    assert u["cpu"]["limit_cpus"] == 0.5
    ws = u["disk"]["workspace"]
    assert ws["path"] == "/workspace" and ws["size"] > 0 and 0 <= ws["used"] <= ws["size"]
    assert u["disk"]["tmp"]["size"] > 0


def test_sandbox_metrics_grow_when_the_sandbox_allocates(api):
    sid = api.create()
    before = usage(api, sid)
    # 64 MiB on the workspace tmpfs: its pages are the sandbox's memory too
    api.exec(sid, "head -c 67108864 /dev/zero > /workspace/blob")
    after = usage(api, sid)
    assert after["disk"]["workspace"]["used"] - before["disk"]["workspace"]["used"] >= 60 << 20
    assert after["memory"]["current"] - before["memory"]["current"] >= 48 << 20
    if after["memory"]["peak"] is not None:
        assert after["memory"]["peak"] >= after["memory"]["current"] - (1 << 20)
    # a process that holds memory: counted while it lives
    r = api.exec(sid, "python3 -c 'import os,time; b=bytearray(40<<20); os.write(1,b\"up\\n\"); "
                      "time.sleep(30)' >/dev/null 2>&1 & echo started")
    assert "started" in r["stdout"]
    wait_until(lambda: usage(api, sid)["memory"]["current"] - after["memory"]["current"] >= 32 << 20,
               timeout=20, what="the python process's 40 MiB to show")
    assert usage(api, sid)["pids"]["current"] >= 2


def test_sandbox_cpu_percent_over_an_interval(api):
    sid = api.create()
    api.exec(sid, "timeout 20 sh -c 'while :; do :; done' >/dev/null 2>&1 & echo started")
    u = wait_until(lambda: (x := usage(api, sid, interval=500))["cpu"]["percent"] > 10 and x,
                   timeout=20, what="a busy loop to show as CPU use")
    # the sandbox has half a CPU: its cgroup cannot use much more than 50 %
    assert u["cpu"]["percent"] <= 75, u["cpu"]
    # the average since its creation, once it is a second old (created_at is in seconds)
    wait_until(lambda: (usage(api, sid)["cpu"]["percent_avg"] or 0) > 0, what="percent_avg")


def test_sandbox_metrics_errors(api):
    assert_error(api.request("GET", f"/sandbox/{random_uuid()}/metrics"), 404, "not_found")
    assert_error(api.request("GET", "/sandbox/not-an-id/metrics"), 400, "bad_id")
    sid = api.create()
    for bad in ("-1", "5001", "x", "1.5", ""):
        assert_error(api.request("GET", f"/sandbox/{sid}/metrics?interval={bad}"), 400, "bad_field")
    assert_error(api.request("GET", f"/sandbox/{sid}/metrics", auth=False), 401, "unauthorized")
    assert_error(api.request("POST", f"/sandbox/{sid}/metrics"), 405, "method_not_allowed")


def test_sandbox_metrics_of_a_paused_sandbox(api):
    sid = api.create()
    r = api.request("POST", f"/sandbox/{sid}/pause")
    assert r.status_code == 200, r.text
    u = usage(api, sid)
    assert u["state"] == "paused"
    assert u["memory"]["current"] > 0
    # reading it does not wake it
    assert parse_json(api.get(sid))["state"] == "paused"


def test_docker_failures_are_counted_by_cause(make_stack):
    st = make_stack("metrics-nodocker", docker_socket="/nonexistent.sock")
    before = metrics(st.api)
    for _ in range(2):
        assert_error(st.api.request("POST", "/sandbox", json={}, timeout=60), 503, "docker_unavailable")
    after = metrics(st.api)
    assert value(after, "nanobox_api_errors_total", status="503", code="docker_unavailable") - \
        value(before, "nanobox_api_errors_total", status="503", code="docker_unavailable") == 2
    assert value(after, "nanobox_docker_errors_total", op="create", kind="unreachable") - \
        value(before, "nanobox_docker_errors_total", op="create", kind="unreachable") == 2
    # the reaper's pings fail too, every second
    wait_until(lambda: value(metrics(st.api), "nanobox_docker_errors_total", op="ping", kind="unreachable") > 0,
               what="the reaper's failed pings to be counted")
    assert value(after, "nanobox_sandbox_creates_total", source="cold") == 0
    assert st.live_containers() == []


def test_warm_pool_size_hits_and_misses(make_stack):
    st = make_stack("metrics-warm", warm_pool=1)
    api = st.api
    wait_until(lambda: value(metrics(api), "nanobox_warm_pool_size", image=IMAGE) == 1, timeout=60,
               what="the warm pool to fill")
    before = metrics(api)
    assert value(before, "nanobox_warm_pool_target", image=IMAGE) == 1
    assert value(before, "nanobox_sandboxes", state="pooled", image=IMAGE) == 1
    if shutil.which("promtool"):
        promtool_accepts(scrape(api))  # with the warm pool's series too
    api.create()
    api.create()  # at once: the pool refills on the reaper's 1 s tick, so likely a miss
    after = metrics(api)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("nanobox_warm_pool_hits_total") >= 1
    assert delta("nanobox_warm_pool_hits_total") + delta("nanobox_warm_pool_misses_total") == 2
    assert delta("nanobox_sandbox_creates_total", source="warm") == delta("nanobox_warm_pool_hits_total")
    assert delta("nanobox_sandbox_creates_total", source="cold") == delta("nanobox_warm_pool_misses_total")
    # a create that asks for more than the defaults is no miss: no pool holds its kind
    api.create(env={"A": "1"})
    assert value(metrics(api), "nanobox_warm_pool_misses_total") == value(after, "nanobox_warm_pool_misses_total")


# ------------------------------------------------------------ max_sandboxes = auto

@pytest.fixture(scope="module")
def auto_stack():
    yield from module_stack("auto-slots", {"max_sandboxes": "auto", "warm_pool": "0",
                                           "warm_pool_code": "0"})


def test_max_sandboxes_auto_sizes_the_table_from_memory_and_pids(auto_stack):
    """auto: a slot per 16 MiB of MemTotal and per 32 of kernel.pid_max,
    whichever is fewer, from 64 to 4096 (docs/CONFIG.md); the table has as
    many slots, all free, and a sandbox is created in it."""
    with open("/proc/meminfo") as f:
        mem = int(re.search(r"^MemTotal:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    want = max(64, min(4096, mem // (16 << 20), pid_max // 32))
    fams = metrics(auto_stack.api)
    assert value(fams, "nanobox_sandbox_slots") == want
    assert value(fams, "nanobox_sandbox_slots_free") == want
    sid = auto_stack.api.create()
    assert value(metrics(auto_stack.api), "nanobox_sandbox_slots_free") == want - 1
    assert auto_stack.api.delete(sid).status_code == 204
