#!/usr/bin/env python3
"""dcomm-bench in real processes through dcomm-run: checked runs that must find 0 wrong elements, the JSON and
CSV of a real run, the report of a stalled rank, usage errors, and --vs mpi. Usage: mp_bench.py CASE."""
import csv
import json
import os
import subprocess
import sys
import tempfile

BUILD = os.environ["DCOMM_BUILD_DIR"]
RUN = os.path.join(BUILD, "tools", "dcomm-run")
BENCH = os.path.join(BUILD, "tools", "bench", "dcomm-bench")


def launch(nproc, *args, expect_ok=True, env=None):
    cmd = [RUN, "--standalone", "--nproc-per-node", str(nproc), "--", BENCH, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env=None if env is None else {**os.environ, **env})
    text = p.stdout + p.stderr
    if expect_ok and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{text}")
    return p.returncode, text


def require(cond, what, text=""):
    if not cond:
        sys.exit(f"FAIL: {what}\n{text}")


def typed(obj, key, types):
    require(key in obj, f"JSON: key '{key}' missing from {sorted(obj)}")
    require(isinstance(obj[key], types) and not (isinstance(obj[key], bool) and bool not in types),
            f"JSON: '{key}' is {type(obj[key]).__name__}, expected {types}")


def check_schema(doc, world):
    for k, t in [("tool", (str,)), ("version", (str,)), ("world_size", (int,)), ("arguments", (dict,)),
                 ("environment", (dict,)), ("machine", (dict,)), ("results", (list,)), ("summary", (dict,))]:
        typed(doc, k, t)
    require(doc["world_size"] == world, "JSON: world_size")
    for k, t in [("hostname", (str,)), ("cores", (int,)), ("cpu_model", (str,)), ("memory_bytes", (int,))]:
        typed(doc["machine"], k, t)
    for k, t in [("argv", (list,)), ("collectives", (list,)), ("min_bytes", (int,)), ("iters", (int,)),
                 ("check", (bool,)), ("timeout_s", (int, float))]:
        typed(doc["arguments"], k, t)
    require(doc["results"], "JSON: no results")
    for r in doc["results"]:
        for k, t in [("library", (str,)), ("collective", (str,)), ("algorithm", (str,)), ("dtype", (str,)),
                     ("bytes", (int,)), ("count", (int,)), ("inplace", (bool,)), ("time_us", (dict,)),
                     ("algbw_gbps", (int, float)), ("busbw_gbps", (int, float)), ("wrong", (int,)),
                     ("slowest_rank", (int,)), ("ranks", (list,))]:
            typed(r, k, t)
        for k in ("mean", "min", "max", "p50", "p99", "loop"):
            typed(r["time_us"], k, (int, float))
        require(r["skipped"] is not None or len(r["ranks"]) == world, "JSON: one entry per rank")
    typed(doc["summary"], "avg_busbw", (list,))
    typed(doc["summary"], "wrong", (int,))


def case_check2():
    """2 ranks, every collective and algorithm, odd sizes, --check: 0 wrong; JSON and CSV agree."""
    with tempfile.TemporaryDirectory() as d:
        jpath, cpath = os.path.join(d, "r.json"), os.path.join(d, "r.csv")
        _, text = launch(2, "all", "-b", "12", "-e", "1500", "-f", "5", "-n", "2", "-w", "1", "--check",
                         "--algo", "all", "--json", jpath, "--csv", cpath)
        require("# Wrong elements: 0" in text, "expected 0 wrong elements", text)
        doc = json.load(open(jpath))
        check_schema(doc, 2)
        colls = {r["collective"] for r in doc["results"]}
        require(len(colls) == 10, f"expected 10 collectives, got {sorted(colls)}")
        require(all(r["wrong"] == 0 for r in doc["results"]), "a row has wrong elements")
        algos = {r["algorithm"] for r in doc["results"] if r["collective"] == "all_reduce"}
        require(len(algos) >= 2, f"--algo all ran only {algos}")
        require(all(r["chosen_algorithm"] is None for r in doc["results"]), "--algo all names every algorithm")
        rows = list(csv.DictReader(open(cpath)))
        require(len(rows) == len(doc["results"]), "CSV and JSON row counts differ")


def case_check3():
    """3 ranks (not a power of two), every dtype and op, in place and not: 0 wrong."""
    for extra in ([], ["--inplace"]):
        _, text = launch(3, "all_reduce", "-d", "all", "-o", "all", "-b", "12", "-e", "300", "-f", "5", "-n", "1",
                         "-w", "0", "--check", *extra)
        require("# Wrong elements: 0" in text, f"all_reduce {extra}: expected 0 wrong", text)
        _, text = launch(3, "reduce_scatter", "-d", "all", "-o", "all", "-b", "36", "-e", "36", "-n", "1", "-w", "0",
                         "-r", "2", "--check", *extra)
        require("# Wrong elements: 0" in text, f"reduce_scatter {extra}: expected 0 wrong", text)
    _, text = launch(3, "all", "-b", "12", "-e", "300", "-f", "5", "-n", "1", "-w", "0", "-r", "2", "--check",
                     "--inplace")
    require("# Wrong elements: 0" in text, "in-place collectives: expected 0 wrong", text)


def case_rules():
    """--rules-out from a run of every row, then auto under DCOMM_RULES_FILE: every size it measured runs the rule's
    algorithm, checked (0 wrong); a size it did not measure goes to the model."""
    with tempfile.TemporaryDirectory() as d:
        rules_path = os.path.join(d, "rules.json")
        launch(3, "all", "-b", "96", "-e", "96K", "-f", "32", "-n", "3", "-w", "1", "--algo", "all", "--check",
               "--rules-out", rules_path)
        with open(rules_path) as f:
            rules = json.load(f)["rules"]
        colls = {r["collective"] for r in rules}
        require({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"} <= colls,
                f"rules for every collective measured, got {sorted(colls)}", json.dumps(rules))
        require(all(r["ranks"] == 3 for r in rules), "rules for 3 ranks", json.dumps(rules))
        out = os.path.join(d, "auto.json")
        _, text = launch(3, "all", "-b", "96", "-e", "3M", "-f", "32", "-n", "3", "-w", "1", "--check",
                         "--json", out, env={"DCOMM_RULES_FILE": rules_path})
        require("# Wrong elements: 0" in text, "auto under the rules: expected 0 wrong", text)
        with open(out) as f:
            results = [r for r in json.load(f)["results"] if not r["skipped"] and r["collective"] not in
                       ("barrier", "sendrecv")]
        ruled = 0
        for r in results:
            match = [x for x in rules if x["collective"] == r["collective"] and x["min_bytes"] <= r["bytes"] <
                     x.get("max_bytes", 2**64)]
            if match:
                ruled += 1
                require(r["chosen_algorithm"] == match[0]["algorithm"],
                        f"{r['collective']} {r['bytes']} B chose {r['chosen_algorithm']}, the rule says "
                        f"{match[0]['algorithm']}", json.dumps(match))
        require(ruled >= 10, f"only {ruled} rows fell under a rule", json.dumps(rules))
        require(any(r["bytes"] > 96 * 1024 for r in results), "a size past the measured ones ran", text)


def case_tune():
    """DCOMM_TUNE's default on 3 ranks sharing 2 cores: the first call of every collective at each size class from
    4 KiB measures the rows, every rank learns the same rule at the same call, auto then runs the learned row, and
    every result is right (0 wrong); with DCOMM_TUNE=off nothing is measured. On a machine of 3 cores or more the
    ranks do not share cores and auto measures nothing: DCOMM_TUNE=on makes the test the same there."""
    import re
    pattern = re.compile(r"rank (\d+)/3: (\w+) measured, \w+ on 3 ranks, (.+?): (\w+): before call #(\d+)")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "auto.json")
        env = {"DCOMM_LOG_LEVEL": "debug"}
        if (os.cpu_count() or 1) >= 3:
            env["DCOMM_TUNE"] = "on"
        _, text = launch(3, "all", "-b", "1000", "-e", "2M", "-f", "9", "-n", "3", "-w", "1", "--check", "-r", "1",
                         "--json", out, env=env)
        require("# Wrong elements: 0" in text, "auto, measured online: expected 0 wrong", text)
        learned = {}
        for m in pattern.finditer(text):
            rank, coll, span, algo, seq = m.groups()
            learned.setdefault((coll, span, seq), {})[int(rank)] = algo
        require(learned, "no measurement in the log", text[-3000:])
        for key, by_rank in learned.items():
            require(len(by_rank) == 3 and len(set(by_rank.values())) == 1,
                    f"{key}: every rank must learn the same row at the same call, got {by_rank}", text[-3000:])
        colls = {k[0] for k in learned}
        require({"all_reduce", "reduce", "reduce_scatter", "broadcast", "scatter", "gather", "all_gather",
                 "all_to_all"} <= colls, f"every collective measured, got {sorted(colls)}", text[-3000:])
        with open(out) as f:
            results = [r for r in json.load(f)["results"] if not r["skipped"] and r["library"] == "dcomm"
                       and r["collective"] not in ("barrier", "sendrecv")]
        for r in results:
            if r["bytes"] >= 9000:  # every size from 9,000 B was measured (sizes 1000, 9000, 81000, 729000 B)
                rows = {v[0] for k, v in learned.items() if k[0] == r["collective"]}
                require(r["chosen_algorithm"] in rows, f"{r['collective']} {r['bytes']} B ran "
                        f"{r['chosen_algorithm']}, not a learned row ({sorted(rows)})", text[-3000:])
        _, text = launch(3, "all_reduce", "-b", "9000", "-e", "9000", "-n", "3", "-w", "1", "--check",
                         env={"DCOMM_LOG_LEVEL": "debug", "DCOMM_TUNE": "off"})
        require("# Wrong elements: 0" in text and " measured, " not in text, "DCOMM_TUNE=off measured", text)


def case_windows():
    """all_reduce and reduce [shm_direct] and all_gather, all_to_all, broadcast, gather, scatter and reduce_scatter [shm_rounds] in real processes with each way of filling the
    windows forced (plain stores in 1 MiB rounds, non-temporal in 4 MiB rounds) and with the probe's own answer:
    sizes from 1 KB to past several rounds, in place and not, a root that is not rank 0, 2 and 3 ranks: 0 wrong."""
    for cached in ("1", "0", None):
        env = {} if cached is None else {"DCOMM_SHM_CACHED": cached}
        for nproc in (2, 3):
            for coll, extra, algo in (("all_reduce", [], "shm_direct"), ("all_reduce", ["--inplace"], "shm_direct"),
                                      ("reduce", ["-r", str(nproc - 1)], "shm_direct"),
                                      ("all_gather", [], "shm_rounds"), ("all_gather", ["--inplace"], "shm_rounds"),
                                      ("all_to_all", [], "shm_rounds"), ("all_to_all", ["--inplace"], "shm_rounds"),
                                      ("broadcast", ["-r", str(nproc - 1)], "shm_rounds"),
                                      ("gather", ["-r", str(nproc - 1)], "shm_rounds"),
                                      ("scatter", ["-r", str(nproc - 1), "--inplace"], "shm_rounds"),
                                      ("reduce_scatter", ["-o", "all"], "shm_rounds"),
                                      ("reduce_scatter", ["--inplace"], "shm_rounds")):
                _, text = launch(nproc, coll, "-b", "1000", "-e", "8M", "-f", "9", "-n", "2", "-w", "0", "--algo",
                                 algo, "-d", "float64", "--check", *extra, env=env)
                require("# Wrong elements: 0" in text,
                        f"{coll} {extra} on {nproc} ranks, DCOMM_SHM_CACHED={cached}: expected 0 wrong", text)
    # Measured again before every call (the engine, DCOMM_SHM_REPROBE_CALLS=1): whichever way wins each time, and a
    # switch changes the round size on every rank at once and the model's choices, the results stay right. 2 ranks
    # (dcomm-run binds none: 2 ranks on 2 cores do not share them, so they measure).
    env = {"DCOMM_SHM_REPROBE_CALLS": "1", "DCOMM_LOG_LEVEL": "debug"}
    for coll, extra in (("all_reduce", []), ("reduce", ["-r", "1"])):
        _, text = launch(2, coll, "-b", "1M", "-e", "9M", "-f", "2", "-n", "3", "-w", "1", "--algo", "shm_direct",
                         "-d", "float64", "--check", *extra, env=env)
        require("# Wrong elements: 0" in text, f"{coll} {extra}, measured after every call: expected 0 wrong", text)
        require("window stores measured again" in text, f"{coll}: no measurement between the calls", text[-3000:])
    # Every round of plain stores judged slow (DCOMM_SHM_SLOW_FACTOR=0): the next call check carries the note and
    # every rank measures again right after it, in the middle of a call, and the results stay right. Only where the
    # probe chose plain stores at some point (the machine decides): then the measurement must be seen in the log.
    slow = {"DCOMM_SHM_SLOW_FACTOR": "0", "DCOMM_LOG_LEVEL": "debug"}
    for coll in ("all_gather", "all_to_all"):
        _, text = launch(2, coll, "-b", "1M", "-e", "9M", "-f", "3", "-n", "8", "-w", "1", "--algo", "shm_rounds",
                         "-d", "float64", "--check", env=slow)
        require("# Wrong elements: 0" in text, f"{coll}, windows judged slow after every round: expected 0 wrong", text)
        # The probe's note ends with its answer: "... plain stores 50 us, non-temporal 128 us: plain stores".
        if "us: plain stores" in text:
            require("slower than the last measurement predicted" in text,
                    f"{coll}: plain stores judged slow, yet no rank measured again", text[-3000:])
    # auto, measured before every call: the choice may change from call to call, the results stay right.
    for coll in ("all_reduce", "all_gather", "all_to_all"):
        _, text = launch(2, coll, "-b", "4K", "-e", "9M", "-f", "4", "-n", "3", "-w", "1", "-d", "float32",
                         "--check", env=env)
        require("# Wrong elements: 0" in text, f"{coll} auto, measured before every call: expected 0 wrong", text)


def case_stall():
    """A rank that never arrives ends the run non-zero with a report naming it."""
    code, text = launch(3, "all_reduce", "-b", "1K", "-e", "4K", "-n", "2", "-w", "0", "--timeout", "1",
                        "--test-stall", "1", expect_ok=False)
    require(code != 0, "a stalled run must exit non-zero", text)
    require("rank(s) 1 did not arrive at this size" in text, "the report must name rank 1", text)
    require("(timeout 1.0 s)" in text or "timeout" in text, "the report must give the timeout", text)


def case_usage():
    """Mistakes only visible after joining still get one line and exit 2."""
    for args, needle in [(["all_reduce", "--algo", "nosuch"], "dcomm-bench: error: unknown algorithm 'nosuch'"),
                         (["broadcast", "-r", "5"], "dcomm-bench: error: -r 5: the world has 2 ranks")]:
        code, text = launch(2, *args, expect_ok=False)
        require(code != 0 and needle in text, f"{args}: expected '{needle}'", text)
        lines = [l for l in text.splitlines() if l.startswith("[rank ") and "dcomm-bench: error:" in l]
        require(len(lines) == 1, f"{args}: one line, from rank 0 only", text)


def case_vs_mpi():
    """--vs mpi under dcomm-run: MPI singletons joined through ompi-server, checked, ratio per size."""
    with tempfile.TemporaryDirectory() as d:
        jpath = os.path.join(d, "r.json")
        _, text = launch(2, "all_reduce", "-b", "8", "-e", "4K", "-f", "8", "-n", "2", "-w", "1", "--check",
                         "--vs", "mpi", "--json", jpath)
        require("# Wrong elements: 0" in text, "expected 0 wrong", text)
        doc = json.load(open(jpath))
        libs = {r["library"] for r in doc["results"]}
        require(libs == {"dcomm", "mpi"}, f"libraries {libs}")
        dcomm_rows = [r for r in doc["results"] if r["library"] == "dcomm"]
        require(all(r["algorithm"] == "auto" and isinstance(r["chosen_algorithm"], str) for r in dcomm_rows),
                "auto rows name the cost model's choice")
        require(all(isinstance(r["vs_mpi"], float) for r in dcomm_rows), "every dcomm row needs a ratio")


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]]()
    print("ok")
