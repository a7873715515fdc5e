"""Compares runs of tests/torch/dist_suite.py: pass / fail / skip per backend, and the tests whose
outcome differs, from the logs of `dist_suite.py -v` (unittest's verbose lines).

    python3 tests/torch/suite_table.py ccl=ccl.log gloo=gloo.log

Exits 1 when a test that the last backend named passes fails on the first one (gloo passes it and
ccl fails it): what docs/torch.md's table must never show.
"""
import re
import sys

# "test_x (__main__.TestDistBackendWithSpawn.test_x) ... ok", the result on a later line when the
# ranks log first, and " ... " on the next line when the test has a docstring.
LINE = re.compile(r"^(test_\w+) \(__main__\.TestDistBackendWithSpawn(?:\.\w+)?\)(?: \.\.\. ?(.*))?$")
HEAD = re.compile(r"^(?:ERROR|FAIL): (test_\w+) ")


def outcomes(path):
    """{test: pass|fail|skip}. A test's result word may come lines after its name (the ranks log
    in between); failures are also taken from unittest's ERROR:/FAIL: headers."""
    result, current = {}, None
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            rest = line.strip()
            if m:
                current, rest = m.group(1), (m.group(2) or "").strip()
            h = HEAD.match(line)
            if h:
                result[h.group(1)] = "fail"
                continue
            if current is None or current in result:
                continue
            if rest == "ok" or rest.endswith(" ok"):
                result[current] = "pass"
            elif rest.startswith("skipped") or " skipped " in f" {rest} ":
                result[current] = "skip"
            elif rest in ("ERROR", "FAIL") or rest.endswith(" ERROR") or rest.endswith(" FAIL"):
                result[current] = "fail"
    return result


def main():
    runs = [a.split("=", 1) for a in sys.argv[1:]]
    if len(runs) < 2:
        sys.exit(__doc__)
    res = {name: outcomes(path) for name, path in runs}
    names = [n for n, _ in runs]
    print("| backend | pass | fail | skip | tests seen |")
    print("|---|---:|---:|---:|---:|")
    for n in names:
        c = [sum(1 for v in res[n].values() if v == k) for k in ("pass", "fail", "skip")]
        print(f"| {n} | {c[0]} | {c[1]} | {c[2]} | {len(res[n])} |")
    first, last = names[0], names[-1]
    tests = sorted(set().union(*res.values()))
    differ = [t for t in tests if len({res[n].get(t, "-") for n in names}) > 1]
    if differ:
        print()
        print("| test | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for t in differ:
            print(f"| {t} | " + " | ".join(res[n].get(t, "-") for n in names) + " |")
    worse = [t for t in tests if res[last].get(t) == "pass" and res[first].get(t) == "fail"]
    if worse:
        print(f"\n{first} fails what {last} passes: {', '.join(worse)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
