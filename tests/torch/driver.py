"""The torch suite's driver: runs one case (a script of this folder on N ranks, launched by dcomm-run or torchrun)
and checks the launcher's outcome. Exits 77 (skip) when this Python has no torch or no dcomm_torch.

    driver.py CASE LAUNCHER NPROC [ARGS...]   CASE: collectives, ddp, kill, monitored, store, generic
"""
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BOUND_S = 600  # a generous bound on one launch on a loaded 2-core machine


def skip_without_torch():
    try:
        import torch  # noqa: F401
        import dcomm_torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {sys.executable} cannot import torch and dcomm_torch ({e}); install python3-torch and "
              "libtorch-dev (scripts/install-deps.sh) and configure with -Dtorch=enabled", flush=True)
        sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def launch(launcher, nproc, script_args, env=None):
    if launcher == "dcomm-run":
        cmd = [os.path.join(os.environ["DCOMM_BUILD_DIR"], "tools", "dcomm-run"), "--nproc-per-node", str(nproc),
               "--", sys.executable]
    else:
        # torchrun on this Python needs --redirects/--tee (its default output handling crashes on 3.11).
        cmd = [sys.executable, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2", "--nproc_per_node",
               str(nproc), "--master_addr", "127.0.0.1", "--master_port", free_port()]
    cmd += script_args
    print("$", " ".join(cmd), flush=True)
    start = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=BOUND_S,
                       env=env, cwd=HERE)
    print(r.stdout, flush=True)
    print(f"exit {r.returncode} after {time.monotonic() - start:.1f} s", flush=True)
    return r


def expect(cond, what):
    if not cond:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def main():
    case, launcher, nproc, rest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    skip_without_torch()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("DCOMM_TORCH_TEST_TIMEOUT_S", "120")
    if case in ("collectives", "ddp"):
        r = launch(launcher, nproc, [os.path.join(HERE, f"test_{case}.py")] + rest, env)
        expect(r.returncode == 0, f"{case} on {nproc} ranks under {launcher}")
        expect(r.stdout.count("OK:") >= (1 if case == "ddp" else nproc), "every rank reported OK")
    elif case == "kill":
        r = launch(launcher, nproc, [os.path.join(HERE, "test_failure.py"), "kill"], env)
        victim = nproc - 1
        expect(r.returncode != 0, "the launcher exits non-zero when a rank was killed")
        for rank in range(victim):
            expect(f"SURVIVOR rank {rank} " in r.stdout, f"rank {rank}'s all_reduce raised, naming rank {victim}")
        expect("FAIL:" not in r.stdout, "no survivor failed its checks")
        if launcher == "dcomm-run":
            expect(f"rank {victim}" in r.stdout and "SIGKILL" in r.stdout,
                   f"dcomm-run's summary names rank {victim}, killed by SIGKILL, as the root cause")
        else:
            expect("Signal 9 (SIGKILL)" in r.stdout or "SIGKILL" in r.stdout, "torchrun names the SIGKILL")
    elif case == "monitored":
        r = launch(launcher, nproc, [os.path.join(HERE, "test_failure.py"), "monitored"], env)
        expect("OK: monitoredBarrier raised" in r.stdout and "FAIL:" not in r.stdout,
               "rank 0's monitoredBarrier names the ranks that did not arrive")
    elif case == "store":
        cmd = [sys.executable, os.path.join(HERE, "test_store.py")]
        print("$", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, env=env, cwd=HERE, timeout=BOUND_S, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        print(r.stdout, flush=True)
        expect(r.returncode == 0 and "OK:" in r.stdout, "the store adapter's waits on a torch TCPStore")
    elif case == "generic":
        env["BACKEND"], env["WORLD_SIZE"] = "dcomm", str(nproc)
        cmd = [sys.executable, os.path.join(HERE, "generic", "run_generic.py")] + rest
        print("$", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, env=env, cwd=HERE, timeout=3600)
        expect(r.returncode == 0, "torch's generic suite passes")
    else:
        sys.exit(f"unknown case {case}")


if __name__ == "__main__":
    main()
