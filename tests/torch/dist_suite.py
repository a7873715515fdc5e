"""PyTorch's own distributed test suite (torch/testing/_internal/distributed/distributed_test.py,
class DistributedTest._DistTestBase) against the "ccl" backend, the way PyTorch's
test/distributed/test_distributed_spawn.py runs it for its own backends: each test spawns
WORLD_SIZE processes that join one process group through a file store.

    PYTHONPATH=build/torch python3 tests/torch/dist_suite.py [--backend ccl|gloo] [--world-size 4]
        [--list] [unittest arguments, e.g. -k test_all_reduce_sum]

ccl is added to the suite's lists of backends with the features it has (ddp, subgroup, and
"plugin": an out-of-tree backend), as out-of-tree backends do. --backend gloo runs the same tests
on gloo, for the comparison in docs/torch.md. With --tests FILE, only the tests named in FILE
(one per line, '#' comments) run: tests/torch/dist_suite_ci.txt is CI's subset. With --jobs N
the tests are dealt to N runs of this script side by side (each WORLD_SIZE processes per test, its
own TEMP_DIR), and their logs are printed one after another when all are done: on a host of many
cores the whole class takes minutes rather than an hour. --start fork starts each test's ranks by
fork rather than spawn (PyTorch's test_distributed_spawn.py): where importing torch takes seconds
(torch 2.11 on the 16-core host: about 13 s per rank), this is what makes the whole class run.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser(add_help=False)
ap.add_argument("--backend", default="ccl")
ap.add_argument("--world-size", default="4")
ap.add_argument("--tests", help="a file naming the tests to run")
ap.add_argument("--list", action="store_true", help="print the test names and exit")
ap.add_argument("--jobs", type=int, default=1, help="runs of the suite side by side")
ap.add_argument("--start", choices=("spawn", "fork"), default="spawn",
                help="how each test starts its ranks (fork: no fresh import of torch per rank)")
args, rest = ap.parse_known_args()
sys.argv = [sys.argv[0]] + rest  # torch's test helpers parse it as they are imported
# torch's helpers take CI for PyTorch's own CI and write XML reports through xmlrunner (absent).
os.environ.pop("CI", None)
# A CPU backend's suite: with a GPU visible the suite gates most tests on one GPU per rank ("Need
# at least 4 CUDA devices", as on the 16-core host), for gloo too.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ["BACKEND"] = args.backend
os.environ["WORLD_SIZE"] = args.world_size
os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())

# torch's test helpers import expecttest (a PyPI package Debian does not have) for one method
# the distributed suite never calls: a stand-in, unless the real one is installed.
try:
    import expecttest  # noqa: F401
except ImportError:
    import types
    import unittest

    class _ExpectTestCase(unittest.TestCase):
        def assertExpectedInline(self, *a, **k):
            raise unittest.SkipTest("expecttest is not installed")

    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=_ExpectTestCase, ACCEPT=False)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import ccl_torch  # noqa: E402,F401  (registers "ccl"; spawned ranks import this file again)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# Before distributed_test is imported: its skip decorators read these sets as they are applied.
for feature in ("ddp", "subgroup", "plugin"):
    DistTestCases.backend_feature[feature].add("ccl")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if args.start == "fork":
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


def names():
    return sorted(n for n in dir(TestDistBackendWithSpawn) if n.startswith("test_"))


def run_jobs(tests, jobs):
    """Deals the tests to `jobs` runs of this script and prints their logs in turn; the exit
    status is the worst of theirs. Stopped (SIGTERM, ^C), it stops them and prints what ran.
    Never more runs than tests: a run given no names would run the whole class."""
    jobs = min(jobs, len(tests))
    procs, dirs = [], []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        for j in range(jobs):
            d = tempfile.mkdtemp(prefix=f"dist_suite{j}.")
            dirs.append(d)
            with open(os.path.join(d, "tests.txt"), "w") as f:
                f.write("\n".join(tests[j::jobs]) + "\n")
            log = open(os.path.join(d, "log"), "w+")
            cmd = [sys.executable, os.path.abspath(__file__), "--backend", args.backend,
                   "--world-size", args.world_size, "--start", args.start, "--tests", f.name] + rest
            procs.append((subprocess.Popen(cmd, env=dict(os.environ, TEMP_DIR=d), stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True), log))
        return max((p.wait() for p, _ in procs), default=0)
    finally:
        for p, log in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.seek(0)
            sys.stdout.write(log.read())
            log.close()
        sys.stdout.flush()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    if args.list:
        print("\n".join(names()))
        sys.exit(0)
    known = names()
    wanted = known
    if args.tests:
        with open(args.tests) as f:
            wanted = [line.split("#")[0].strip() for line in f]
        wanted = [w for w in wanted if w]
        unknown = [w for w in wanted if w not in known]
        if unknown:
            sys.exit(f"dist_suite: no such tests in this torch's suite: {', '.join(unknown)}")
    if args.jobs > 1:
        sys.exit(run_jobs(wanted, args.jobs))
    if args.tests:
        rest += [f"TestDistBackendWithSpawn.{w}" for w in wanted]
    assert dist.is_available()
    run_tests(argv=[sys.argv[0]] + rest)
