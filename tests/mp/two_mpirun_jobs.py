#!/usr/bin/env python3
"""Two mpirun jobs at once on this host, neither with MASTER_ADDR/MASTER_PORT: each must rendezvous in its own
store (on a port derived from its job id) and succeed. Before, both reached for port 29500 and one failed.
Usage: two_mpirun_jobs.py PROGRAM. Skips (77) without mpirun."""
import os
import shutil
import subprocess
import sys
import tempfile

RANKS = 3
prog = sys.argv[1]
mpirun = shutil.which("mpirun")
if mpirun is None:
    print("skip: no mpirun")
    sys.exit(77)
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("DCOMM_", "MASTER_", "OMPI_", "PMIX_", "SLURM_"))
       and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
cmd = [mpirun, "-n", str(RANKS), "--oversubscribe"]
if os.geteuid() == 0:
    cmd.append("--allow-run-as-root")
# Each job gets a temporary folder of its own: OpenMPI 4's launcher creates its session folder (/tmp/ompi.HOST.UID)
# by "exists? else mkdir", and two launchers starting together on a host where it does not exist yet (a fresh
# machine, or after the last job removed it) race, one failing with "mkdir ... File exists" before dcomm runs. Jobs
# of two users, or under a batch system, have their own anyway; what this test is about is the store's port.
tmpdirs = [tempfile.TemporaryDirectory(prefix=f"dcomm-mpirun-job{i}-") for i in range(2)]
jobs = [subprocess.Popen(cmd + [prog], env={**env, "TMPDIR": tmpdirs[i].name}, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
        for i in range(2)]
failed = False
for i, job in enumerate(jobs):
    try:
        out, _ = job.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        job.kill()
        out, _ = job.communicate()
        print(f"job {i}: timed out")
    ok = out.count(": ok") == RANKS and job.returncode == 0
    print(f"== job {i}: exit {job.returncode}\n{out}")
    failed |= not ok
if failed:
    sys.exit("FAIL: both jobs must succeed on every rank")
print("ok: two concurrent mpirun jobs without MASTER_PORT")
