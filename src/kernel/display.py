"""nanobox code bridge: structured results of a python context.

The bridge loads this file into each python kernel it starts (it is not
on the kernel's sys.path; nothing of it is left in the user's namespace)
and calls install(), which adds two IPython display formatters:

- CHART_MIME for a matplotlib Figure: what the figure shows, as data
  (E2B's chart shape: type line, scatter, bar, pie, box_and_whisker,
  superchart or unknown; title, axis labels and units, ticks, scales, and
  the elements' data), next to the PNG the inline backend makes;
- DATA_MIME for a pandas DataFrame: its columns, {column: [values]}.

It also makes a PIL image saved to a file show itself, as E2B's
interpreter does.

Both are registered by name (no import of matplotlib or pandas until the
user has them) and never raise: a figure they cannot read gets no chart,
the PNG and the rest of the result are unchanged.
"""

import datetime
import math
import re
import sys

CHART_MIME = "application/vnd.nanobox.chart+json"
DATA_MIME = "application/vnd.nanobox.data+json"
# A DataFrame with more cells than this gets no DATA_MIME (its text and
# HTML come as ever): the JSON would not fit a result anyway.
DATA_MAX_CELLS = 100000
# Points of one chart element: past this the element is cut (the PNG is whole).
MAX_POINTS = 20000

MATH = re.compile(r"\\mathdefault\{(.*)\}")
UNIT = re.compile(r"\s\(([^()]*)\)|\[([^\[\]]*)\]")


# ------------------------------------------------------------------ values


def clean(v):
    """v as a JSON value: numbers as float or int (NaN and inf as None), dates ISO 8601."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if not hasattr(v, "__len__"):
        try:
            if v != v:  # NaN, NaT
                return None
        except (TypeError, ValueError):  # pandas.NA has no truth value
            pass
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [x if type(x) is int or (type(x) is float and math.isfinite(x)) else clean(x) for x in v]
    kind = type(v).__module__.split(".")[0]
    if kind == "numpy":
        import numpy

        if isinstance(v, numpy.datetime64):
            if numpy.isnat(v):
                return None
            return str(v.astype("datetime64[s]"))
        if isinstance(v, numpy.timedelta64):
            return str(v)
        if isinstance(v, numpy.ndarray):
            return [clean(x) for x in v.tolist()]
        if hasattr(v, "item"):
            return clean(v.item())
    if kind == "pandas":
        try:
            import pandas

            if v is pandas.NaT or (not isinstance(v, type) and pandas.isna(v) is True):
                return None
        except (ImportError, TypeError, ValueError):
            pass
        if hasattr(v, "isoformat"):
            return v.isoformat()
    if hasattr(v, "__float__") and not isinstance(v, complex):
        try:
            return clean(float(v))
        except (TypeError, ValueError):
            pass
    return str(v)


def num(v):
    """A number as a float with float noise of the drawing removed (None if none)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        return None
    return float("%.10g" % f)


def text_or_none(s):
    return s if s else None


# ------------------------------------------------------------------ axes


def is_date_axis(axis):
    import matplotlib.dates as mdates

    conv = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    if conv is not None and "Date" in type(conv).__name__:
        return True
    return isinstance(axis.get_major_locator(), mdates.DateLocator)


def is_category_axis(axis):
    conv = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    return conv is not None and type(conv).__name__ == "StrCategoryConverter"


def axis_scale(axis, scale):
    if is_date_axis(axis):
        return "datetime"
    if is_category_axis(axis):
        return "categorical"
    return scale


def date_of(x):
    """A matplotlib date number as ISO 8601."""
    import matplotlib.dates as mdates

    return mdates.num2date(x).isoformat()


def ticks(axis):
    """The major ticks in view: (locations, labels as the axis shows them)."""
    locs = [float(x) for x in axis.get_major_locator()() if math.isfinite(x)]
    # in view, as drawn (a log axis compares logarithms)
    t = axis.get_transform()
    lo, hi = sorted(float(v) for v in t.transform(list(axis.get_view_interval())))
    room = (hi - lo) * 1e-9
    locs = [x for x, tx in zip(locs, t.transform(locs) if locs else []) if lo - room <= tx <= hi + room]
    fmt = axis.get_major_formatter()
    try:
        labels = [MATH.sub(r"\1", str(s)).strip("$") for s in fmt.format_ticks(locs)]
    except Exception:  # noqa: BLE001 - a formatter of the user's
        labels = ["" for _ in locs]
    return locs, labels


def label_at(axis, x, seen=None):
    """What the axis says at x: a category's name, a tick's label, else x.
    seen: a dict that keeps the axis's ticks between calls (many bars)."""
    if is_category_axis(axis):
        units = getattr(axis, "units", None)
        for name, i in getattr(units, "_mapping", {}).items():
            if abs(i - x) < 1e-9:
                return str(name)
    if seen is None:
        seen = {}
    if id(axis) not in seen:
        seen[id(axis)] = ticks(axis)
    locs, labels = seen[id(axis)]
    for loc, label in zip(locs, labels):
        if abs(loc - x) <= 1e-9 * max(1.0, abs(x)) and label:
            return label
    if is_date_axis(axis):
        return date_of(x)
    return "%g" % x


def unit_of(label):
    if not label:
        return None
    m = UNIT.search(label)
    if m is None:
        return None
    return m.group(1) if m.group(1) is not None else m.group(2)


def title_of(ax):
    for loc in ("center", "left", "right"):
        t = ax.get_title(loc)
        if t:
            return t
    return None


def base(kind, ax):
    return {"type": kind, "title": title_of(ax), "elements": []}


def planar(kind, ax, category_first=False):
    """A chart with two axes: labels and units (x the category axis when category_first)."""
    chart = base(kind, ax)
    xl, yl = text_or_none(ax.get_xlabel()), text_or_none(ax.get_ylabel())
    if category_first:
        xl, yl = yl, xl
    chart.update({"x_label": xl, "y_label": yl, "x_unit": unit_of(xl), "y_unit": unit_of(yl)})
    return chart


def point_axes(chart, ax):
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        locs, labels = ticks(axis)
        if is_date_axis(axis):
            chart[name + "_ticks"] = [date_of(x) for x in locs]
        else:
            chart[name + "_ticks"] = [num(x) for x in locs]
        chart[name + "_tick_labels"] = labels
        chart[name + "_scale"] = axis_scale(axis, scale)


def coord(v, date_axis):
    """A point's coordinate: dates (objects, or numbers on a date axis) as ISO 8601."""
    if date_axis and isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return date_of(v) if math.isfinite(v) else None
        except (ValueError, OverflowError):
            return None
    return clean(v)


def as_list(values):
    """Plotted values as a list of Python values (an array in one go; masked ones None)."""
    if hasattr(values, "tolist"):
        return values.tolist()  # numpy: float, int, datetime; a masked value is None
    return list(values)


def points(xs, ys, ax):
    dx, dy = is_date_axis(ax.xaxis), is_date_axis(ax.yaxis)
    xs, ys = clean(as_list(xs)[:MAX_POINTS]), clean(as_list(ys)[:MAX_POINTS])
    if dx:
        xs = [coord(x, True) for x in xs]
    if dy:
        ys = [coord(y, True) for y in ys]
    return [[x, y] for x, y in zip(xs, ys)]


def auto_label(label, word):
    """matplotlib's name for an unnamed artist (_child3) as E2B says it (Line 3)."""
    m = re.fullmatch(r"_(?:child|container)(\d+)", label or "")
    return "%s %s" % (word, m.group(1)) if m else label


def is_reference_line(line):
    """axhline, axvline and the like: two points on one horizontal or vertical."""
    xs, ys = line.get_xdata(), line.get_ydata()
    if len(xs) != 2 or len(ys) != 2:
        return False
    try:
        return bool(xs[0] == xs[1] or ys[0] == ys[1])
    except (TypeError, ValueError):
        return False


def line_chart(ax):
    chart = planar("line", ax)
    point_axes(chart, ax)
    for line in ax.get_lines():
        if is_reference_line(line):
            continue
        chart["elements"].append(
            {
                "label": auto_label(line.get_label(), "Line"),
                "points": points(line.get_xdata(), line.get_ydata(), ax),
            }
        )
    return chart


def scatter_chart(ax):
    chart = planar("scatter", ax)
    point_axes(chart, ax)
    for coll in ax.collections:
        offs = coll.get_offsets()
        chart["elements"].append({"label": coll.get_label(), "points": points(offs[:, 0], offs[:, 1], ax)})
    return chart


def bar_chart(ax):
    containers = [c for c in ax.containers if type(c).__name__ == "BarContainer"]
    horizontal = bool(containers) and all(getattr(c, "orientation", None) == "horizontal" for c in containers)
    chart = planar("bar", ax, category_first=horizontal)
    seen = {}
    for c in containers:
        group = auto_label(c.get_label(), "Group")
        for rect in c.patches:
            if horizontal:
                at, value, axis = rect.get_y() + rect.get_height() / 2, rect.get_width(), ax.yaxis
            else:
                at, value, axis = rect.get_x() + rect.get_width() / 2, rect.get_height(), ax.xaxis
            chart["elements"].append({"label": label_at(axis, at, seen), "group": group, "value": num(value)})
    return chart


def pie_chart(ax):
    chart = base("pie", ax)
    for w in ax.patches:
        chart["elements"].append(
            {"label": w.get_label(), "angle": round(abs(w.theta2 - w.theta1), 4), "radius": num(w.r)}
        )
    return chart


def box_chart(ax):
    """Box plots (patch_artist=True) from their geometry: box, median, whiskers, fliers."""
    segs = []  # 2-point lines as ((x0, y0), (x1, y1))
    fliers = []
    for line in ax.get_lines():
        xs, ys = [num(v) for v in line.get_xdata()], [num(v) for v in line.get_ydata()]
        if len(xs) == 2 and len(ys) == 2:
            segs.append(((xs[0], ys[0]), (xs[1], ys[1])))
        else:
            fliers.extend(p for p in zip(xs, ys) if None not in p)
    flat = sum(1 for a, b in segs if a[1] == b[1])  # horizontal: medians and caps
    upright = sum(1 for a, b in segs if a[0] == b[0])  # vertical: whiskers
    vertical = flat >= upright  # boxes standing up: the categories on x
    chart = planar("box_and_whisker", ax, category_first=not vertical)

    def across(p):  # a point as (position along the category axis, value)
        return (p[0], p[1]) if vertical else (p[1], p[0])

    for patch in ax.patches:
        verts = patch.get_path().vertices
        pts = [across((num(x), num(y))) for x, y in verts]
        pos = [p[0] for p in pts if p[0] is not None]
        val = [p[1] for p in pts if p[1] is not None]
        if not pos or not val:
            continue
        lo, hi, q1, q3 = min(pos), max(pos), min(val), max(val)
        box = {
            "label": label_at(ax.xaxis if vertical else ax.yaxis, (lo + hi) / 2),
            "min": q1,
            "first_quartile": q1,
            "median": None,
            "third_quartile": q3,
            "max": q3,
            "outliers": [],
        }
        for a, b in segs:
            (pa, va), (pb, vb) = across(a), across(b)
            if None in (pa, va, pb, vb) or not (lo <= min(pa, pb) and max(pa, pb) <= hi):
                continue
            if va == vb and q1 <= va <= q3 and pa != pb and box["median"] is None and min(pa, pb) == lo:
                box["median"] = va  # spans the box: the median
            elif pa == pb:  # a whisker: from the box's edge out
                if max(va, vb) == q1 or (min(va, vb) < q1 and max(va, vb) <= q1):
                    box["min"] = min(box["min"], va, vb)
                elif min(va, vb) == q3 or (max(va, vb) > q3 and min(va, vb) >= q3):
                    box["max"] = max(box["max"], va, vb)
        for p in fliers:
            pp, pv = across(p)
            if lo <= pp <= hi:
                box["outliers"].append(pv)
        if box["median"] is None:
            box["median"] = num((q1 + q3) / 2)
        chart["elements"].append(box)
    return chart


def kind_of(ax):
    """The kind of chart an Axes holds, from the artists on it (text aside)."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text

    children = getattr(ax, "_children", None)
    if children is None:  # matplotlib before 3.5
        children = [*ax.lines, *ax.collections, *ax.patches, *ax.images, *ax.artists, *ax.tables]
    arts = [a for a in children if not isinstance(a, Text)]
    if all(isinstance(a, Line2D) for a in arts):
        return "line"
    if any(isinstance(a, PathPatch) for a in arts) and all(isinstance(a, (PathPatch, Line2D)) for a in arts):
        return "box_and_whisker"
    arts = [a for a in arts if not (isinstance(a, Line2D) and is_reference_line(a))]
    for kind, cls in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if arts and all(isinstance(a, cls) for a in arts):
            return kind
    return "unknown"


MAKERS = {
    "line": line_chart,
    "scatter": scatter_chart,
    "bar": bar_chart,
    "pie": pie_chart,
    "box_and_whisker": box_chart,
}


def axes_chart(ax):
    kind = kind_of(ax)
    maker = MAKERS.get(kind)
    if maker is None:
        return base("unknown", ax)
    try:
        return maker(ax)
    except Exception:  # noqa: BLE001 - a figure this does not understand
        return base("unknown", ax)


def figure_chart(fig):
    """The chart of a Figure as a dict, or None (no axes with data)."""
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    if not axes or not any(ax.has_data() for ax in axes):
        return None
    if len(axes) == 1:
        return axes_chart(axes[0])
    sup = getattr(fig, "_suptitle", None)
    return {
        "type": "superchart",
        "title": text_or_none(sup.get_text()) if sup is not None else None,
        "elements": [axes_chart(ax) for ax in axes],
    }


def frame_data(df):
    """A DataFrame's columns as {name: [values]} (E2B's `data`), or None."""
    if df.size > DATA_MAX_CELLS:
        return None
    out = {}
    for name in df.columns:
        out[str(name)] = clean(df[name].tolist())
    return out


# ------------------------------------------------------------------ install


def is_a(obj, module, name):
    """Is obj of the class module.name (or of a subclass)? Without importing module."""
    return any(c.__module__ == module and c.__name__ == name for c in type(obj).__mro__)


def show_saved_images():
    """A PIL image saved to a file is also shown (as E2B's interpreter does):
    the cell's results have the picture it wrote."""
    try:
        from PIL import Image
    except ImportError:
        return
    save = Image.Image.save
    if getattr(save, "nanobox_shows", False):
        return

    def save_and_show(self, fp, format=None, **params):  # noqa: A002 - PIL's own name
        done = save(self, fp, format, **params)
        # matplotlib's savefig writes through PIL: that figure shows as itself (with its chart)
        caller = sys._getframe(1).f_globals.get("__name__", "")  # noqa: SLF001
        if caller.startswith("matplotlib"):
            return done
        if isinstance(fp, (str, bytes)) or hasattr(fp, "__fspath__"):
            try:
                from IPython.display import display

                display(self)  # its PNG is made in memory, not through this save
            except Exception:  # noqa: BLE001 - the file is written; showing it is a bonus
                pass
        return done

    save_and_show.nanobox_shows = True
    Image.Image.save = save_and_show


def install(ip):
    """Add the chart and data formatters to the shell ip (idempotent)."""
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    class Structured(BaseFormatter):
        """Calls make(obj) for objects of one class; None (no entry) for the others.

        By class name at each call, not registered as a type printer: the
        inline backend takes the Figure printers out of every formatter
        when pyplot is first imported.
        """

        _return_type = (dict,)

        def __init__(self, module, name, make, **kw):
            super().__init__(**kw)
            self.match = (module, name)
            self.make = make

        def __call__(self, obj):
            if not self.enabled or not is_a(obj, *self.match):
                return None
            try:
                return self.make(obj)
            except Exception:  # noqa: BLE001 - never in the way of the result
                return None

    class Chart(Structured):
        format_type = Unicode(CHART_MIME)
        print_method = ObjectName("_repr_nanobox_chart_")

    class Data(Structured):
        format_type = Unicode(DATA_MIME)
        print_method = ObjectName("_repr_nanobox_data_")

    formatters = ip.display_formatter.formatters
    # after image/png: the PNG's drawing has laid out the figure this reads
    formatters.pop(CHART_MIME, None)
    formatters.pop(DATA_MIME, None)
    formatters[CHART_MIME] = Chart("matplotlib.figure", "Figure", figure_chart, parent=ip.display_formatter)
    formatters[DATA_MIME] = Data("pandas.core.frame", "DataFrame", frame_data, parent=ip.display_formatter)
    show_saved_images()
