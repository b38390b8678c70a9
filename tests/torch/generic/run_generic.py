"""Runs torch's own generic distributed suite (torch/testing/_internal/distributed/distributed_test.py) on dcomm.

    BACKEND=dcomm WORLD_SIZE=2 python3 run_generic.py [--subset FILE] [--list] [unittest -k patterns ...]

The suite picks tests by backend name. dcomm is added wherever gloo is named for what dcomm also does: the
feature sets (DistTestCases.backend_feature, and "plugin"), and the suite's `BACKEND == "gloo"` checks and
require_backend({"gloo"}) gates, rewritten in a copy of the module loaded here. Tests that exercise gloo itself (a gloo group
made by name, gloo's sparse all_reduce) stay gloo's, as do those listed in EXCLUDED below with the reason.
Every process the suite spawns re-imports this file, so each sees the same rewrite. Prints pass/skip/fail counts.
"""
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the expecttest stand-in
os.environ.setdefault("BACKEND", "dcomm")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ["NO_REPLICATED_TENSOR"] = "1"  # torch 1.13's _shard import fails on Python 3.11 (with gloo too)
BACKEND = os.environ["BACKEND"]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

if BACKEND == "dcomm":
    import dcomm_torch  # noqa: E402,F401  registers "dcomm"

from torch.testing._internal import common_distributed  # noqa: E402

for features in common_distributed.DistTestCases.backend_feature.values():
    if "gloo" in features:
        features.add("dcomm")
common_distributed.DistTestCases.backend_feature["plugin"].add("dcomm")  # the suite's name for a registered backend

# Tests that run for gloo but test gloo itself, not a backend's behaviour; each with the reason (docs/torch.md).
EXCLUDED = {
    "test_sparse_all_reduce_sum": "sparse tensors: dcomm has dense buffers only",
    "test_sparse_all_reduce_sum_cuda": "sparse tensors: dcomm has dense buffers only",
}


def load_suite():
    import torch.testing._internal.distributed.distributed_test as original
    path = original.__file__.replace(".pyc", ".py")
    with open(path) as f:
        src = f.read()
    if os.environ.get("NO_REPLICATED_TENSOR") == "1":
        # The suite's processes turn on DDP's ReplicatedTensor, whose _shard import fails on Python 3.11 (for gloo
        # too); NO_REPLICATED_TENSOR=1 is torch's own switch for this in later versions.
        src = src.replace("_set_ddp_with_replicated_tensor(True)", "_set_ddp_with_replicated_tensor(False)")
    if BACKEND == "dcomm":
        src = re.sub(r'BACKEND != "gloo"', 'BACKEND not in ("gloo", "dcomm")', src)
        src = re.sub(r'BACKEND == "gloo"', 'BACKEND in ("gloo", "dcomm")', src)
        src = src.replace('@require_backend({"gloo"})', '@require_backend({"gloo", "dcomm"})')
    module = type(sys)("dcomm_distributed_test")
    module.__file__ = path
    sys.modules[module.__name__] = module
    exec(compile(src, path, "exec"), module.__dict__)
    return module


suite_module = load_suite()


class TestDistBackendWithSpawn(suite_module.TestDistBackend, suite_module.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


for _name in EXCLUDED:
    if hasattr(TestDistBackendWithSpawn, _name):
        setattr(TestDistBackendWithSpawn, _name,
                unittest.skip(f"excluded for dcomm: {EXCLUDED[_name]}")(getattr(TestDistBackendWithSpawn, _name)))

# Without CUDA, the tests named for CUDA, NCCL or GPUs skip in their spawned processes (for gloo too), after
# seconds of start-up each: skip them here instead, with the same outcome.
if not torch.cuda.is_available():
    for _name in dir(TestDistBackendWithSpawn):
        if _name.startswith("test_") and re.search(r"cuda|nccl|gpu", _name, re.IGNORECASE):
            setattr(TestDistBackendWithSpawn, _name, unittest.skip("CUDA is not available (named for CUDA/NCCL/GPU; "
                                                                   "not spawned)")(getattr(TestDistBackendWithSpawn,
                                                                                           _name)))


class TallyResult(unittest.TextTestResult):
    """Prints the running counts after every test, so that a run stopped early still says where it stood."""

    def stopTest(self, test):  # noqa: N802
        super().stopTest(test)
        skipped, failed = len(self.skipped), len(self.failures) + len(self.errors)
        self.stream.write(f"TALLY {self.testsRun - skipped - failed} passed, {skipped} skipped, {failed} failed\n")
        self.stream.flush()


def main():
    args = sys.argv[1:]
    names = sorted(n for n in dir(TestDistBackendWithSpawn) if n.startswith("test_"))
    if "--list" in args:
        print("\n".join(names))
        return 0
    if "--subset" in args:
        i = args.index("--subset")
        with open(args[i + 1]) as f:
            wanted = [ln.split("#")[0].strip() for ln in f]
        names = [n for n in wanted if n]
        del args[i:i + 2]
    if args:
        names = [n for n in names if any(p in n for p in args)]
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    start = time.monotonic()
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout, resultclass=TallyResult).run(suite)
    elapsed = time.monotonic() - start
    skipped = len(result.skipped)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - skipped - failed
    reasons = {}
    for _, why in result.skipped:
        reasons[why] = reasons.get(why, 0) + 1
    print(f"\ngeneric suite, BACKEND={BACKEND} WORLD_SIZE={os.environ['WORLD_SIZE']}: {passed} passed, "
          f"{skipped} skipped, {failed} failed of {result.testsRun} in {elapsed:.0f} s")
    for why, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  skipped {count:4d}: {why}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
