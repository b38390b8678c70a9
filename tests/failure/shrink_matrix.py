#!/usr/bin/env python3
"""Kills (SIGKILL) or stops (SIGSTOP) ranks of mp_shrink, run through `dcomm-run --keep-going`, and checks that the
survivors shrink and go on (issue 17).

usage: shrink_matrix.py DCOMM_RUN MP_SHRINK CASE [SEED]
  CASE = <mode>_<transport>_<n>, mode one of
    kill1     one rank killed at a random call
    kill2     two ranks killed at the same call
    kill2seq  two ranks killed one after another (the second in the shrunk group)
    inshrink  one rank killed, and a second dies inside its shrink (after joining, after the decision, or after
              building the new group: DCOMM_SHRINK_FAULT)
    stop      one rank stopped (SIGSTOP) past the join window, then resumed: it must be told it was excluded
  shrink_matrix.py DCOMM_RUN MP_SHRINK matrix RUNS   (scripts/shrink-matrix.sh: random cases, timing summary)
  shrink_matrix.py DCOMM_RUN MP_SHRINK timing RUNS   (scripts/shrink-matrix.sh timing: kill1 at 4 and 7 ranks)
Checks: every survivor finishes (DONE), all with the same members and the same failed set (the victims), no WRONG
result, a stopped rank prints EXCLUDED, dcomm-run exits 0 and reports the shrink, all within a bound.
Prints "TIMING n N kill_to_shrunk_s X" (from the kill to the last survivor's first correct call on the new group).
"""
import os
import random
import re
import subprocess
import sys
import time

BOUND_S = 150  # a whole run, on a loaded machine
ITERS = 120


def run_case(case, seed):
    mode, transport, n = case.split("_")
    n = int(n)
    rng = random.Random(seed)
    victims = rng.sample(range(n), 2)
    at = rng.randrange(3, ITERS // 2)
    plan = {
        "kill1": [(victims[0], at, "kill")],
        "kill2": [(victims[0], at, "kill"), (victims[1], at, "kill")],
        "kill2seq": [(victims[0], at, "kill"), (victims[1], at + rng.randrange(5, 30), "kill")],
        "inshrink": [(victims[0], at, "kill"), (victims[1], at, "shrink")],
        "stop": [(victims[0], at, "stop")],
    }[mode]
    env = dict(os.environ, DCOMM_TRANSPORT=transport, UCX_TLS="tcp,self", ITERS=str(ITERS),
               PLAN=",".join(f"{l}:{i}:{m}" for l, i, m in plan), JOIN_S="4", STOP_S="14",
               # A stopped rank is found by the survivors' timeout; a dead one at once, so the kill cases keep a
               # long timeout (nothing may time out there).
               DCOMM_TIMEOUT_S="4" if mode == "stop" else "60", SHRINK_TIMEOUT_S="60",
               SHRINK_FAULT_PHASE=rng.choice(["joined", "decided", "built"]))
    args = [DCOMM_RUN, "--standalone", "--nproc-per-node", str(n), "--keep-going", "--grace-period", "3", "--", PROG]
    t0 = time.monotonic()
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=BOUND_S, env=env)
    except subprocess.TimeoutExpired as e:
        return [f"{case} seed {seed}: HUNG past {BOUND_S} s (plan {env['PLAN']})"], None, str(e.stdout)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    errors = []
    lost = sorted(v for v, _, _ in plan)
    done = {int(m.group(1)): (m.group(3), m.group(4)) for m in
            re.finditer(r"DONE rank (\d+) size (\d+) members \[([\d,]*)\] failed \[([\d,]*)\]", out)}
    survivors = [r_ for r_ in range(n) if r_ not in lost]
    want_failed = ",".join(map(str, lost))
    want_members = ",".join(map(str, survivors))
    for s in survivors:
        if s not in done:
            errors.append(f"survivor {s} did not finish")
        elif done[s] != (want_members, want_failed):
            errors.append(f"survivor {s}: members [{done[s][0]}] failed [{done[s][1]}], want [{want_members}] [{want_failed}]")
    if "WRONG" in out:
        errors.append("a wrong result: " + re.search(r"WRONG.*", out).group(0))
    if mode == "stop" and f"EXCLUDED rank {lost[0]}" not in out:
        errors.append(f"the stopped rank {lost[0]} was not told it was excluded")
    if r.returncode != 0:
        errors.append(f"dcomm-run exited {r.returncode}")
    if "the group shrank" not in out:
        errors.append("dcomm-run's summary reports no shrink")
    kills = [float(x) for x in re.findall(r"KILLED rank \d+ at ([0-9.]+)", out)]
    shrunk = [float(x) for x in re.findall(r"SHRUNK rank \d+ at ([0-9.]+)", out)]
    timing = None
    if mode == "kill1" and kills and shrunk:
        timing = max(shrunk) - min(kills)
    if errors:
        errors = [f"{case} seed {seed} plan {env['PLAN']} phase {env['SHRINK_FAULT_PHASE']} ({took:.1f} s): {e}" for e in errors]
    return errors, timing, out


def main():
    global DCOMM_RUN, PROG
    DCOMM_RUN, PROG, case = sys.argv[1:4]
    if case == "timing":
        # kill1 only, at 4 and 7 ranks: the kill-to-shrunk-group times (correctness is checked as in every case).
        runs = int(sys.argv[4]) if len(sys.argv) > 4 else 10
        transports = ["shm"] + (["ucx"] if os.environ.get("WITH_UCX", "1") == "1" else [])
        failures = 0
        for t in transports:
            for n in (4, 7):
                ts = []
                for _ in range(runs):
                    errs, timing, _ = run_case(f"kill1_{t}_{n}", random.randrange(1 << 30))
                    failures += bool(errs)
                    for e in errs:
                        print("  " + e)
                    if timing is not None:
                        ts.append(timing)
                ts.sort()
                if ts:
                    print(f"TIMING {t} n {n}: kill to shrunk group over {len(ts)} runs: median {ts[len(ts) // 2]:.2f} s, "
                          f"worst {ts[-1]:.2f} s", flush=True)
        print(f"{failures} failed")
        return 1 if failures else 0
    if case == "matrix":
        runs = int(sys.argv[4]) if len(sys.argv) > 4 else 20
        transports = ["shm"] + (["ucx"] if os.environ.get("WITH_UCX", "1") == "1" else [])
        failures, timings = 0, {}
        for i in range(runs):
            seed = random.randrange(1 << 30)
            case_i = f"{random.choice(['kill1', 'kill2', 'kill2seq', 'inshrink', 'stop'])}_{random.choice(transports)}_{random.choice([4, 5, 7])}"
            errs, timing, out = run_case(case_i, seed)
            print(f"[{i + 1}/{runs}] {case_i} seed {seed}: {'FAIL' if errs else 'ok'}", flush=True)
            for e in errs:
                print("  " + e)
            failures += bool(errs)
            if timing is not None:
                timings.setdefault(case_i.split("_")[2], []).append(timing)
        for n, ts in sorted(timings.items()):
            ts.sort()
            print(f"TIMING n {n}: kill to shrunk group over {len(ts)} kill1 runs: median {ts[len(ts) // 2]:.2f} s, "
                  f"worst {ts[-1]:.2f} s")
        print(f"{runs - failures} passed, {failures} failed")
        return 1 if failures else 0
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else random.randrange(1 << 30)
    errs, timing, out = run_case(case, seed)
    if errs:
        print(out)
        for e in errs:
            print("FAIL: " + e)
        return 1
    print(f"{case} seed {seed}: ok" + (f"; TIMING kill_to_shrunk_s {timing:.2f}" if timing is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
