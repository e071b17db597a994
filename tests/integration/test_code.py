"""The code interpreter: POST /sandbox/{id}/code runs cells in stateful
contexts of the sandbox's code bridge (Jupyter kernels for python, node and
bash of the bridge's own), streamed or collected; interrupt; the contexts'
CRUD; and the warm pool's code sandboxes, whose kernel is started before
they are handed out.

Real sandboxes of the code-interpreter template (nanobox-python:latest)
through the real stack. The bad-input tests need no sandbox: the host
answers them before it looks the sandbox up, so they also hold for an id
that names none.
"""

import base64
import json
import re
import threading
import time

import pytest
import requests

from nbtest import (IMAGE, MAX_BODY, PYTHON_IMAGE, assert_error, docker_ps, needs_image,
                    parse_json, png_size, random_uuid, wait_until)

pytestmark = needs_image(PYTHON_IMAGE)

END_KEYS = {"type", "context", "language", "status", "execution_count", "timed_out", "truncated",
            "kernel_restarted", "duration_ms"}
ANSWER_KEYS = {"context", "language", "stdout", "stderr", "results", "error", "execution_count",
               "status", "timed_out", "truncated", "kernel_restarted", "duration_ms"}
CTX_RE = re.compile(r"^ctx-[0-9a-f]{12}$")


# ------------------------------------------------------------ helpers

def code_raw(api, sid, code, http_timeout=120, **fields):
    return api.request("POST", f"/sandbox/{sid}/code", json={"code": code, **fields},
                       timeout=http_timeout)


def run(api, sid, code, **fields):
    """A cell run to its end: the collected answer (asserted 200)."""
    r = code_raw(api, sid, code, **fields)
    assert r.status_code == 200, f"code {code!r} -> {r.status_code} {r.text[:500]}"
    assert r.headers["Content-Type"].startswith("application/json")
    body = parse_json(r)
    assert set(body) == ANSWER_KEYS, body
    return body


def ok(api, sid, code, **fields):
    body = run(api, sid, code, **fields)
    assert body["status"] == "ok" and body["error"] is None, body
    return body


def main_text(body):
    """text/plain of the cell's main result (its value)."""
    mains = [r for r in body["results"] if r["is_main_result"]]
    assert len(mains) == 1, body
    return mains[0]["data"]["text/plain"]


def stream_open(api, sid, code, **fields):
    return requests.post(api.base + f"/sandbox/{sid}/code",
                         data=json.dumps({"code": code, "stream": True, **fields}),
                         headers=api.headers(headers={"Content-Type": "application/json"}),
                         stream=True, timeout=120)


def stream_events(api, sid, code, **fields):
    """[(seconds since the request, event), ...] of a streamed cell."""
    t0 = time.monotonic()
    r = stream_open(api, sid, code, **fields)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    out = []
    for line in r.iter_lines():
        if line:
            out.append((time.monotonic() - t0, json.loads(line)))
    return out


def new_context(api, sid, language="python", **fields):
    r = api.request("POST", f"/sandbox/{sid}/contexts", json={"language": language, **fields},
                    timeout=120)
    assert r.status_code == 201, r.text
    info = parse_json(r)
    assert CTX_RE.match(info["id"]), info
    return info


def delete_context(api, sid, ctx):
    return api.request("DELETE", f"/sandbox/{sid}/contexts/{ctx}")


def contexts(api, sid):
    r = api.request("GET", f"/sandbox/{sid}/contexts")
    assert r.status_code == 200, r.text
    return parse_json(r)["contexts"]


@pytest.fixture(scope="module")
def py_sid(stack):
    """One sandbox of the template for the tests that only add state of their
    own (a context each, or names no other test reads)."""
    sid = stack.api.create(image=PYTHON_IMAGE, ttl=1800)
    yield sid
    stack.api.delete(sid)


@pytest.fixture
def fresh(api):
    """A sandbox of the template of this test's own."""
    return api.create(image=PYTHON_IMAGE, ttl=600)


# ------------------------------------------------- what the host refuses

@pytest.fixture(scope="module")
def nowhere():
    """A sandbox id no sandbox has: validation comes before the lookup."""
    return random_uuid()


def test_empty_or_missing_code_is_400(api, nowhere):
    assert_error(code_raw(api, nowhere, ""), 400, "bad_field")
    r = api.request("POST", f"/sandbox/{nowhere}/code", json={"language": "python"})
    assert_error(r, 400, "bad_field")
    r = api.request("POST", f"/sandbox/{nowhere}/code", data="")
    assert_error(r, 400, "bad_field")


def test_code_over_code_max_bytes_is_413(make_stack):
    st = make_stack("codecap", code_max_bytes="1k")
    sid = random_uuid()
    assert_error(code_raw(st.api, sid, "x" * 1025), 413, "too_large")
    # at the limit it passes validation (and meets the missing sandbox)
    assert_error(code_raw(st.api, sid, "x" * 1024), 404, "not_found")


def test_code_over_max_body_is_413(api, nowhere):
    assert_error(code_raw(api, nowhere, "x" * MAX_BODY), 413, "too_large")


def test_unknown_language_is_422(api, nowhere):
    for lang in ("ruby", "Python", "", "python3"):
        body = assert_error(code_raw(api, nowhere, "1", language=lang), 422, "unsupported_language")
    assert "python" in body["error"]


def test_bad_timeout_is_422(api, nowhere):
    for t in (0, -1, 0.0001, 100000):
        assert_error(code_raw(api, nowhere, "1", timeout=t), 422, "out_of_range")


def test_wrong_types_and_unknown_fields_are_400(api, nowhere):
    for fields in ({"code": 1}, {"code": ["1"]}, {"code": "1", "context": 5},
                   {"code": "1", "language": 1}, {"code": "1", "stream": "yes"},
                   {"code": "1", "env": "A=1"}, {"code": "1", "timeout": "5"},
                   {"code": "1", "cell": "x"}, {"code": "1", "env": {"1BAD": "x"}},
                   {"code": "1", "env": {"A": 1}}):
        r = api.request("POST", f"/sandbox/{nowhere}/code", json=fields)
        assert_error(r, 400, "bad_field")
    assert_error(api.request("POST", f"/sandbox/{nowhere}/code", data="[1]"), 400, "bad_json")
    assert_error(api.request("POST", f"/sandbox/{nowhere}/code", json={"code": "a\u0000b"}),
                 400, "bad_field")


def test_bad_context_id_is_400(api, nowhere):
    for ctx in ("Python", "a_b", "", "x" * 65, "ctx/1", "../etc"):
        assert_error(code_raw(api, nowhere, "1", context=ctx), 400, "bad_context")
    r = api.request("POST", f"/sandbox/{nowhere}/code/interrupt", json={"context": "NO"})
    assert_error(r, 400, "bad_context")
    for ctx in ("Python", "a_b", "x" * 65, "x" * 200, "%2e%2e"):
        assert_error(api.request("DELETE", f"/sandbox/{nowhere}/contexts/{ctx}"), 400, "bad_context")
        assert_error(api.request("POST", f"/sandbox/{nowhere}/contexts/{ctx}/restart"),
                     400, "bad_context")


def test_unknown_sandbox_is_404(api, nowhere):
    assert_error(code_raw(api, nowhere, "1"), 404, "not_found")
    assert_error(api.request("POST", f"/sandbox/{nowhere}/code/interrupt"), 404, "not_found")
    assert_error(api.request("GET", f"/sandbox/{nowhere}/contexts"), 404, "not_found")
    assert_error(api.request("POST", f"/sandbox/{nowhere}/contexts", json={}), 404, "not_found")
    assert_error(api.request("DELETE", f"/sandbox/{nowhere}/contexts/python"), 404, "not_found")
    assert_error(api.request("POST", f"/sandbox/{nowhere}/contexts/python/restart"),
                 404, "not_found")


def test_routes_check_id_method_and_shape(api, nowhere):
    assert_error(code_raw(api, "not-a-uuid", "1"), 400, "bad_id")
    r = api.request("GET", f"/sandbox/{nowhere}/code")
    assert_error(r, 405, "method_not_allowed")
    assert r.headers["Allow"] == "POST"
    assert_error(api.request("PUT", f"/sandbox/{nowhere}/contexts"), 405, "method_not_allowed")
    assert_error(api.request("GET", f"/sandbox/{nowhere}/contexts/python"), 405,
                 "method_not_allowed")
    assert_error(api.request("POST", f"/sandbox/{nowhere}/code/other"), 404, "no_route")
    assert_error(api.request("POST", f"/sandbox/{nowhere}/contexts/python/stop"), 404, "no_route")


def test_bad_context_creates_are_refused(api, nowhere):
    path = f"/sandbox/{nowhere}/contexts"
    assert_error(api.request("POST", path, json={"language": "cobol"}), 422, "unsupported_language")
    assert_error(api.request("POST", path, json={"cwd": "relative"}), 400, "bad_field")
    assert_error(api.request("POST", path, json={"cwd": "/" + "a" * 1100}), 400, "bad_field")
    assert_error(api.request("POST", path, json={"language": "python", "extra": 1}), 400,
                 "bad_field")
    assert_error(api.request("POST", path + "/python/restart", json={"x": 1}), 400, "bad_field")


def test_bad_input_changes_nothing(api):
    sid = api.create(image=PYTHON_IMAGE)
    assert_error(code_raw(api, sid, "x = 1", language="ruby"), 422, "unsupported_language")
    assert_error(code_raw(api, sid, "", context="python"), 400, "bad_field")
    assert api.request("GET", f"/sandbox/{sid}").status_code == 200


# ---------------------------------------------------- a sandbox with no kernel

def test_an_image_without_a_kernel_answers_409_no_kernel(api):
    sid = api.create(image=IMAGE)
    body = assert_error(code_raw(api, sid, "1 + 1"), 409, "no_kernel")
    assert "python" in body["error"] or "interpreter" in body["error"]
    # the sandbox is none the worse for it
    assert api.exec(sid, "echo still")["stdout"] == "still\n"


# ------------------------------------------------------------- python

def test_state_persists_across_calls_not_across_contexts_or_sandboxes(api, py_sid, fresh):
    ctx = new_context(api, py_sid)["id"]
    ok(api, py_sid, "persisted = 41", context=ctx)
    body = ok(api, py_sid, "persisted + 1", context=ctx)
    assert main_text(body) == "42"
    assert body["context"] == ctx and body["language"] == "python"
    assert isinstance(body["execution_count"], int) and body["execution_count"] >= 2
    # another context of the same sandbox, and another sandbox, have no such name
    other = new_context(api, py_sid)["id"]
    for sid, c in ((py_sid, other), (fresh, None)):
        body = run(api, sid, "persisted", context=c)
        assert body["status"] == "error" and body["error"]["name"] == "NameError", body
    delete_context(api, py_sid, ctx)
    delete_context(api, py_sid, other)


def test_default_context_is_python_and_answers_the_full_shape(api, fresh):
    body = ok(api, fresh, "print('out')\nimport sys; print('err', file=sys.stderr)\n6 * 7")
    assert body["context"] == "python" and body["language"] == "python"
    assert body["stdout"] == "out\n" and body["stderr"] == "err\n"
    assert main_text(body) == "42"
    assert body["timed_out"] is False and body["truncated"] is False
    assert body["kernel_restarted"] is False
    assert isinstance(body["duration_ms"], int) and body["duration_ms"] >= 0
    assert [c["id"] for c in contexts(api, fresh)] == ["python"]


def test_env_applies_to_one_execution_only(api, py_sid):
    body = ok(api, py_sid, "import os; os.environ.get('GREETING')", env={"GREETING": "hi there"})
    assert main_text(body) == "'hi there'"
    body = ok(api, py_sid, "import os; os.environ.get('GREETING')")
    assert body["results"] == []  # None has no value to show


def test_matplotlib_figure_comes_back_as_a_png_of_its_size(api, fresh):
    body = ok(api, fresh, "\n".join([
        "%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}",
        "import matplotlib.pyplot as plt",
        "fig = plt.figure(figsize=(4, 3), dpi=50)",
        "plt.plot([1, 2, 3], [1, 4, 9])",
        "plt.show()",
    ]))
    pngs = [r for r in body["results"] if "image/png" in r["data"]]
    assert len(pngs) == 1, body["results"]
    assert pngs[0]["is_main_result"] is False  # display_data, not the cell's value
    assert png_size(base64.b64decode(pngs[0]["data"]["image/png"])) == (200, 150)
    assert "text/plain" in pngs[0]["data"]


def test_dataframe_head_comes_back_as_html(api, fresh):
    body = ok(api, fresh, "import pandas as pd\n"
                          "df = pd.DataFrame({'name': ['a', 'b', 'c'], 'n': [1, 2, 3]})\n"
                          "df.head()")
    main = [r for r in body["results"] if r["is_main_result"]][0]["data"]
    assert "<table" in main["text/html"] and "<td>b</td>" in main["text/html"]
    assert "name" in main["text/plain"]


# ------------------------------------------------ charts and table data

def charts(body):
    """The charts of a cell's results, in order, each with the PNG beside it."""
    out = []
    for r in body["results"]:
        if "chart" in r:
            assert "image/png" in r["data"], r  # the picture comes too
            assert "application/vnd.nanobox.chart+json" not in r["data"]  # not twice
            out.append(r["chart"])
    return out


def one_chart(api, sid, code):
    found = charts(ok(api, sid, "import matplotlib.pyplot as plt\n" + code))
    assert len(found) == 1, found
    return found[0]


def test_a_line_chart_comes_back_as_its_points_and_labels(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "fig, ax = plt.subplots()",
        "ax.plot([0, 1, 2, 3], [0, 1, 4, 9], label='squares')",
        "ax.plot([0, 1, 2, 3], [3, 2, 1, 0])",
        "ax.set_title('Growth')",
        "ax.set_xlabel('Time (s)')",
        "ax.set_ylabel('Distance [m]')",
        "plt.show()",
    ]))
    assert chart["type"] == "line" and chart["title"] == "Growth"
    assert (chart["x_label"], chart["y_label"]) == ("Time (s)", "Distance [m]")
    assert (chart["x_unit"], chart["y_unit"]) == ("s", "m")
    assert (chart["x_scale"], chart["y_scale"]) == ("linear", "linear")
    assert [e["label"] for e in chart["elements"]] == ["squares", "Line 1"]
    assert chart["elements"][0]["points"] == [[0, 0], [1, 1], [2, 4], [3, 9]]
    assert chart["elements"][1]["points"] == [[0, 3], [1, 2], [2, 1], [3, 0]]
    # the ticks as drawn: numbers with the labels the picture shows
    assert len(chart["x_ticks"]) == len(chart["x_tick_labels"]) >= 2
    assert all(isinstance(t, float) for t in chart["x_ticks"] + chart["y_ticks"])
    assert min(chart["x_ticks"]) >= -0.5 and max(chart["x_ticks"]) <= 3.5
    assert all(isinstance(t, str) and t for t in chart["x_tick_labels"])


def test_a_bar_chart_gives_each_bar_its_category_group_and_value(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "fig, ax = plt.subplots()",
        "ax.bar(['Author A', 'Author B', 'Author C'], [100, 200, 300], label='Books Sold')",
        "ax.set_title('Book Sales')",
        "ax.set_xlabel('Authors')",
        "ax.set_ylabel('Number of Books Sold')",
        "plt.show()",
    ]))
    assert chart["type"] == "bar" and chart["title"] == "Book Sales"
    assert (chart["x_label"], chart["y_label"]) == ("Authors", "Number of Books Sold")
    assert chart["elements"] == [
        {"label": "Author A", "group": "Books Sold", "value": 100},
        {"label": "Author B", "group": "Books Sold", "value": 200},
        {"label": "Author C", "group": "Books Sold", "value": 300},
    ]


def test_a_pie_chart_gives_each_wedge_its_angle(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "fig, ax = plt.subplots()",
        "ax.pie([90, 10], labels=['No', 'Yes'], autopct='%1.1f%%', startangle=90)",
        "plt.title('Wake up early?')",
        "plt.show()",
    ]))
    assert chart["type"] == "pie" and chart["title"] == "Wake up early?"
    assert chart["elements"] == [{"label": "No", "angle": 324, "radius": 1},
                                 {"label": "Yes", "angle": 36, "radius": 1}]
    assert "x_label" not in chart  # a pie has no axes to speak of


def test_a_scatter_chart_gives_each_set_its_points(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "plt.figure()",
        "plt.scatter([1, 2, 3], [4, 5, 6], label='Dataset 1')",
        "plt.scatter([7, 8], [9, 10], label='Dataset 2')",
        "plt.xlabel('A')",
        "plt.ylabel('B')",
        "plt.show()",
    ]))
    assert chart["type"] == "scatter" and chart["title"] is None
    assert (chart["x_label"], chart["y_label"]) == ("A", "B")
    assert chart["elements"] == [
        {"label": "Dataset 1", "points": [[1, 4], [2, 5], [3, 6]]},
        {"label": "Dataset 2", "points": [[7, 9], [8, 10]]},
    ]


def test_a_figure_of_two_axes_is_a_superchart_of_both(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "fig, axs = plt.subplots(1, 2)",
        "fig.suptitle('Two Charts')",
        "axs[0].plot([1, 2, 3], [1, 0, 1], 'r')",
        "axs[0].set_title('Wave')",
        "axs[0].grid(True)",
        "axs[1].scatter([1, 2], [3, 4], label='Dots')",
        "axs[1].set_title('Dots')",
        "axs[1].set_xlabel('X')",
        "plt.show()",
    ]))
    assert chart["type"] == "superchart" and chart["title"] == "Two Charts"
    first, second = chart["elements"]
    assert (first["type"], first["title"], first["x_label"]) == ("line", "Wave", None)
    assert first["elements"][0]["points"] == [[1, 1], [2, 0], [3, 1]]
    assert (second["type"], second["title"], second["x_label"]) == ("scatter", "Dots", "X")
    assert second["elements"] == [{"label": "Dots", "points": [[1, 3], [2, 4]]}]


def test_a_datetime_axis_says_datetime_with_iso_dates(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "import datetime",
        "days = [datetime.date(2023, 9, 1) + datetime.timedelta(days=i) for i in range(5)]",
        "plt.figure()",
        "plt.plot(days, [1, 2, 3, 2, 1], label='visits')",
        "plt.show()",
    ]))
    assert chart["type"] == "line"
    assert (chart["x_scale"], chart["y_scale"]) == ("datetime", "linear")
    assert chart["elements"][0]["points"][0] == ["2023-09-01", 1]
    assert chart["elements"][0]["points"][4] == ["2023-09-05", 1]
    assert chart["x_ticks"] and all(re.match(r"^2023-\d\d-\d\dT", t) for t in chart["x_ticks"])


def test_a_log_axis_and_a_categorical_axis_are_named(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "plt.figure()",
        "plt.plot([1, 2, 3], [10, 1000, 100000], label='growth')",
        "plt.yscale('log')",
        "plt.ylabel('Count (log scale)')",
        "plt.show()",
    ]))
    assert (chart["x_scale"], chart["y_scale"]) == ("linear", "log")
    assert chart["y_unit"] == "log scale"
    assert {100.0, 1000.0, 10000.0} <= set(chart["y_ticks"])
    chart = one_chart(api, py_sid, "plt.figure()\nplt.plot([1, 2, 3], ['A', 'B', 'C'])\nplt.show()")
    assert chart["y_scale"] == "categorical" and chart["y_tick_labels"] == ["A", "B", "C"]
    assert chart["elements"][0]["points"] == [[1, "A"], [2, "B"], [3, "C"]]


def test_a_box_plot_gives_each_box_its_quartiles_and_outliers(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "fig, ax = plt.subplots()",
        "data = {'Class A': [85, 90, 78, 92, 88], 'Class B': [95, 89, 76, 91, 84, 87]}",
        "ax.boxplot(data.values(), labels=data.keys(), patch_artist=True)",
        "ax.set_title('Scores')",
        "plt.show()",
    ]))
    assert chart["type"] == "box_and_whisker" and chart["title"] == "Scores"
    assert chart["elements"] == [
        {"label": "Class A", "min": 78, "first_quartile": 85, "median": 88,
         "third_quartile": 90, "max": 92, "outliers": []},
        {"label": "Class B", "min": 84, "first_quartile": 84.75, "median": 88,
         "third_quartile": 90.5, "max": 95, "outliers": [76]},
    ]


def test_other_figures_are_unknown_with_their_title_and_blank_ones_have_none(api, py_sid):
    chart = one_chart(api, py_sid, "\n".join([
        "fig, ax = plt.subplots()",
        "ax.add_artist(plt.Circle((0, 0), 1, fill=False))",
        "plt.title('Circle')",
        "plt.show()",
    ]))
    assert chart == {"type": "unknown", "title": "Circle", "elements": []}
    body = ok(api, py_sid, "plt.figure()\nplt.show()")
    assert charts(body) == []


def test_a_figure_as_the_cells_value_has_its_chart(api, py_sid):
    body = ok(api, py_sid, "import matplotlib.pyplot as plt\n"
                           "fig, ax = plt.subplots()\nax.bar(['x'], [3])\nfig")
    main = [r for r in body["results"] if r["is_main_result"]]
    assert len(main) == 1 and main[0]["chart"]["type"] == "bar", body["results"]
    assert main[0]["chart"]["elements"] == [{"label": "x", "group": "Group 0", "value": 3}]


def test_savefig_then_show_gives_the_png_and_the_chart(api, py_sid):
    body = ok(api, py_sid, "\n".join([
        "import os, matplotlib.pyplot as plt",
        "plt.figure()",
        "plt.plot([1, 2, 3], [3, 1, 2], label='saved')",
        "plt.savefig('/tmp/saved-chart.png')",
        "plt.show()",
        "print(os.path.getsize('/tmp/saved-chart.png') > 0)",
    ]))
    assert body["stdout"] == "True\n"
    found = charts(body)
    assert len(found) == 1 and found[0]["elements"][0]["label"] == "saved", body["results"]
    # one picture: savefig writing the file (through PIL) does not show it a second time
    assert len([r for r in body["results"] if "image/png" in r["data"]]) == 1, body["results"]
    png = [r for r in body["results"] if "chart" in r][0]["data"]["image/png"]
    assert png_size(base64.b64decode(png))[0] > 0


def test_an_image_saved_with_pil_is_shown_too(api, py_sid):
    body = ok(api, py_sid, "\n".join([
        "from PIL import Image",
        "img = Image.new('RGB', (16, 8), 'red')",
        "img.save('/tmp/red.png')",
        "print(Image.open('/tmp/red.png').size)",
    ]))
    assert body["stdout"] == "(16, 8)\n"
    pngs = [r for r in body["results"] if "image/png" in r["data"]]
    assert len(pngs) == 1, body["results"]
    assert png_size(base64.b64decode(pngs[0]["data"]["image/png"])) == (16, 8)


def test_charts_stream_as_they_are_shown(api, py_sid):
    events = [e for _, e in stream_events(api, py_sid, "\n".join([
        "import matplotlib.pyplot as plt",
        "for n in (2, 3):",
        "    plt.figure()",
        "    plt.bar(list('abc')[:n], list(range(n)))",
        "    plt.show()",
    ]))]
    results = [e for e in events if e["type"] == "result"]
    assert [len(r["chart"]["elements"]) for r in results] == [2, 3], results
    assert all("image/png" in r["data"] for r in results)


def test_a_dataframe_as_the_value_comes_with_its_columns_as_data(api, py_sid):
    body = ok(api, py_sid, "\n".join([
        "import pandas as pd",
        "pd.DataFrame({'a': [1, 2, 3], 'name': ['x', 'y', None], 'f': [1.5, float('nan'), 2],",
        "              't': pd.to_datetime(['2020-01-01', None, '2021-06-01 12:00'])})",
    ]))
    main = [r for r in body["results"] if r["is_main_result"]][0]["data"]
    assert "<table" in main["text/html"]  # as before
    assert main["application/vnd.nanobox.data+json"] == {
        "a": [1, 2, 3], "name": ["x", "y", None], "f": [1.5, None, 2.0],
        "t": ["2020-01-01T00:00:00", None, "2021-06-01T12:00:00"]}


def test_a_chart_too_big_for_a_result_is_left_out_and_the_png_kept(api, py_sid):
    # 2 lines of 20000 points: about 1.3 MB of chart, over what one result carries
    body = ok(api, py_sid, "\n".join([
        "import matplotlib.pyplot as plt, numpy as np",
        "plt.figure(figsize=(2, 2), dpi=30)",
        "x = np.random.rand(20000)",
        "plt.plot(x, np.random.rand(20000))",
        "plt.plot(x, np.random.rand(20000))",
        "plt.show()",
    ]))
    pngs = [r for r in body["results"] if "image/png" in r["data"]]
    assert len(pngs) == 1 and "chart" not in pngs[0], body["results"]
    assert body["truncated"] is True


def test_a_png_too_big_for_a_result_is_left_out_and_the_chart_kept(api, py_sid):
    # the test stack's max_output is 64 KiB: this PNG is over it, its chart is not
    body = ok(api, py_sid, "\n".join([
        "import matplotlib.pyplot as plt, numpy as np",
        "plt.figure(figsize=(10, 6), dpi=200)",
        "plt.plot(np.arange(50), np.random.rand(50), label='noise')",
        "plt.title('Big')",
        "plt.show()",
    ]))
    [r] = body["results"]
    assert "image/png" not in r["data"] and r["data"]["text/plain"].startswith("<Figure"), r
    assert r["chart"]["title"] == "Big" and len(r["chart"]["elements"][0]["points"]) == 50
    assert body["truncated"] is True


def test_an_exception_gives_name_value_and_a_traceback_naming_the_line(api, py_sid):
    body = run(api, py_sid, "a = 1\nb = 2\nraise ValueError('boom here')\nc = 3")
    assert body["status"] == "error"
    err = body["error"]
    assert err["name"] == "ValueError" and err["value"] == "boom here"
    assert "raise ValueError('boom here')" in err["traceback"]
    assert re.search(r"\b3\b", err["traceback"]), err["traceback"]
    assert "\x1b[" not in err["traceback"]  # no ANSI colours
    # the line after the raise never ran
    assert run(api, py_sid, "c")["error"]["name"] == "NameError"


def test_a_cell_queued_behind_a_failing_one_still_runs(api, py_sid):
    # the second cell waits its turn and is sent the moment the first one's
    # reply is in: a kernel that aborts its queue after an error would drop it
    for i in range(3):
        first = {}
        t = threading.Thread(target=lambda: first.update(
            body=run(api, py_sid, "import time; time.sleep(0.5); raise ValueError('first')")))
        t.start()
        time.sleep(0.2)
        body = run(api, py_sid, f"'second {i}'")
        t.join()
        assert first["body"]["error"]["value"] == "first"
        assert body["status"] == "ok" and main_text(body) == f"'second {i}'", body


def test_print_in_a_loop_streams_before_the_cell_ends(api, py_sid):
    events = stream_events(api, py_sid, "import time\n"
                                        "for i in range(3):\n"
                                        "    print(i, flush=True)\n"
                                        "    time.sleep(1)\n")
    types = [e["type"] for _, e in events]
    assert types[-1] == "end" and set(events[-1][1]) == END_KEYS, events[-1]
    assert events[-1][1]["status"] == "ok"
    outs = [(t, e) for t, e in events if e["type"] == "stdout"]
    assert "".join(e["text"] for _, e in outs) == "0\n1\n2\n"
    # the first line came while the loop still had two seconds to go
    assert events[-1][0] - outs[0][0] >= 1.5, events


def test_events_of_one_poll_come_whole_and_in_order(api, py_sid):
    # the bridge writes what one poll of the kernel brought in one go: prints
    # and displays in a tight loop must still come each once, in order
    code = ("from IPython.display import display\n"
            "for i in range(200):\n"
            "    print('line', i, flush=True)\n"
            "    display(i)\n")
    want = []
    for i in range(200):
        want += [("stdout", f"line {i}\n"), ("result", str(i))]

    def seq(events):
        # ipykernel's own IO thread may flush a print half written ("line",
        # then " 129\n"), so stdout events next to each other are joined
        # before they are cut into lines; a result between them is not
        out, text = [], ""
        for e in events + [{"type": "end"}]:
            if e["type"] == "stdout":
                text += e["text"]
                continue
            out += [("stdout", line) for line in text.splitlines(keepends=True)]
            text = ""
            if e["type"] == "result":
                out.append(("result", e["data"]["text/plain"]))
        return out

    events = [e for _, e in stream_events(api, py_sid, code)]
    assert events[-1]["type"] == "end" and events[-1]["status"] == "ok", events[-1]
    assert not events[-1]["truncated"], events[-1]
    assert seq(events) == want
    body = ok(api, py_sid, code)
    assert body["stdout"] == "".join(t for k, t in want if k == "stdout")
    assert [r["data"]["text/plain"] for r in body["results"]] == [str(i) for i in range(200)]


# What the bridge reads from the kernel, checked the way jupyter_client's
# Session.recv checks it (the bridge reads the frames itself, less the
# dates): signed with the kernel's key, never the same signature twice.
BRIDGE_RECV = r"""
import json, sys, zmq
sys.path.insert(0, "/.nanobox/kernel")
import bridge
from jupyter_client.session import Session
z = zmq.Context.instance()
a, b = z.socket(zmq.PAIR), z.socket(zmq.PAIR)
a.bind("inproc://t"); b.connect("inproc://t")
kernel = Session(key=b"the-key")
ctx = bridge.PythonContext("python", "/tmp", None)
ctx.session = Session(key=b"the-key")
def take():
    b.poll(2000)
    try:
        return ctx.recv(b)
    except ValueError as e:
        return "refused: %s" % e
out = {"none": ctx.recv(b)}
parent = kernel.msg("execute_request", {"code": "1"})
kernel.send(a, "stream", {"name": "stdout", "text": "hi"}, parent=parent)
out["good"] = take()
out["parent"] = parent["header"]["msg_id"]
Session(key=b"another-key").send(a, "stream", {"name": "stdout", "text": "forged"}, parent=parent)
out["forged"] = take()
kernel.send(a, "status", {"execution_state": "idle"}, parent=parent)
b.poll(2000)
frames = b.recv_multipart()
a.send_multipart(frames)
out["first"] = take()
a.send_multipart(frames)
out["replayed"] = take()
print(json.dumps(out))
"""


def test_the_bridge_checks_every_kernel_message_it_reads(api, py_sid):
    r = api.request("PUT", f"/sandbox/{py_sid}/files?path=/tmp/recv_check.py", data=BRIDGE_RECV.encode())
    assert r.status_code == 201, r.text
    res = api.exec(py_sid, "python3 /tmp/recv_check.py", timeout=60)
    assert res["exit_code"] == 0, res
    out = json.loads(res["stdout"])
    assert out["none"] is None
    assert out["good"] == ["stream", out["parent"], {"name": "stdout", "text": "hi"}]
    assert out["forged"].startswith("refused: invalid signature"), out
    assert out["first"] == ["status", out["parent"], {"execution_state": "idle"}]
    assert out["replayed"].startswith("refused: unsigned or replayed"), out


def test_stream_via_accept_header(api, py_sid):
    r = requests.post(api.base + f"/sandbox/{py_sid}/code", data=json.dumps({"code": "print(5)"}),
                      headers=api.headers(headers={"Content-Type": "application/json",
                                                   "Accept": "application/x-ndjson"}),
                      timeout=120)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/x-ndjson")
    events = [json.loads(x) for x in r.text.splitlines() if x]
    assert {"type": "stdout", "text": "5\n"} in events
    assert events[-1]["type"] == "end"


def test_unknown_context_is_404_streamed_or_not(api, py_sid):
    assert_error(code_raw(api, py_sid, "1", context="ctx-000000000000"), 404, "unknown_context")
    # a stream that has sent nothing yet still gets a real status
    r = stream_open(api, py_sid, "1", context="ctx-000000000000")
    assert_error(r, 404, "unknown_context")


def test_timeout_interrupts_a_busy_loop_and_keeps_the_state(api, py_sid):
    ctx = new_context(api, py_sid)["id"]
    ok(api, py_sid, "kept = 'still here'", context=ctx)
    # no wall-clock bound (a loaded sanitizer run blurs it): timed_out says
    # the cell was stopped at its timeout, and the kept variable that the
    # kernel was interrupted, not replaced
    body = run(api, py_sid, "while True:\n    pass", context=ctx, timeout=2)
    assert body["status"] == "timed_out" and body["timed_out"] is True, body
    assert main_text(ok(api, py_sid, "kept", context=ctx)) == "'still here'"
    delete_context(api, py_sid, ctx)


def test_a_dead_kernel_is_reported_and_the_next_call_restarts_it(api, py_sid):
    ctx = new_context(api, py_sid)["id"]
    ok(api, py_sid, "lost = 1", context=ctx)
    body = run(api, py_sid, "import os\nos._exit(1)", context=ctx)
    assert body["status"] == "kernel_died", body
    assert body["error"]["name"] == "KernelDied"
    body = run(api, py_sid, "1 + 1", context=ctx)
    assert body["kernel_restarted"] is True and main_text(body) == "2", body
    # a fresh kernel: the old state is gone
    assert run(api, py_sid, "lost", context=ctx)["error"]["name"] == "NameError"
    assert run(api, py_sid, "2", context=ctx)["kernel_restarted"] is False
    delete_context(api, py_sid, ctx)


def test_a_slow_kernel_start_does_not_count_against_the_cells_timeout(api):
    # The first cell of a sandbox starts its kernel, and the bridge does that
    # before the cell's timeout begins; 50 cold sandboxes at once on 2 cores
    # took ~46 s. A kernel made slow to start (a sitecustomize that sleeps
    # 13 s) must still answer a 1 s cell, not 504 after the cell's 1 s and
    # the host's 10 s of slack (issue 24, bench_burst.py --code).
    sid = api.create(image=PYTHON_IMAGE, ttl=600, env={"PYTHONPATH": "/workspace/slow"})
    api.exec(sid, "mkdir -p /workspace/slow && echo 'import time; time.sleep(13)' > /workspace/slow/sitecustomize.py")
    t0 = time.monotonic()
    body = run(api, sid, "1 + 1", timeout=1)
    assert main_text(body) == "2" and time.monotonic() - t0 >= 13, body
    api.delete(sid)


def test_a_cell_too_big_to_send_with_k_goes_after_the_hello(api, py_sid):
    """A request to the bridge over 60 KiB is sent only after its hello
    (the older exchange, which agents without kernel-pipe get); a small one
    goes with the K. Both answer alike."""
    big = "1+1  # " + "x" * 62_000
    assert len(big) < MAX_BODY - 100
    assert main_text(ok(api, py_sid, big)) == "2"
    assert main_text(ok(api, py_sid, "2+2")) == "4"


def test_two_contexts_run_at_once(api, py_sid):
    ctxs = [new_context(api, py_sid)["id"] for _ in range(2)]
    for c in ctxs:
        ok(api, py_sid, "import time", context=c)  # both kernels up and idle
    results = {}

    def one(c):
        results[c] = run(api, py_sid, "time.sleep(1)", context=c)

    threads = [threading.Thread(target=one, args=(c,)) for c in ctxs]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    took = time.monotonic() - t0
    assert all(results[c]["status"] == "ok" for c in ctxs), results
    assert took < 1.8, f"two 1 s sleeps in two contexts took {took:.2f} s"
    for c in ctxs:
        delete_context(api, py_sid, c)


def test_cells_of_one_context_run_one_at_a_time_in_order(api, py_sid):
    ctx = new_context(api, py_sid)["id"]
    ok(api, py_sid, "import time\norder = []", context=ctx)
    bodies = {}

    def cell(i, code):
        bodies[i] = run(api, py_sid, code, context=ctx)

    running = f"/tmp/slow-{ctx}"
    first = threading.Thread(target=cell, args=(0, f"open({running!r}, 'w').close()\n"
                                                   "time.sleep(1)\norder.append('slow')"))
    first.start()
    # once the slow cell runs, the next ones queue behind it (on a loaded
    # machine its request can take longer than a fixed sleep to get there)
    wait_until(lambda: api.exec(py_sid, f"test -e {running}")["exit_code"] == 0, 30,
               what="the slow cell to run")
    rest = [threading.Thread(target=cell, args=(i, f"order.append({i})")) for i in (1, 2)]
    for t in rest:
        t.start()
        time.sleep(0.1)
    for t in [first] + rest:
        t.join(60)
    assert all(bodies[i]["status"] == "ok" for i in range(3)), bodies
    assert main_text(ok(api, py_sid, "order", context=ctx)) == "['slow', 1, 2]"
    counts = [bodies[i]["execution_count"] for i in range(3)]
    assert counts == sorted(counts), counts
    delete_context(api, py_sid, ctx)


def test_output_over_max_output_is_cut_and_said(api, py_sid):
    # the test stacks keep 64 KiB of output (max_output)
    body = run(api, py_sid, "for i in range(4000):\n    print('x' * 99)")
    assert body["status"] == "ok" and body["truncated"] is True, {k: body[k] for k in END_KEYS - {"type"}}
    assert 60000 <= len(body["stdout"]) <= 65536
    assert body["stdout"].startswith("x" * 99 + "\n")
    # the context is still fine, and a small cell is not truncated
    body = ok(api, py_sid, "print('small')")
    assert body["stdout"] == "small\n" and body["truncated"] is False


def test_a_kernel_killed_for_memory_is_reported_and_replaced(api, fresh):
    ok(api, fresh, "before = 1")
    # the sandbox's memory limit (256 MiB in the test stacks): the kernel is OOM-killed
    body = run(api, fresh, "hog = bytearray(1024 * 1024 * 1024)\nhog[::4096] = b'x' * (len(hog) // 4096)")
    assert body["status"] in ("kernel_died", "error"), body
    if body["status"] == "error":  # the allocation itself was refused
        assert body["error"]["name"] == "MemoryError", body
    else:
        assert body["error"]["name"] == "KernelDied", body
        after = run(api, fresh, "'alive'")
        assert after["kernel_restarted"] is True and main_text(after) == "'alive'", after
    # the sandbox and its other contexts are untouched
    assert api.exec(fresh, "echo up")["stdout"] == "up\n"


# ------------------------------------------------ javascript and bash

def test_javascript_context_keeps_state(api, py_sid):
    ctx = new_context(api, py_sid, language="javascript")
    assert ctx["language"] == "javascript"
    ok(api, py_sid, "var answer = 40;", context=ctx["id"])
    body = ok(api, py_sid, "answer += 2; console.log(answer);", context=ctx["id"])
    assert body["stdout"] == "42\n" and body["language"] == "javascript"
    # "js" names the same language, and its default context keeps state too
    ok(api, py_sid, "globalThis.seen = 'yes';", language="js")
    body = ok(api, py_sid, "console.log(seen)", language="javascript")
    assert body["stdout"] == "yes\n" and body["context"] == "javascript"
    delete_context(api, py_sid, ctx["id"])


def test_javascript_modules_and_top_level_await(api, py_sid):
    """ES modules, import() and top-level await in a javascript context:
    the awaited value is the result, and what an async cell declares
    (const, let, function, class, imports) is there in the next cell."""
    ctx = new_context(api, py_sid, language="javascript")["id"]
    body = ok(api, py_sid, "import { readFileSync } from 'fs'\nconsole.log(typeof readFileSync)", context=ctx)
    assert body["stdout"] == "function\n", body
    assert main_text(ok(api, py_sid, "await Promise.resolve('Hello World!')", context=ctx)) == "Hello World!"
    ok(api, py_sid, "import fs from 'fs'\nfs.writeFileSync('esm-mod.mjs', 'export const x = 40; export default (n) => n + 1')",
       context=ctx)
    ok(api, py_sid, "import inc, { x } from './esm-mod.mjs'\n"
       "const base = await Promise.resolve(x)\nlet more = 1\n"
       "function total() { return inc(base) + more }\nclass Box { get v() { return total() } }", context=ctx)
    body = ok(api, py_sid, "const { x: again } = await import('./esm-mod.mjs');\n[new Box().v, again, typeof readFileSync]",
              context=ctx)
    assert json.loads(body["results"][0]["data"]["text/plain"].replace("'", '"')) == [42, 40, "function"], body
    # a name declared again in a later cell is reassigned, as a notebook re-run would
    assert main_text(ok(api, py_sid, "const base = 1; base", context=ctx)) == "1"
    # an error thrown after an await is the cell's error
    body = run(api, py_sid, "await null\nthrow new TypeError('late')", context=ctx)
    assert body["status"] == "error" and body["error"]["name"] == "TypeError", body
    assert body["error"]["value"] == "late", body
    # a cell that waits forever is interrupted at its timeout; the context
    # and what it holds stay (no restart), and so they do after a rejection
    # nobody waits for
    body = run(api, py_sid, "await new Promise(() => {})", context=ctx, timeout=1)
    assert body["status"] == "timed_out" and body["kernel_restarted"] is False, body
    ok(api, py_sid, "Promise.reject(new Error('unseen')); null", context=ctx)
    body = ok(api, py_sid, "await new Promise((r) => setTimeout(r, 50)); typeof inc", context=ctx)
    assert main_text(body) == "function" and body["kernel_restarted"] is False, body
    delete_context(api, py_sid, ctx)


def test_typescript_context(api, py_sid):
    """language typescript (or ts): each cell transpiled, types erased, the
    state kept across cells like javascript's; modules and await as there."""
    ctx = new_context(api, py_sid, language="typescript")
    assert ctx["language"] == "typescript"
    body = ok(api, py_sid, "const message: string = 'Hello World!'; console.log(message)", context=ctx["id"])
    assert body["stdout"] == "Hello World!\n" and body["language"] == "typescript", body
    ok(api, py_sid, "interface P { x: number }\nfunction norm(p: P): number { return Math.abs(p.x) }\n"
       "enum Color { Red, Green }\nimport { join } from 'path'\nlet n: number = await Promise.resolve(-41)",
       context=ctx["id"])
    assert main_text(ok(api, py_sid, "norm({x: n} as P) + Color.Green", context=ctx["id"])) == "42"
    assert main_text(ok(api, py_sid, "join('a', message.length.toString())", context=ctx["id"])) == "a/12"
    # a type error is not checked; a syntax error is the cell's error
    body = run(api, py_sid, "let broken: = 1", context=ctx["id"])
    assert body["status"] == "error" and body["error"]["name"] == "SyntaxError", body
    # "ts" names the default typescript context
    body = ok(api, py_sid, "const k: number = 2; k * 21", language="ts")
    assert main_text(body) == "42" and body["context"] == "typescript", body
    assert main_text(ok(api, py_sid, "k", language="typescript")) == "2"
    delete_context(api, py_sid, ctx["id"])


def test_bash_context_keeps_state(api, py_sid):
    ok(api, py_sid, "COUNT=5; cd /tmp; export SEEN=bash", language="bash")
    body = ok(api, py_sid, 'echo "$COUNT $(pwd) $SEEN"', language="bash")
    assert body["stdout"] == "5 /tmp bash\n" and body["context"] == "bash"
    body = run(api, py_sid, "false", language="bash")
    assert body["context"] == "bash"


def test_a_context_of_another_language_is_422(api, py_sid):
    ctx = new_context(api, py_sid, language="bash")["id"]
    assert_error(code_raw(api, py_sid, "1", context=ctx, language="python"), 422,
                 "language_mismatch")
    delete_context(api, py_sid, ctx)


# ------------------------------------------------------------ contexts

def test_contexts_crud_and_restart_clears_state(api, fresh):
    info = new_context(api, fresh, cwd="/tmp", env={"CTX_ENV": "set"})
    ctx = info["id"]
    assert info["language"] == "python" and info["cwd"] == "/tmp"
    assert info["state"] == "idle" and info["executions"] == 0
    assert isinstance(info["created_at"], int)
    assert ctx in [c["id"] for c in contexts(api, fresh)]
    body = ok(api, fresh, "import os\nkept = 1\n(os.getcwd(), os.environ['CTX_ENV'])", context=ctx)
    assert main_text(body) == "('/tmp', 'set')"
    listed = {c["id"]: c for c in contexts(api, fresh)}
    assert listed[ctx]["executions"] == 1

    r = api.request("POST", f"/sandbox/{fresh}/contexts/{ctx}/restart")
    assert r.status_code == 200, r.text
    assert parse_json(r)["id"] == ctx
    body = run(api, fresh, "kept", context=ctx)
    assert body["error"]["name"] == "NameError", body

    assert delete_context(api, fresh, ctx).status_code == 204
    assert ctx not in [c["id"] for c in contexts(api, fresh)]
    assert_error(delete_context(api, fresh, ctx), 404, "unknown_context")
    assert_error(code_raw(api, fresh, "1", context=ctx), 404, "unknown_context")
    assert_error(api.request("POST", f"/sandbox/{fresh}/contexts/{ctx}/restart"), 404,
                 "unknown_context")


def test_context_in_a_missing_cwd_is_refused(api, py_sid):
    r = api.request("POST", f"/sandbox/{py_sid}/contexts", json={"cwd": "/no/such/dir"})
    assert_error(r, 400, "bad_field")


@pytest.mark.parametrize("language", ["python", "bash", "javascript"])
def test_a_context_in_a_cwd_its_user_cannot_enter_is_refused(api, py_sid, language):
    """/root is root's (mode 700): a 400 saying so, not a kernel failing to start (500)."""
    r = api.request("POST", f"/sandbox/{py_sid}/contexts", json={"cwd": "/root", "language": language},
                    timeout=60)
    assert_error(r, 400, "bad_field")
    assert "/root" in r.json()["error"], r.text
    assert all(c["cwd"] != "/root" for c in contexts(api, py_sid))


READ_VAR = {"python": "import os; print(os.environ.get('NB_VAR', 'unset'))",
            "bash": "echo ${NB_VAR-unset}",
            "javascript": "console.log(process.env.NB_VAR ?? 'unset')"}


@pytest.mark.parametrize("language", ["python", "bash", "javascript"])
def test_a_contexts_env_and_cwd_hold_and_a_runs_env_overrides_them_for_that_run(api, py_sid, language):
    ctx = new_context(api, py_sid, language=language, cwd="/tmp", env={"NB_VAR": "context"})
    assert (ctx["language"], ctx["cwd"]) == (language, "/tmp")
    read = READ_VAR[language]
    try:
        assert ok(api, py_sid, read, context=ctx["id"])["stdout"] == "context\n"
        assert ok(api, py_sid, read, context=ctx["id"], env={"NB_VAR": "run"})["stdout"] == "run\n"
        # the context's own value is back for the next run
        assert ok(api, py_sid, read, context=ctx["id"])["stdout"] == "context\n"
        pwd = {"python": "import os; print(os.getcwd())", "bash": "pwd",
               "javascript": "console.log(process.cwd())"}[language]
        assert ok(api, py_sid, pwd, context=ctx["id"])["stdout"] == "/tmp\n"
        # a variable the context did not have is gone again after the run
        assert ok(api, py_sid, read.replace("NB_VAR", "NB_OTHER"), context=ctx["id"],
                  env={"NB_OTHER": "x"})["stdout"] == "x\n"
        assert ok(api, py_sid, read.replace("NB_VAR", "NB_OTHER"), context=ctx["id"])["stdout"] == "unset\n"
    finally:
        delete_context(api, py_sid, ctx["id"])


# ------------------------------------------------------------ interrupt

def test_interrupt_stops_a_running_cell(api, py_sid):
    ctx = new_context(api, py_sid)["id"]
    ok(api, py_sid, "after = 'kept'", context=ctx)
    box = {}

    running = f"/tmp/busy-{ctx}"

    def busy():
        box["body"] = run(api, py_sid, f"open({running!r}, 'w').close()\nwhile True:\n    pass",
                          context=ctx, timeout=60)
        box["at"] = time.monotonic()

    t = threading.Thread(target=busy)
    t.start()
    # an interrupt before the cell runs would find the context idle
    wait_until(lambda: api.exec(py_sid, f"test -e {running}")["exit_code"] == 0, 30,
               what="the busy cell to run")
    r = api.request("POST", f"/sandbox/{py_sid}/code/interrupt", json={"context": ctx})
    assert r.status_code == 200, r.text
    assert parse_json(r) == {"interrupted": True, "context": ctx}
    asked = time.monotonic()
    t.join(30)
    assert "body" in box, "the cell did not end after the interrupt"
    assert box["at"] - asked < 5
    assert box["body"]["status"] in ("interrupted", "error"), box["body"]
    assert box["body"]["timed_out"] is False
    assert main_text(ok(api, py_sid, "after", context=ctx)) == "'kept'"
    # an idle context, or the default one, takes an interrupt too
    r = api.request("POST", f"/sandbox/{py_sid}/code/interrupt", json={"context": ctx})
    assert r.status_code == 200
    delete_context(api, py_sid, ctx)


def test_interrupt_of_an_unknown_context_is_404(api, py_sid):
    r = api.request("POST", f"/sandbox/{py_sid}/code/interrupt",
                    json={"context": "ctx-000000000000"})
    assert_error(r, 404, "unknown_context")


def test_a_client_that_leaves_interrupts_its_cell(api, py_sid):
    ctx = new_context(api, py_sid)["id"]
    r = stream_open(api, py_sid, "print('started', flush=True)\nwhile True:\n    pass",
                    context=ctx, timeout=60)
    assert r.status_code == 200
    for line in r.iter_lines():
        if line and json.loads(line).get("type") == "stdout":
            break
    r.close()  # the client goes away mid-cell
    t0 = time.monotonic()
    body = run(api, py_sid, "'next'", context=ctx, http_timeout=30)
    assert main_text(body) == "'next'"
    assert time.monotonic() - t0 < 10, "the abandoned cell kept the context busy"
    delete_context(api, py_sid, ctx)


# ------------------------------------------------------------ warm pool

def test_a_warm_code_sandbox_has_its_kernel_running(make_stack):
    st = make_stack("codewarm", warm_pool="0", warm_pool_code="1")
    wait_until(lambda: st.api.request("GET", "/healthz").json()["warm"] == 1, timeout=120,
               what="one warm code sandbox")
    warm = set(docker_ps(st.instance))
    info = st.api.create_info(image=PYTHON_IMAGE, ttl=300)
    sid = info["sandboxId"]
    assert f"nanobox-{sid}" in warm  # handed out from the pool
    assert info["image"] == PYTHON_IMAGE
    # its default python kernel was started before it was handed out
    listed = contexts(st.api, sid)
    assert [c["id"] for c in listed] == ["python"] and listed[0]["state"] == "idle", listed
    t0 = time.monotonic()
    body = ok(st.api, sid, "1 + 1")
    assert main_text(body) == "2" and body["kernel_restarted"] is False
    assert time.monotonic() - t0 < 2, "the first cell waited for a kernel"
    # a plain create (the default image) is not served from the code pool
    plain = st.api.create()
    assert f"nanobox-{plain}" not in warm
