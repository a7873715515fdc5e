#!/usr/bin/env python3
"""Markdown tables of ccl against the MPI peers, from the CSVs of tools/compare_peers.sh.

Reads RAW/IMPL-nN-COLL-rROUND[-large|-max].csv (columns collective,ranks,size_bytes,count,dtype,op,root,
in_place,time_us,algbw_gbps,busbw_gbps,wrong), takes per collective, rank count, implementation
and size the median time over the rounds, and prints to stdout: an overview (where ccl is slower
than the best peer), then one table per collective and rank count:
size | ccl us | Open MPI us | MPICH us | ccl/best, marking the sizes where ccl is slower. A slower
size also says whether ccl was slower in every round ("in every round": its fastest round slower
than the peer's slowest) or the rounds overlap (a tie within the run's noise). With three rounds
each, a true tie is still slower in every round one time in twenty.

Rows are matched to the requested sizes (--sizes) by the nearest one on a log scale, because a
benchmark may round a size to whole per-rank blocks (allgather of 8 B at 4 ranks moves 16 B).
"""
import argparse
import csv
import math
import os
import re
import statistics
import sys
from collections import defaultdict

NAMES = {"ccl": "ccl", "openmpi": "Open MPI", "mpich": "MPICH"}
ALIASES = {"bcast": "broadcast", "reduce_scatter_block": "reduce_scatter"}
COLUMNS = ["collective", "ranks", "size_bytes", "time_us", "wrong"]
FILE_RE = re.compile(r"^(?P<impl>[a-z]+)-n(?P<n>\d+)-(?P<coll>[a-z_]+)-r(?P<round>\d+)(?:-max|-large)?\.csv$")


def fmt_size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def fmt_us(t):
    if t is None:
        return "—"
    if t < 10:
        return f"{t:.2f}"
    if t < 1000:
        return f"{t:.1f}"
    return f"{t:.0f}"


def nearest(size, ladder):
    if size <= 0 or not ladder:
        return 0
    return min(ladder, key=lambda s: abs(math.log(s) - math.log(size)))


def load(raw, ladder, problems):
    """{(coll, n, impl, nominal): [(time_us, wrong, size_bytes), ...]} over all rounds."""
    data = defaultdict(list)
    off_ladder = set()
    for name in sorted(os.listdir(raw)):
        m = FILE_RE.match(name)
        if not m:
            continue
        path = os.path.join(raw, name)
        impl = m.group("impl")
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None:
                problems.append(f"{name}: empty (the run failed before its first row)")
                continue
            missing = [c for c in COLUMNS if c not in reader.fieldnames]
            if missing:
                problems.append(f"{name}: no column(s) {', '.join(missing)}")
                continue
            for i, row in enumerate(reader, start=2):
                try:
                    coll = ALIASES.get(row["collective"], row["collective"])
                    n = int(row["ranks"])
                    size = int(row["size_bytes"])
                    t = float(row["time_us"])
                    wrong = int(float(row["wrong"])) if row["wrong"] not in ("", "N/A") else 0
                except (TypeError, ValueError) as e:
                    problems.append(f"{name}:{i}: unreadable row ({e})")
                    continue
                nominal = 0 if coll == "barrier" else nearest(size, ladder)
                # Rounding to per-rank blocks moves a size by less than a factor of max(2, ranks);
                # a row farther from every requested size was not requested: leave it out.
                if nominal and max(size, nominal) > max(2, n) * min(size, nominal):
                    off_ladder.add(f"{name}: {size} B")
                    continue
                data[(coll, n, impl, nominal)].append((t, wrong, size))
    if off_ladder:
        some = sorted(off_ladder)
        problems.append(f"{len(some)} row(s) at sizes not asked for (--sizes) left out, e.g. "
                        + ", ".join(some[:3]))
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", required=True, help="folder of the CSVs")
    ap.add_argument("--ranks", required=True, help="comma-separated rank counts")
    ap.add_argument("--colls", required=True, help="comma-separated collectives, in table order")
    ap.add_argument("--impls", default="ccl,openmpi,mpich", help="columns, comma-separated")
    ap.add_argument("--sizes", required=True, help="comma-separated requested sizes (bytes)")
    ap.add_argument("--meta", help="file of 'key: value' lines for the header")
    ap.add_argument("--failures", help="TSV of failed launches: impl, ranks, collective, round, why, log")
    ap.add_argument("--medians", help="also write the medians as CSV here")
    a = ap.parse_args()

    ranks = [int(x) for x in a.ranks.split(",") if x]
    colls = [ALIASES.get(c, c) for c in a.colls.split(",") if c]
    impls = [x for x in a.impls.split(",") if x]
    peers = [x for x in impls if x != "ccl"]
    has_ccl = "ccl" in impls
    ladder = sorted({int(x) for x in a.sizes.split(",") if x})
    problems = []
    data = load(a.raw, ladder, problems)
    failed = defaultdict(list)  # (coll, n, impl) -> [why, ...]
    if a.failures and os.path.exists(a.failures):
        with open(a.failures) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 6:
                    continue
                impl, n, coll, rnd, why, log = parts[:6]
                failed[(ALIASES.get(coll, coll), int(n), impl)].append(why)
                problems.append(f"{NAMES.get(impl, impl)}, {coll}, {n} ranks, round {rnd}: {why} "
                                f"(log: {log})")

    def missing(coll, n, impl):
        why = failed.get((coll, n, impl))
        if not why:
            return "—"
        return "timed out" if any("timed out" in w for w in why) else "failed"

    def median(coll, n, impl, size):
        v = data.get((coll, n, impl, size))
        if not v:
            return None, 0, 0, set()
        return (statistics.median(t for t, _, _ in v), max(w for _, w, _ in v), len(v),
                {s for _, _, s in v})

    medians = []
    tables, overview = [], []
    for coll in colls:
        sizes = [0] if coll == "barrier" else ladder
        for n in ranks:
            if not any((coll, n, i, s) in data for i in impls for s in sizes):
                tables.append(f"### {coll}, {n} ranks\n\nno data\n")
                overview.append((coll, n, None, None, None, 0))
                continue
            head = "| size | " + " | ".join(f"{NAMES.get(i, i)} µs" for i in impls)
            rule = "|---:|" + "---:|" * len(impls)
            if has_ccl and peers:
                head += " | ccl/best | |"
                rule += "---:|:---|"
            elif peers:
                head += " | best |"
                rule += ":---|"
            else:
                head += " |"
            lines = [f"### {coll}, {n} ranks", "", head, rule]
            slower, compared, worst, clear = 0, 0, None, 0
            for size in sizes:
                cells, marks, actual = {}, [], {}
                for impl in impls:
                    t, wrong, runs, seen = median(coll, n, impl, size)
                    cells[impl] = t
                    actual[impl] = seen
                    if wrong:
                        marks.append(f"**WRONG results: {NAMES.get(impl, impl)}**")
                    if t is not None:
                        medians.append([coll, n, size, ",".join(str(s) for s in sorted(seen)), impl,
                                        f"{t:.3f}", runs, wrong])
                if all(v is None for v in cells.values()) and not any(
                        (coll, n, i) in failed for i in impls):
                    continue
                seen_all = set().union(*actual.values())
                label = fmt_size(size)
                if len(seen_all) == 1 and size not in seen_all:
                    label = fmt_size(next(iter(seen_all)))
                elif len(seen_all) > 1:
                    marks.append("sizes differ: " + ", ".join(
                        f"{NAMES.get(i, i)} {'/'.join(fmt_size(s) for s in sorted(actual[i]))}"
                        for i in impls if actual[i]))
                row = f"| {label} | " + " | ".join(
                    fmt_us(cells[i]) if cells[i] is not None else missing(coll, n, i) for i in impls)
                peer_times = [(cells[p], p) for p in peers if cells[p] is not None]
                best = min(peer_times) if peer_times else None
                if has_ccl and peers:
                    if cells["ccl"] is not None and best:
                        ratio = cells["ccl"] / best[0]
                        compared += 1
                        if ratio > 1:
                            slower += 1
                            # Every round slower, or the rounds' ranges overlap.
                            every = (min(t for t, _, _ in data[(coll, n, "ccl", size)]) >
                                     max(t for t, _, _ in data[(coll, n, best[1], size)]))
                            clear += every
                            marks.insert(0, f"**slower** (best: {NAMES.get(best[1], best[1])}; "
                                         + ("in every round)" if every else "rounds overlap)"))
                        if worst is None or ratio > worst[0]:
                            worst = (ratio, label)
                        row += f" | {ratio:.2f}" if ratio >= 0.1 else f" | {ratio:.2g}"
                    else:
                        row += " | —"
                    row += " | " + "; ".join(marks) + " |"
                elif peers:
                    row += " | " + "; ".join([NAMES.get(best[1], best[1]) if best else "—"] + marks) + " |"
                else:
                    row += " |"
                lines.append(row)
            if has_ccl and peers:
                lines.append("")
                lines.append(f"ccl slower than the best peer at {slower} of {compared} sizes"
                             f" ({clear} in every round).")
            tables.append("\n".join(lines) + "\n")
            overview.append((coll, n, slower, compared, worst, clear))

    out = ["# ccl against the MPI peers", ""]
    if a.meta and os.path.exists(a.meta):
        with open(a.meta) as f:
            out += [f"- {line.strip()}" for line in f if line.strip()]
    versions = library_versions(a.raw)
    out += [f"- {NAMES.get(k, k)}: {versions[k]}" for k in impls if k in versions]
    out += ["", "Time per call in µs, the max over ranks of each rank's average; the median over the "
            "rounds. ccl/best: ccl's time over the faster peer's (above 1: ccl is slower).", ""]
    if has_ccl and peers:
        out += ["## Overview", "", "| collective | ranks | ccl slower at | of them in every round "
                "| worst ccl/best |", "|---|---:|---:|---:|---:|"]
        total = {"slower": 0, "compared": 0, "clear": 0}
        for coll, n, slower, compared, worst, clear in overview:
            total["slower"] += slower or 0
            total["compared"] += compared or 0
            total["clear"] += clear
            if compared is None:
                out.append(f"| {coll} | {n} | no data | | |")
            elif compared == 0:
                out.append(f"| {coll} | {n} | no comparison | | |")
            else:
                w = f"{worst[0]:.2f} at {worst[1]}" if worst else ""
                flag = "**" if slower else ""
                out.append(f"| {coll} | {n} | {flag}{slower} of {compared}{flag} | {clear} | {w} |")
        out += ["", f"In all: ccl slower at {total['slower']} of {total['compared']} sizes, "
                f"{total['clear']} of them in every round.", ""]
    out += ["## Tables", ""] + tables
    if problems:
        out += ["## Problems", ""] + [f"- {x}" for x in problems] + [""]
    print("\n".join(out))

    if a.medians:
        with open(a.medians, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["collective", "ranks", "size_bytes", "actual_size_bytes", "impl",
                        "median_time_us", "runs", "wrong"])
            w.writerows(medians)
    return 0


def library_versions(raw):
    """The first '# ccl_bench: ...' / '# mpi_family_bench: ...' line of each implementation's logs."""
    found = {}
    for name in sorted(os.listdir(raw)):
        m = FILE_RE.match(name[:-4] + ".csv") if name.endswith(".log") else None
        if not m or m.group("impl") in found:
            continue
        with open(os.path.join(raw, name), errors="replace") as f:
            for line in f:
                if line.startswith("# ccl_bench:") or line.startswith("# mpi_family_bench:"):
                    found[m.group("impl")] = line.split(":", 1)[1].strip().split(",")[0]
                    break
    return found


if __name__ == "__main__":
    sys.exit(main())
