#!/usr/bin/env python3
"""dcomm-run with torchrun's vocabulary: each case runs the launcher with torchrun's flags on the probe program
and checks the ranks' variables, the per-rank log files, the console, the rendezvous and the program rewrite.

usage: torchrun_tests.py DCOMM_RUN PROBE CASE    (CASE is one of the functions named case_*)
"""
import os
import re
import subprocess
import sys
import tempfile

import launcher_tests as lt
from launcher_tests import check, check_env, finish, free_port, parse_env, rank_lines, run


def case_torch_env():
    """--rdzv-id, --role, --max-restarts, --monitor-interval, --rdzv-conf: the agent's variables."""
    r = run(["--nproc-per-node", "3", "--rdzv-id", "job-42", "--role", "trainer", "--max-restarts", "2",
             "--monitor-interval", "0.5", "--rdzv-conf", "join_timeout=30,read_timeout=5", "--", lt.PROBE, "env"])
    check_env(r, 3, max_restarts=2, role="trainer", rdzv_id="job-42")
    # Without --rdzv-id, TORCHELASTIC_RUN_ID is the launch's own run id (check_env compares it with DCOMM_RUN_ID).
    check_env(run(["--nproc-per-node", "2", "--", lt.PROBE, "env"]), 2)


def case_torch_nproc():
    """--nproc-per-node cpu|auto|gpu, --nnodes N:N, and a bad MIN:MAX (elastic runs: elastic_tests.py)."""
    cpus = len(os.sched_getaffinity(0))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    r = run(["--nproc-per-node", "cpu", "--nnodes", "1:1", "--", lt.PROBE, "env"], env=env)
    check_env(r, cpus)
    check_env(run(["--nproc-per-node", "auto", "--", lt.PROBE, "env"], env=env), cpus)
    r = run(["--nproc-per-node", "gpu", "--", lt.PROBE, "env"], env=env)
    check(r.returncode == 2 and "no GPU is visible" in r.stderr, "--nproc-per-node gpu without a GPU", r)
    env["CUDA_VISIBLE_DEVICES"] = "0,1"
    check_env(run(["--nproc-per-node", "gpu", "--", lt.PROBE, "env"], env=env), 2)
    r = run(["--nproc-per-node", "1", "--nnodes", "3:1", "--", lt.PROBE, "env"])
    check(r.returncode == 2 and r.stderr == "dcomm-run: error: --nnodes 3:1: MIN:MAX needs 1 <= MIN <= MAX (got MIN 3, "
          "MAX 1)\n", "a bad MIN:MAX refused with a clear line", r)


def read(path):
    with open(path) as f:
        return f.read()


def case_torch_logs():
    """--log-dir, --tee, --redirects: torchrun's files <dir>/<run id>/attempt_<n>/<local rank>/std{out,err}.log."""
    with tempfile.TemporaryDirectory() as d:
        r = run(["--nproc-per-node", "2", "--rdzv-id", "j1", "--log-dir", d, "--tee", "3", "--", lt.PROBE, "output"])
        check(r.returncode == 0, "teed run", r)
        for local in range(2):
            folder = os.path.join(d, "j1", "attempt_0", str(local))
            check(read(os.path.join(folder, "stdout.log")) == "alpha\nbeta\nno newline\n", f"{folder}/stdout.log", r)
            check(read(os.path.join(folder, "stderr.log")) == "to stderr\n", f"{folder}/stderr.log", r)
            check(rank_lines(r.stdout, local) == ["alpha", "beta", "no newline"], "teed stdout stays on the console", r)
    with tempfile.TemporaryDirectory() as d:
        # stdout of local rank 0 redirected (file only); everything else on the console only.
        r = run(["--nproc-per-node", "2", "--rdzv-id", "j2", "--log-dir", d, "--redirects", "0:1", "--", lt.PROBE,
                 "output"])
        check(r.returncode == 0, "redirected run", r)
        check(rank_lines(r.stdout, 0) == [] and rank_lines(r.stdout, 1) == ["alpha", "beta", "no newline"],
              "rank 0's stdout is off the console", r)
        check(read(os.path.join(d, "j2", "attempt_0", "0", "stdout.log")) == "alpha\nbeta\nno newline\n",
              "rank 0's stdout.log", r)
        check(not os.path.exists(os.path.join(d, "j2", "attempt_0", "1")), "rank 1 has no files", r)
        check(rank_lines(r.stderr, 0) == ["to stderr"], "rank 0's stderr stays on the console", r)
    # --redirects without --log-dir: a temporary folder, named on stderr.
    r = run(["--nproc-per-node", "1", "--rdzv-id", "j3", "--redirects", "3", "--", lt.PROBE, "output"])
    m = re.search(r"the ranks' log files go to (\S+)", r.stderr)
    check(r.returncode == 0 and m and not rank_lines(r.stdout, 0), "a temporary log folder is named", r)
    check(read(os.path.join(m.group(1), "j3", "attempt_0", "0", "stderr.log")) == "to stderr\n", "temp stderr.log", r)
    subprocess.run(["rm", "-rf", m.group(1)], check=False)


def case_torch_filter():
    """--local-ranks-filter: only those local ranks reach the console; a failure's summary still names any rank."""
    r = run(["--nproc-per-node", "3", "--local-ranks-filter", "1", "--", lt.PROBE, "output"])
    check(r.returncode == 0, "filtered run", r)
    check(rank_lines(r.stdout, 0) == [] and rank_lines(r.stdout, 2) == [], "ranks 0 and 2 are filtered out", r)
    check(rank_lines(r.stdout, 1) == ["alpha", "beta", "no newline"], "rank 1's output stays", r)
    r = run(["--nproc-per-node", "2", "--local-ranks-filter", "0", "--", lt.PROBE, "fail", "1", "3", "200"])
    check(r.returncode == 1 and "dcomm-run:         rank 1 about to fail" in r.stderr,
          "a filtered rank's last stderr lines are in the summary", r)


def case_torch_rdzv():
    """--rdzv-backend c10d|static with --rdzv-endpoint: node 0's launcher hosts the store there, as torchrun."""
    for backend in ("c10d", "static"):
        port = free_port()
        procs = []
        for node in range(2):
            args = ["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2", "--rdzv-backend", backend,
                    "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "rj", "--", lt.PROBE, "env"]
            procs.append(subprocess.Popen([lt.DCOMM_RUN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        for node, r in enumerate(finish(procs)):
            check_env(r, 2, nnodes=2, node_rank=node, rdzv_id="rj")
            env = parse_env(r.stdout, node * 2)
            # dcomm's store at the endpoint; torch's own env:// store (MASTER_PORT) next to it (docs/torch.md).
            check(env["DCOMM_MASTER_PORT"] == port and env["MASTER_PORT"] == str(int(port) + 1),
                  f"{backend}: the endpoint's port", r)


def case_torch_python():
    """A .py program runs under python3 -u as torchrun runs it; -m runs a module; --no-python runs it as is."""
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "train.py")
        with open(script, "w") as f:
            f.write("import os, sys\nprint('script', os.environ['RANK'], os.environ['ROLE_NAME'], *sys.argv[1:])\n")
        os.makedirs(os.path.join(d, "pkg"))
        with open(os.path.join(d, "pkg", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(d, "pkg", "main.py"), "w") as f:
            f.write("import os\nprint('module', os.environ['RANK'], __name__)\n")
        r = run(["--nproc-per-node", "2", script, "--lr", "0.1"])
        for rank in range(2):
            check(rank_lines(r.stdout, rank) == [f"script {rank} default --lr 0.1"], "a .py script under python3", r)
        r = run(["--nproc-per-node", "2", "--run-path", script])
        check(rank_lines(r.stdout, 1) == ["script 1 default"], "--run-path", r)
        env = dict(os.environ, PYTHONPATH=d)
        r = run(["--nproc-per-node", "2", "-m", "pkg.main"], env=env)
        check(r.returncode == 0 and rank_lines(r.stdout, 1) == ["module 1 __main__"], "-m pkg.main", r)
        r = run(["--nproc-per-node", "1", "--no-python", script])
        check(r.returncode == 127 and "not an executable file" in r.stderr, "--no-python runs the file itself", r)


def case_typo():
    """A mistyped flag is named, with the flag it is near."""
    r = run(["--nproc-per-nod", "2", "--", lt.PROBE, "env"])
    check(r.returncode == 2 and r.stderr.splitlines() == [
        "dcomm-run: error: unknown option '--nproc-per-nod'; did you mean --nproc-per-node? (options go before the "
        "program; put the program after --)"], "the typo named with a suggestion", r)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[3] in {"torch_rdzv"}:
        os.environ["DCOMM_STORE_SECRET"] = "launcher-tests-shared-secret"  # several launchers share the user's
    sys.exit(lt.run_case_from_argv(globals(), "PROBE", __doc__))
