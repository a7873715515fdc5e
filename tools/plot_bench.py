#!/usr/bin/python3
"""Plots benchmark CSVs: busbw against size and time against size, log-log, in one PNG.

Reads the CSV files of ccl_bench (--csv) and of the peer benchmarks (bench/peers), which share the
columns collective,ranks,size_bytes,count,dtype,op,root,in_place,time_us,algbw_gbps,busbw_gbps,
wrong. Every file is one implementation, labelled by its file name or by --label. Each line of the
plot is one series: a file's rows of one collective, rank count, datatype, reduction and placement
(the legend, on both panels, names only what differs between the lines); the lines of one file
share a colour (one per library) and the same case in several files a style (solid, dashed,
...). Repeated sizes within a series (rounds, files of several launches) are combined by their
median, with their spread from the lowest to the highest as a band around the line.

    tools/plot_bench.py ccl.csv openmpi.csv --collective allreduce --ranks 4 -o allreduce.png

Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import csv
import os
import statistics
import sys
from collections import defaultdict

COLUMNS = ["collective", "ranks", "size_bytes", "count", "dtype", "op", "root", "in_place",
           "time_us", "algbw_gbps", "busbw_gbps", "wrong"]
# What tells series apart, in legend order (the label comes first).
SERIES_KEYS = ["collective", "ranks", "dtype", "op", "in_place"]


def parse_args():
    p = argparse.ArgumentParser(
        description="Plot ccl_bench / peer benchmark CSVs: busbw and time against message size.")
    p.add_argument("csv", nargs="+", help="CSV files (ccl_bench --csv, bench/peers --csv)")
    p.add_argument("-l", "--label", action="append", default=[],
                   help="label of the next CSV file, in order (default: the file name)")
    p.add_argument("-c", "--collective", action="append", default=[],
                   help="only this collective (repeatable, or comma-separated)")
    p.add_argument("-n", "--ranks", action="append", default=[],
                   help="only this rank count (repeatable, or comma-separated)")
    p.add_argument("-o", "--output", default="bench.png", help="the PNG to write (default bench.png)")
    p.add_argument("--title", help="title of the figure (default: from the filters)")
    p.add_argument("--dpi", type=int, default=120, help="resolution of the PNG (default 120)")
    args = p.parse_args()
    if len(args.label) > len(args.csv):
        p.error("more --label options than CSV files")
    args.collective = [c for a in args.collective for c in a.split(",") if c]
    try:
        args.ranks = [int(r) for a in args.ranks for r in a.split(",") if r]
    except ValueError:
        p.error("--ranks takes whole numbers")
    return args


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"plot_bench: {sys.executable} cannot import matplotlib: install the Debian "
                 "package python3-matplotlib (apt-get install python3-matplotlib, or "
                 "tools/install-deps.sh) and run this with /usr/bin/python3")
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    return plt, FuncFormatter


def default_label(path):
    return os.path.splitext(os.path.basename(path))[0]


def read_rows(path, label, args):
    """The file's rows that pass the filters, as dicts with a 'label'."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                sys.exit(f"plot_bench: {path}: not a benchmark CSV (no column {', '.join(missing)})")
            rows = []
            for line, r in enumerate(reader, start=2):
                try:
                    row = {"label": label, "collective": r["collective"], "ranks": int(r["ranks"]),
                           "dtype": r["dtype"], "op": r["op"],
                           "in_place": r["in_place"].strip().lower() in ("1", "true"),
                           "size": int(r["size_bytes"]), "time_us": float(r["time_us"]),
                           "busbw": float(r["busbw_gbps"]),
                           "wrong": int(float(r["wrong"])) if r["wrong"] not in ("", "N/A") else -1}
                except (TypeError, ValueError) as e:
                    sys.exit(f"plot_bench: {path}:{line}: bad row ({e})")
                if args.collective and row["collective"] not in args.collective:
                    continue
                if args.ranks and row["ranks"] not in args.ranks:
                    continue
                rows.append(row)
            return rows
    except OSError as e:
        sys.exit(f"plot_bench: cannot read {path}: {e.strerror}")


def series_of(rows):
    """{(label, collective, ranks, dtype, op, in_place): {size: {"time_us": [..], "busbw": [..]}}}:
    every measurement of each size."""
    points = defaultdict(lambda: defaultdict(lambda: {"time_us": [], "busbw": []}))
    for r in rows:
        key = (r["label"],) + tuple(r[k] for k in SERIES_KEYS)
        for m in ("time_us", "busbw"):
            points[key][r["size"]][m].append(r[m])
    return {key: dict(sorted(by_size.items())) for key, by_size in points.items()}


def legend_names(keys):
    """Names of the series made of the key fields that differ between them."""
    fields = ["label"] + SERIES_KEYS
    varying = [i for i in range(len(fields)) if len({k[i] for k in keys}) > 1] or [0]

    def part(i, value):
        name = fields[i]
        if name == "ranks":
            return f"{value} ranks"
        if name == "in_place":
            return "in place" if value else "out of place"
        return str(value)

    # "none" (the op of a collective that does not reduce) says nothing in a legend.
    return {k: ", ".join(part(i, k[i]) for i in varying if k[i] != "none") or str(k[0])
            for k in keys}


def format_size(x, _pos=None):
    for unit in ["B", "K", "M", "G"]:
        if x < 1024 or unit == "G":
            return f"{x:g}{unit}" if unit != "B" else f"{x:g}"
        x /= 1024
    return f"{x:g}"


def main():
    args = parse_args()
    plt, FuncFormatter = import_pyplot()
    rows = []
    for i, path in enumerate(args.csv):
        label = args.label[i] if i < len(args.label) else default_label(path)
        rows += read_rows(path, label, args)
    wrong = [r for r in rows if r["wrong"] > 0]
    if wrong:
        print(f"plot_bench: warning: {len(wrong)} rows have wrong results (e.g. {wrong[0]['label']}"
              f" {wrong[0]['collective']} {wrong[0]['size']} B)", file=sys.stderr)
    rows = [r for r in rows if r["size"] > 0]  # barrier rows have no size to plot against
    if not rows:
        sys.exit("plot_bench: no rows with a size > 0 pass the filters")

    series = series_of(rows)
    names = legend_names(list(series))
    # One colour per file (a library) and one line style per case, so that ccl and a peer never
    # share a colour and the same case looks the same in each.
    labels = list(dict.fromkeys(k[0] for k in series))
    cases = list(dict.fromkeys(k[1:] for k in series))
    styles = ["-", "--", ":", "-."]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, (ax_bw, ax_t) = plt.subplots(1, 2, figsize=(13, 5))
    for key, points in series.items():
        colour = colours[labels.index(key[0]) % len(colours)]
        style = styles[cases.index(key[1:]) % len(styles)]
        for ax, m in ((ax_bw, "busbw"), (ax_t, "time_us")):
            # A log axis has no place for 0 (busbw is 0 at one rank).
            xs = [s for s in points if min(points[s][m]) > 0]
            ax.plot(xs, [statistics.median(points[s][m]) for s in xs], style, color=colour,
                    marker="o", markersize=3, label=names[key])
            if any(len(points[s][m]) > 1 for s in xs):
                ax.fill_between(xs, [min(points[s][m]) for s in xs],
                                [max(points[s][m]) for s in xs], color=colour, alpha=0.15,
                                linewidth=0)
    for ax, ylabel in ((ax_bw, "busbw (GB/s)"), (ax_t, "time (µs)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(format_size))
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.4)
        ax.grid(True, which="minor", alpha=0.1)
    ax_bw.set_title("bus bandwidth")
    ax_t.set_title("time per call")
    ax_bw.legend(fontsize="small")
    ax_t.legend(fontsize="small")
    title = args.title
    if title is None:
        colls = sorted({r["collective"] for r in rows})
        ranks = sorted({r["ranks"] for r in rows})
        title = ", ".join(colls) + ": " + ", ".join(map(str, ranks)) + " ranks"
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=args.dpi)
    except OSError as e:
        sys.exit(f"plot_bench: cannot write {args.output}: {e.strerror}")
    print(f"plot_bench: wrote {args.output} ({len(series)} series, {len(rows)} rows)")


if __name__ == "__main__":
    main()
