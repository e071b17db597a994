#!/usr/bin/python3
"""bench_chart.py - what a figure's chart costs beside its PNG.

For figures of each chart type (and big ones: 1000 scatter points, 10000
line points), the time the inline backend takes to draw the PNG
(IPython's print_figure, as a shown figure gets it) against the time
src/kernel/display.py takes to read the chart from the same figure and
encode it as JSON: medians of -n samples, and the ratio (PNG + chart) /
PNG. Runs in one container of the template image, limited to one CPU,
with src/kernel mounted read-only; no nanobox service needed.

  sudo tests/bench/bench_chart.py [-n 9]
"""
import argparse
import os
import subprocess
import sys

IMAGE = "nanobox-python:latest"
KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "kernel")

INSIDE = r"""
import datetime, json, statistics, sys, time
sys.path.insert(0, "/k")
import matplotlib
matplotlib.use("agg")
import matplotlib.pyplot as plt, numpy as np
from IPython.core.pylabtools import print_figure
import display

def figures():
    x = np.linspace(0, 10, 100)
    f, ax = plt.subplots(); ax.plot(x, np.sin(x), label="sin"); yield "line, 100 points", f
    f, ax = plt.subplots(); ax.bar(list("abcd"), [1, 2, 3, 4]); yield "bar, 4 bars", f
    f, ax = plt.subplots(); ax.pie([1, 2, 3]); yield "pie, 3 wedges", f
    f, ax = plt.subplots(); ax.boxplot([np.random.rand(50) for _ in range(3)], patch_artist=True)
    yield "box and whisker, 3", f
    f, axs = plt.subplots(1, 2); axs[0].plot([1, 2, 3]); axs[1].scatter([1, 2], [3, 4])
    yield "superchart, 2 axes", f
    days = [datetime.date(2023, 1, 1) + datetime.timedelta(days=i) for i in range(365)]
    f, ax = plt.subplots(); ax.plot(days, np.random.rand(365)); yield "dates, 365 points", f
    f, ax = plt.subplots(); ax.scatter(np.random.rand(1000), np.random.rand(1000))
    yield "scatter, 1000 points", f
    f, ax = plt.subplots(); ax.plot(np.random.rand(10000)); yield "line, 10000 points", f

n = int(sys.argv[1])
print("| figure | PNG p50 | chart p50 (JSON bytes) | (PNG + chart) / PNG |")
print("|---|---|---|---|")
for name, f in figures():
    png, chart = [], []
    for _ in range(n):
        t = time.perf_counter(); print_figure(f, "png", bbox_inches="tight"); png.append(time.perf_counter() - t)
        t = time.perf_counter(); body = json.dumps(display.figure_chart(f)); chart.append(time.perf_counter() - t)
    p, c = statistics.median(png) * 1e3, statistics.median(chart) * 1e3
    print("| %s | %.1f ms | %.2f ms (%d) | %.3fx |" % (name, p, c, len(body), (p + c) / p))
    plt.close(f)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=9, help="samples per figure (default 9)")
    n = ap.parse_args().n
    cmd = ["docker", "run", "--rm", "--label", "nanobox.bench=chart", "--cpus", "1",
           "-e", "MPLCONFIGDIR=/tmp/mpl", "-v", os.path.abspath(KERNEL) + ":/k:ro",
           "--entrypoint", "python3", IMAGE, "-c", INSIDE, str(n)]
    sys.exit(subprocess.run(cmd, check=False).returncode)


if __name__ == "__main__":
    main()
