#!/usr/bin/env python3
"""Kills (SIGKILL) or stops (SIGSTOP) one rank of mp_kill_point at chosen moments, through dcomm-run, and checks
what every survivor and dcomm-run say.

usage: kill_matrix.py DCOMM_RUN MP_KILL_POINT CASE
  kill_<transport>_<n>   a bounded loop of kills at moments from startup to mid-loop, each a different rank
  reprobe_<transport>_<n> as kill_, with the engine measuring the window stores again before every call after a
                         large one (DCOMM_SHM_REPROBE_CALLS=1)
  tune_<transport>_<n>   as kill_, every collective in turn, the group measuring its choices (DCOMM_TUNE=on)
  stop_<transport>_<n>   one rank stops (SIGSTOP) mid-loop; timeout 8 s
  sleep_<transport>_<n>  one rank stays in user code (sleeps) between two calls; timeout 8 s
       kill_matrix.py DCOMM_RUN MP_KILL_POINT matrix RUNS   (scripts/kill-matrix.sh: the larger matrix)
Checks for a kill: every survivor fails (not DONE, not WRONG) within 3 s of the kill, its error names the victim
and blames no survivor, dcomm-run's summary puts the victim first, and no /dev/shm segment of the run is left.
For a stop: survivors fail at the timeout within 5%, and the flight-recorder report and dcomm-run's summary name
the stopped rank as the cause.
"""
import os
import random
import re
import subprocess
import sys
import time

DETECT_S = 3.0
STOP_TIMEOUT_S = 8.0
# The moments of death: startup (before and during rendezvous), mesh setup and the probe, then the loop.
KILL_MOMENTS = [0.05, 0.12, 0.2, 0.3, 0.4, 0.6, 0.9, 1.5, 2.5]


def shm_entries():
    try:
        return set(n for n in os.listdir("/dev/shm") if n.startswith("dcomm"))
    except FileNotFoundError:
        return set()


def launch(transport, n, victim, after, signal="KILL", timeout_s=30, extra_env=None):
    env = dict(os.environ, **(extra_env or {}), DCOMM_TRANSPORT=transport, KILL_RANK=str(victim), KILL_AFTER_S=str(after),
               KILL_SIGNAL=signal, DCOMM_TIMEOUT_S=str(timeout_s), LOOP_S=str(after + 6 + (timeout_s if signal != "KILL" else 0)),
               UCX_TLS="tcp,self")
    args = [DCOMM_RUN, "--standalone", "--nproc-per-node", str(n), "--grace-period", "3", "--", PROG]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    return r, time.monotonic() - t0


def survivors_of(out):
    found = {}
    for m in re.finditer(r"SURVIVOR rank (\d+) at ([0-9.]+) call_s ([0-9.]+): \[(\w+)\] (.*)", out):
        found[int(m.group(1))] = (float(m.group(2)), float(m.group(3)), m.group(4), m.group(5))
    return found


CULPRIT = [r"rank (\d+) is gone", r"rank (\d+) failed first", r"rank (\d+) \(pid \d+ on host [^)]*\) closed",
           r"process \d+ \(rank (\d+)\)", r"rank\(s\) (\d+)", r"rank (\d+) holds up", r"rank (\d+) \(pid \d+[^)]*\) did not"]


def first_culprit(text):
    """The rank the text blames first (the root cause it names), or None. What it saw after may name others."""
    best = None
    for pat in CULPRIT:
        m = re.search(pat, text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), int(m.group(1)))
    return None if best is None else best[1]


def blamed_survivors(text, victim, n):
    """The survivor the text blames first, as a list (empty when it blames the victim first)."""
    c = first_culprit(text)
    return [] if c is None or c == victim else [c]


def check_kill(transport, n, victim, after, extra_env=None):
    """Returns (problems, slowest detection in s)."""
    before = shm_entries()
    r, _ = launch(transport, n, victim, after, extra_env=extra_env)
    out = r.stdout + r.stderr
    problems = []
    pids = [int(p) for p in re.findall(r"PID rank \d+ pid (\d+)", r.stdout)]
    runs = set(re.findall(r"PID rank \d+ pid \d+ run (\w+)", r.stdout))
    m = re.search(rf"VICTIM rank {victim} signal KILL at ([0-9.]+)", r.stdout)
    slowest = 0.0
    if not m:
        if "DONE rank" in r.stdout or r.returncode == 0:
            problems.append("the victim was never killed")
        return problems, slowest
    slowest = check_kill_survivors(r.stdout, n, victim, float(m.group(1)), problems,
                                   lambda s: f" (DONE: {f'DONE rank {s}' in r.stdout})")
    if "WRONG" in r.stdout:
        problems.append("a rank returned a wrong result")
    if not re.search(rf"dcomm-run:   \[1\] rank {victim} \(", r.stderr):
        problems.append(f"dcomm-run's summary does not put rank {victim} first")
    # This run's segments: the shm transport's carry the run id, the collectives' windows their owner's pid.
    leaked = [e for e in shm_entries() - before
              if any(e.startswith(f"dcomm-{run}-") for run in runs)
              or any(e.startswith(f"dcomm-coll-{p}-") or e.startswith(f"dcomm-{p}-") for p in pids)]
    if leaked:
        problems.append(f"left in /dev/shm: {leaked}")
    if problems:
        problems.insert(0, f"--- {transport} n={n} victim={victim} kill at {after} s (exit {r.returncode}):\n{out}")
    return problems, slowest


def check_kill_survivors(stdout, n, victim, killed_at, problems, note=lambda s: ""):
    """Every rank but the victim failed within DETECT_S of the kill, named the victim and blamed no survivor (a
    problem for each that did not); returns the slowest detection in s. tests/failure/cross_node.py uses it too."""
    slowest = 0.0
    for s, (at, _, code, text) in survivor_reports(stdout, n, victim, problems, note):
        slowest = max(slowest, at - killed_at)
        if at - killed_at > DETECT_S:
            problems.append(f"rank {s} failed {at - killed_at:.2f} s after the kill (> {DETECT_S} s)")
        if not re.search(rf"rank\(?s?\)? {victim}\b", text):
            problems.append(f"rank {s} does not name rank {victim}: {text}")
        elif blamed_survivors(text, victim, n):
            problems.append(f"rank {s} blames survivor(s) {blamed_survivors(text, victim, n)}: {text}")
    return slowest


def survivor_reports(stdout, n, victim, problems, note=lambda s: ""):
    """(rank, report) for every rank but the victim that reported an error; a problem for each that did not."""
    found = survivors_of(stdout)
    for s in range(n):
        if s == victim:
            continue
        if s not in found:
            problems.append(f"rank {s} reported no error{note(s)}")
            continue
        yield s, found[s]


def check_stop(transport, n, victim):
    r, _ = launch(transport, n, victim, 1.5, signal="STOP", timeout_s=STOP_TIMEOUT_S)
    out = r.stdout + r.stderr
    problems = []
    for s, (_, call_s, code, text) in survivor_reports(r.stdout, n, victim, problems):
        if not (STOP_TIMEOUT_S * 0.95 <= call_s <= STOP_TIMEOUT_S * 1.05):
            problems.append(f"rank {s} failed after {call_s:.2f} s in the call, not within 5% of {STOP_TIMEOUT_S} s")
        if not re.search(rf"rank {victim}\b", text) or blamed_survivors(text, victim, n):
            problems.append(f"rank {s} does not blame rank {victim} alone: {text}")
    if not re.search(rf"dcomm-run:   \[1\] rank {victim} \(.*stopped", r.stderr):
        problems.append(f"dcomm-run's summary does not put the stopped rank {victim} first")
    if not re.search(rf"flight recorder: .*rank {victim}\b", out):
        problems.append("no flight-recorder report names the stopped rank")
    if problems:
        problems.insert(0, f"--- stop {transport} n={n} victim={victim} (exit {r.returncode}):\n{out}")
    return problems, out


def check_sleep(transport, n, victim):
    """A rank alive but in user code: the report says where it is, and every survivor blames it."""
    timeout_s = STOP_TIMEOUT_S
    r, _ = launch(transport, n, victim, 1.0, signal="SLEEP", timeout_s=timeout_s,
                  extra_env={"DCOMM_FLIGHT_RECORDER_DUMP": "stderr"})
    out = r.stdout + r.stderr
    problems = []
    for s, (_, call_s, code, text) in survivor_reports(r.stdout, n, victim, problems):
        if code != "Timeout" or not (timeout_s * 0.95 <= call_s <= timeout_s * 1.05):
            problems.append(f"rank {s}: [{code}] after {call_s:.2f} s, not a timeout within 5% of {timeout_s} s")
        if first_culprit(text) != victim:
            problems.append(f"rank {s} does not blame rank {victim} first: {text}")
    if not re.search(rf"dcomm-run:   \[1\] rank {victim} \(.*held up all_reduce #\d+", r.stderr):
        problems.append(f"dcomm-run's summary does not put rank {victim}, which held up the call, first")
    if not re.search(rf"flight recorder: .*rank {victim} last finished all_reduce #\d+ and is in user code", out):
        problems.append(f"no flight-recorder report says rank {victim} is in user code")
    # DCOMM_FLIGHT_RECORDER_DUMP=stderr: each survivor dumps its recorder at exit.
    for s in range(n):
        if s != victim and not (re.search(rf"\[rank {s}\]: dcomm flight recorder: rank {s}/{n} ", r.stderr) and
                                re.search(rf"\[rank {s}\]:     #\d+ all_reduce\[\w+\] float32 x \d+", r.stderr)):
            problems.append(f"rank {s} wrote no flight-recorder dump at exit")
    if problems:
        problems.insert(0, f"--- sleep {transport} n={n} victim={victim} (exit {r.returncode}):\n{out}")
    return problems


def kill_case(transport, n, extra_env=None, moments=KILL_MOMENTS):
    problems = []
    slowest = 0.0
    # A bounded loop: every moment once, the victim cycling through first, middle and last ranks.
    rng = random.Random()
    for i, moment in enumerate(moments):
        victim = [0, n // 2, n - 1][i % 3]
        after = round(moment * rng.uniform(0.8, 1.2), 3)  # a random moment near each phase; failures print it
        p, s = check_kill(transport, n, victim, after, extra_env)
        problems += p
        slowest = max(slowest, s)
    print(f"{len(moments)} kills over {transport} at {n} ranks; slowest detection {slowest:.2f} s")
    return problems


def matrix(runs):
    rng = random.Random(12)
    total = right = 0
    slowest = 0.0
    failures = []
    for i in range(runs):
        transport = ["shm", "ucx"][i % 2]
        n = [4, 5][(i // 2) % 2]
        victim = rng.randrange(n)
        after = rng.choice(KILL_MOMENTS + [rng.uniform(0.05, 3.0)])
        p, s = check_kill(transport, n, victim, after)
        total += 1
        right += not p
        slowest = max(slowest, s)
        if p:
            failures.append(p)
        print(f"run {i + 1}: {transport} n={n} victim={victim} at {after:.2f} s: "
              f"{'ok' if not p else 'FAILED'} (detection {s:.2f} s)", flush=True)
    print(f"runs: {total}; every survivor named the dead rank within {DETECT_S} s, no segment left: {right}; "
          f"slowest detection: {slowest:.2f} s")
    for p in failures:
        print("\n".join(p))
    _, out = check_stop("shm", 4, 1)
    print("stalled-rank report (shm, 4 ranks, rank 1 SIGSTOP'd, timeout 8 s):")
    print("\n".join(l for l in out.splitlines() if "SURVIVOR" in l or "flight recorder" in l or "dcomm-run" in l))
    return 0 if right == total else 1


if __name__ == "__main__":
    DCOMM_RUN, PROG, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
    if CASE == "matrix":
        sys.exit(matrix(int(sys.argv[4])))
    kind, transport, n = CASE.split("_")
    if kind == "kill":
        problems = kill_case(transport, int(n))
    elif kind == "reprobe":
        # 2 ranks on 2 cores measure the window stores again (the engine), here before every call after a large one:
        # a kill lands in a measurement as often as in a call, and every survivor must still name the victim.
        problems = kill_case(transport, int(n), {"DCOMM_SHM_REPROBE_CALLS": "1"})
    elif kind == "rounds":
        # all_gather, all_to_all, broadcast, gather and scatter through the shared-memory windows in rounds (forced:
        # whatever the machine measures), every call judged slow and the windows measured again before every call
        # after a large one: kills land in rounds, barriers and measurements inside calls, and every survivor must
        # still name the victim.
        problems = kill_case(transport, int(n), {"KILL_MOVE": "1", "DCOMM_ALGO": "all_gather:shm_rounds,all_to_all:shm_rounds,"
                                                 "broadcast:shm_rounds,gather:shm_rounds,scatter:shm_rounds",
                                                 "DCOMM_SHM_SLOW_FACTOR": "0", "DCOMM_SHM_REPROBE_CALLS": "1"})
    elif kind == "tune":
        # Every collective in turn with the group measuring its choices (DCOMM_TUNE=on): the first call of each
        # collective and size class runs every algorithm a few times (the loop's first 0.1-0.4 s here), so the kills,
        # timed from the loop's start, land in measurements as well as in calls, and every survivor must still name
        # the victim.
        problems = kill_case(transport, int(n), {"KILL_MOVE": "1", "DCOMM_TUNE": "on", "KILL_FROM": "loop"},
                             [0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0])
    elif kind == "stop":
        problems = check_stop(transport, int(n), int(n) // 2)[0]
    else:
        problems = check_sleep(transport, int(n), int(n) - 1)
    if problems:
        print("\n".join(problems))
        print(f"{CASE}: FAILED")
        sys.exit(1)
    print(f"{CASE}: passed")
