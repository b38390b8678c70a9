#!/usr/bin/env python3
"""The example programs on several ranks through dcomm-run.

usage: example_tests.py DCOMM_RUN PROGRAM CASE    (CASE is one of the functions named case_*)
Exits 0 when the case passes, 1 with the programs' output when it fails. Nothing here asserts on timing: the
machine may be a loaded 2-core box, so the SGD-variants ordering is reported, not required.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

RUN_TIMEOUT_S = 90  # the bound on one dcomm-run; each case is meant to take a few seconds


# The launcher tests' result checks (check() raises CaseFailed with dcomm-run's exit code and output).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher"))
from launcher_tests import CaseFailed, check, run_case_from_argv  # noqa: E402


def launch(nproc, program_args, launcher_args=()):
    env = dict(os.environ, DCOMM_TIMEOUT_S=os.environ.get("DCOMM_TIMEOUT_S", "60"))
    args = [DCOMM_RUN, "--nproc-per-node", str(nproc), "--grace-period", "1", *launcher_args, "--", PROGRAM,
            *program_args]
    start = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
    r.elapsed = time.monotonic() - start
    return r


def rank_lines(text, rank):
    prefix = f"[rank {rank}]: "
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


def final_hash(r):
    hashes = [m.group(1) for line in rank_lines(r.stdout, 0)
              if (m := re.fullmatch(r"weights hash ([0-9a-f]{16})", line))]
    check(len(hashes) == 1, "rank 0 prints one weights hash", r)
    return hashes[0]


def check_training(r, leader=0):
    """The run succeeded, every rank agreed on the weights at every step (else the program fails), the loss fell.
    `leader`: the launch rank that is rank 0 at the end (after a shrink that lost rank 0, another)."""
    check(r.returncode == 0, "train_dp failed", r)
    losses = [float(m.group(1)) for line in rank_lines(r.stdout, 0) + rank_lines(r.stdout, leader)
              if (m := re.match(r"step +\d+ +loss (\S+)", line))]
    check(len(losses) >= 3, "rank 0 logs the loss", r)
    final = [m for line in rank_lines(r.stdout, leader) if (m := re.match(r"final: loss (\S+) \(initial (\S+)\)", line))]
    check(len(final) == 1, "rank 0 prints the final loss", r)
    check(float(final[0].group(1)) < 0.8 * float(final[0].group(2)), "the loss fell by at least 20%", r)
    check(losses[-1] < losses[0], "the logged training loss fell", r)


def case_train_sgd_3():
    check_training(launch(3, ["--steps", "60", "--optimizer", "sgd", "--bucket-bytes", "2048", "--log-every", "20"]))


def case_train_adam_3_per_tensor():
    check_training(launch(3, ["--steps", "60", "--optimizer", "adam", "--no-bucketing", "--log-every", "20"]))


def case_divergence_detected_3():
    """A replica that differs by one bit must stop the run on every rank, naming the step."""
    r = launch(3, ["--steps", "10", "--corrupt-at-step", "4", "--fault-rank", "1"])
    check(r.returncode != 0, "a run with a corrupted replica must fail", r)
    check("replicas diverged after step 4" in r.stderr, "the error names the step", r)
    check(not any(line.startswith("step     5") for line in rank_lines(r.stdout, 0)), "no step after the check", r)


def case_benchmark_3():
    r = launch(3, ["--benchmark", "--steps", "5", "--hidden", "128,128", "--bucket-bytes", "32768"])
    check(r.returncode == 0, "the benchmark failed", r)
    out = "\n".join(rank_lines(r.stdout, 0))
    check(re.search(r"bucketed \(\d+ buckets.*ms/step", out) is not None, "the bucketed timing line", r)
    check(re.search(r"per-tensor .*ms/step", out) is not None, "the per-tensor timing line", r)


def case_kill_and_resume_3():
    """A rank SIGKILLs itself mid-run; dcomm-run restarts the group, which resumes from the last snapshot and ends
    with the very weights of an uninterrupted run."""
    work = tempfile.mkdtemp(prefix="dcomm-example-ckpt-")
    try:
        # A fixed all_reduce algorithm: the cost model's choice may differ between runs, and another summation
        # order gives other low bits.
        common = ["--steps", "30", "--ckpt-every", "10", "--log-every", "10", "--optimizer", "adam", "--algo", "ring"]
        reference = launch(3, common + ["--ckpt-dir", os.path.join(work, "reference")])
        check_training(reference)
        # The last rank, then rank 0 itself (the one that writes the snapshots and broadcasts them on resume).
        for victim, step in [(2, 24), (0, 21)]:
            killed = launch(3, common + ["--ckpt-dir", os.path.join(work, f"killed{victim}"), "--kill-at-step",
                                         str(step), "--fault-rank", str(victim)], ["--max-restarts", "1"])
            check_training(killed)
            check(any(f"killing myself at step {step}" in line for line in rank_lines(killed.stdout, victim)),
                  f"rank {victim} died", killed)
            check("restarting the group" in killed.stderr, "dcomm-run restarted the group", killed)
            check(any(re.match(r"resumed from .*step-0000000020\.ckpt at step 20", line)
                      for line in rank_lines(killed.stdout, 0)), "the restart resumed from the step-20 snapshot", killed)
            check(final_hash(killed) == final_hash(reference),
                  f"resumed run ends with hash {final_hash(killed)}, uninterrupted with {final_hash(reference)}", killed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def final_loss(r, leader=0):
    final = [float(m.group(1)) for line in rank_lines(r.stdout, leader) if (m := re.match(r"final: loss (\S+)", line))]
    check(len(final) == 1, "rank 0 prints the final loss", r)
    return final[0]


def case_shrink_and_go_on_4():
    """A rank dies mid-run; with --on-failure shrink under dcomm-run --keep-going the survivors shrink, re-shard the
    same global batches over themselves and go on from memory (no restart, no snapshot). The final loss must be
    within 2% of an uninterrupted run's: the batches are the same, only the summation order differs and, where the
    survivors do not divide the global batch, the slices differ by one sample (the mean of unequal slices' means)."""
    common = ["--steps", "80", "--log-every", "20", "--optimizer", "adam", "--algo", "ring"]
    reference = launch(4, common)
    check_training(reference)
    for victim, step in [(1, 30), (0, 45)]:
        shrunk = launch(4, common + ["--on-failure", "shrink", "--kill-at-step", str(step), "--fault-rank", str(victim)],
                        ["--keep-going"])
        leader = 1 if victim == 0 else 0  # rank 0 of the shrunk group
        check_training(shrunk, leader)
        check(any(f"killing myself at step {step}" in line for line in rank_lines(shrunk.stdout, victim)),
              f"rank {victim} died", shrunk)
        check(any(re.match(rf"shrunk from 4 to 3 ranks \(failed \[{victim}\]\); going on from step {step - 1}", line)
                  for line in rank_lines(shrunk.stdout, leader)),
              "the survivors shrank and went on from the last step every one finished", shrunk)
        check("the group shrank from 4 to 3 ranks" in shrunk.stderr, "dcomm-run reports the shrink", shrunk)
        check("restarting" not in shrunk.stderr, "no restart", shrunk)
        ref, got = final_loss(reference), final_loss(shrunk, leader)
        print(f"final loss: uninterrupted {ref:.6f}, shrunk after rank {victim} died at step {step}: {got:.6f} "
              f"(relative difference {abs(got - ref) / ref:.2e})")
        check(abs(got - ref) <= 0.02 * ref, f"final loss {got} not within 2% of the uninterrupted {ref}", shrunk)


def case_sgd_variants_4():
    r = launch(4, ["--k", "2", "--epochs", "2", "--straggler-mean-ms", "10", "--slow-learner", "3",
                   "--slow-ms", "30"])
    check(r.returncode == 0, "sgd_variants failed (or the loss did not fall for some variant)", r)
    out = rank_lines(r.stdout, 0)
    for name in ["fully-sync", "K-sync", "K-batch-sync", "async", "K-async", "K-batch-async"]:
        check(any(line.startswith(name + " ") for line in out), f"a result row for {name}", r)
    order = [line for line in out if line.startswith("ordering (time per epoch)")]
    check(len(order) == 1, "the ordering line", r)
    print(order[0])  # reported for the log; not asserted (timing)


def main():
    return run_case_from_argv(globals(), "PROGRAM", __doc__)


if __name__ == "__main__":
    sys.exit(main())
