#!/usr/bin/env python3
"""dcomm-run's elastic --nnodes MIN:MAX: several dcomm-run agents on this machine act as nodes and meet at the
first agent's store (127.0.0.1). Each rank runs elastic_job: an all_reduce checked against the serial sum, one
"ELASTIC ..." line, then it sleeps until stopped, or finishes when the test's done file exists.

usage: elastic_tests.py DCOMM_RUN ELASTIC_JOB CASE    (CASE is one of the functions named case_*)
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import launcher_tests as lt
from launcher_tests import check, free_port

JOB = None  # set by run_case_from_argv

# Generous bounds for a loaded 2-core machine; the agents' own timeouts are short so that each case takes seconds.
WAIT_S = 60
LINE = re.compile(r"\[rank (\d+)\]: ELASTIC round (\d+) restarts (\d+) rank (\d+)/(\d+) node (\d+)/(\d+) pid (\d+) "
                  r"(ok|WRONG) (finishing|sleeping)")


class Agent:
    """One dcomm-run agent, its output in files so that the test can watch it while it runs."""

    def __init__(self, workdir, name, args):
        self.name = name
        self.out_path = os.path.join(workdir, name + ".out")
        self.err_path = os.path.join(workdir, name + ".err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen([lt.DCOMM_RUN] + args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def out(self):
        with open(self.out_path) as f:
            return f.read()

    def err(self):
        with open(self.err_path) as f:
            return f.read()

    def lines(self, round_=None):
        """The ELASTIC lines of this agent's ranks, as dicts, of one round or all."""
        found = []
        for m in LINE.finditer(self.out()):
            d = dict(zip(["prefix", "round", "restarts", "rank", "world", "node", "nodes", "pid"],
                         map(int, m.groups()[:8])))
            d.update(ok=m.group(9) == "ok", finishing=m.group(10) == "finishing")
            if round_ is None or d["round"] == round_:
                found.append(d)
        return found


class Job:
    """Agents of one elastic job; every one left running at the end is killed."""

    def __init__(self, workdir, nnodes, nproc, extra=()):
        self.workdir = workdir
        self.done_file = os.path.join(workdir, "done")
        self.port = free_port()
        self.args = ["--nnodes", nnodes, "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
                     "--rdzv-endpoint", f"127.0.0.1:{self.port}", "--node-timeout", "5", "--failure-window", "0.5",
                     "--grace-period", "3", "--monitor-interval", "0.2"] + list(extra)
        self.agents = []

    def start(self, name, conf="last_call_timeout=1,join_timeout=40"):
        agent = Agent(self.workdir, name, self.args + ["--rdzv-conf", conf, "--", JOB, self.done_file])
        self.agents.append(agent)
        if len(self.agents) == 1:
            self.wait_listening(agent)
        return agent

    def wait_listening(self, agent):
        """The first agent hosts the store: the others are started once it listens, so that it is the host."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", int(self.port))) == 0:
                    return
            check(agent.proc.poll() is None, f"agent {agent.name} exited early:\n{agent.err()}")
            time.sleep(0.05)
        raise lt.CaseFailed("the first agent never listened")

    def describe(self):
        return "".join(f"\n--- {a.name} (exit {a.proc.poll()}):\n{a.out()}{a.err()}" for a in self.agents)

    def wait_round(self, round_, world, agents):
        """Waits until the ranks of `agents` printed their line for `round_` (None: the first round of `world`
        ranks; on a loaded machine the last call can close a round before every agent started, and the next
        round admits the late one); checks its world and results, and returns the lines."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if round_ is None:
                full = sorted({line["round"] for a in agents for line in a.lines() if line["world"] == world})
                got = [line for a in agents for line in a.lines(full[0])] if full else []
            else:
                got = [line for a in agents for line in a.lines(round_)]
            if len(got) == world:
                break
            time.sleep(0.1)
        else:
            raise lt.CaseFailed(f"round {round_}: expected {world} ranks' lines" + self.describe())
        round_ = got[0]["round"]
        check(sorted(line["rank"] for line in got) == list(range(world)), f"round {round_}: ranks 0..{world - 1} once"
              + self.describe())
        check(all(line["world"] == world and line["ok"] and line["prefix"] == line["rank"] for line in got),
              f"round {round_}: world size {world} and a correct all_reduce on every rank" + self.describe())
        return got

    def wait_exit(self, agent, code):
        try:
            rc = agent.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            raise lt.CaseFailed(f"agent {agent.name} did not exit" + self.describe())
        check(rc == code, f"agent {agent.name}: expected exit {code}, got {rc}" + self.describe())

    def kill_all(self):
        for a in self.agents:
            if a.proc.poll() is None:
                a.proc.kill()
                a.proc.wait()


def with_job(nnodes, nproc, body, extra=()):
    with tempfile.TemporaryDirectory() as d:
        job = Job(d, nnodes, nproc, extra)
        try:
            body(job)
        finally:
            job.kill_all()
            if os.environ.get("ELASTIC_TESTS_SHOW"):  # to read what the agents said in a passing case
                print(job.describe())


def case_elastic_grow():
    """MIN 2 MAX 3: two agents start a world of 2 nodes; a third agent's arrival makes a new round of 3 nodes
    (workers restarted, the world grows, no restart used), and the job finishes."""
    def body(job):
        a, b = job.start("a"), job.start("b")
        first = job.wait_round(0, 4, [a, b])
        check(all(line["nodes"] == 2 and line["restarts"] == 0 for line in first), "round 0: 2 nodes" + job.describe())
        open(job.done_file, "w").close()
        c = job.start("c")
        second = job.wait_round(1, 6, [a, b, c])
        check(all(line["nodes"] == 3 and line["restarts"] == 0 and line["finishing"] for line in second),
              "round 1: 3 nodes, TORCHELASTIC_RESTART_COUNT 0 (an admission uses no restart)" + job.describe())
        check(sorted(line["node"] for line in second) == [0, 0, 1, 1, 2, 2], "node ranks 0, 1, 2" + job.describe())
        for agent in (a, b, c):
            job.wait_exit(agent, 0)
        check("its agents will rendezvous again to admit this one" in c.err(), "the late agent is told" + job.describe())
        check("1 agent(s) wait to join round 0, which has 2 of at most 3 nodes" in a.err(),
              "the running agents say why they stop" + job.describe())
    with_job("2:3", 2, body)


def three_nodes(job, finish_next=True):
    """Three agents in a round of 3 nodes: returns the agents, the round, and an agent to kill."""
    agents = [job.start(name) for name in ("a", "b", "c")]
    round_ = job.wait_round(None, 3, agents)[0]["round"]
    if finish_next:
        open(job.done_file, "w").close()
    # Not the first agent: it hosts the store, and its loss ends the job (as torchrun's c10d host's does).
    victim = agents[1] if agents[1].lines(round_)[0]["node"] == 2 else agents[2]
    return agents, round_, victim


def case_elastic_agent_lost():
    """MIN 2 MAX 3, three agents: one agent is killed; the others notice its silence (--node-timeout), use a
    restart, and finish in a round of 2 nodes."""
    def body(job):
        agents, round_, victim = three_nodes(job)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        rest = [a for a in agents if a is not victim]
        second = job.wait_round(round_ + 1, 2, rest)
        check(all(line["restarts"] == 1 and line["nodes"] == 2 for line in second),
              "round 1: 2 nodes, TORCHELASTIC_RESTART_COUNT 1" + job.describe())
        for agent in rest:
            job.wait_exit(agent, 0)
            check("stopped responding: no heartbeat in the store" in agent.err() and
                  "restarting the group (restart 1 of 1)" in agent.err(), "the lost agent is named" + job.describe())
    with_job("2:3", 1, body, ["--max-restarts", "1"])


def case_elastic_worker_killed():
    """MIN 2 MAX 3, three agents: a worker is killed; every agent stops its workers and a new round (a restart)
    starts them again on the same 3 nodes, as torchrun does (the agent of the dead worker is alive); a second
    worker killed with no restart left fails the job on every agent, each naming that worker."""
    def body(job):
        agents, round_, victim = three_nodes(job, finish_next=False)
        os.kill(victim.lines(round_)[0]["pid"], signal.SIGKILL)
        second = job.wait_round(round_ + 1, 3, agents)
        check(all(line["restarts"] == 1 for line in second), "round 1: TORCHELASTIC_RESTART_COUNT 1" + job.describe())
        dead = second[0]
        os.kill(dead["pid"], signal.SIGKILL)
        named = (f"dcomm-run:   [1] rank {dead['rank']} (local rank 0, node {dead['node']}, host "
                 f"{socket.gethostname()}, pid {dead['pid']}): signal 9 SIGKILL (Killed)")
        for agent in agents:
            job.wait_exit(agent, 128 + signal.SIGKILL)
            check("failed (signal 9 SIGKILL" in agent.err() and "restarting the group (restart 1 of 1)" in agent.err(),
                  "the first killed worker is named" + job.describe())
            check(named in agent.err(), "the second killed worker is the root cause on every agent" + job.describe())
    with_job("2:3", 1, body, ["--max-restarts", "1"])


def case_elastic_full_waits():
    """MIN 1 MAX 2: a third agent finds the world full and waits, saying so; when a node's agent is lost, the next
    round admits it and the job finishes on 2 nodes."""
    def body(job):
        a, b = job.start("a"), job.start("b")
        round_ = job.wait_round(None, 2, [a, b])[0]["round"]
        c = job.start("c")
        deadline = time.monotonic() + WAIT_S
        while "it is full, so the next round comes when a node fails or leaves" not in c.err():
            check(time.monotonic() < deadline and c.proc.poll() is None, "the agent is told the job is full"
                  + job.describe())
            time.sleep(0.1)
        time.sleep(1)  # a full round is not stopped for it
        check(not a.lines(round_ + 1) and not b.lines(round_ + 1), "no new round while full" + job.describe())
        open(job.done_file, "w").close()
        b.proc.send_signal(signal.SIGKILL)  # not a: it hosts the store
        b.proc.wait()
        second = job.wait_round(round_ + 1, 2, [a, c])
        check(sorted(line["node"] for line in second) == [0, 1] and len(c.lines(round_ + 1)) == 1,
              "the next round: the waiting agent and the survivor" + job.describe())
        check(all(line["restarts"] == 1 for line in second),
              "one TORCHELASTIC_RESTART_COUNT for the job, also on the agent admitted late" + job.describe())
        job.wait_exit(a, 0)
        job.wait_exit(c, 0)
    with_job("1:2", 1, body, ["--max-restarts", "1"])


def case_elastic_too_few():
    """MIN 3: an agent that finds too few nodes within its join_timeout fails naming who joined and what is
    missing, and abandons the round, as does one stopped by SIGTERM, so that agents arriving later form the next
    round without them; bad MIN:MAX forms are refused before anything starts."""
    def body(job):
        open(job.done_file, "w").close()
        a = job.start("a")
        b = job.start("b", conf="last_call_timeout=1,join_timeout=3")
        job.wait_exit(b, 3)
        check(re.search(r"elastic rendezvous timed out after 3\.\d s \(--rdzv-timeout / join_timeout 3\.0 s\): round 0 "
                        r"has 2 node\(s\) \(\S+ \(agent 1, pid \d+\), \S+ \(agent 2, pid \d+\)\) but --nnodes 3:4 "
                        r"needs at least 3; start dcomm-run on more nodes", b.err()),
              "the timeout names who joined" + job.describe())
        # An agent stopped by a signal while the next round forms abandons it too.
        e = job.start("e")
        time.sleep(2)
        e.proc.send_signal(signal.SIGTERM)
        job.wait_exit(e, 128 + signal.SIGTERM)
        c, d = job.start("c"), job.start("d")
        job.wait_round(None, 3, [a, c, d])
        for agent in (a, c, d):
            job.wait_exit(agent, 0)
    with_job("3:4", 1, body)
    for bad, says in [("3:2", "MIN:MAX needs 1 <= MIN <= MAX (got MIN 3, MAX 2)"), ("0:2", "needs 1 <= MIN"),
                      ("2:", "is not N or MIN:MAX")]:
        r = lt.run(["--nnodes", bad, "--nproc-per-node", "1", "--", JOB, "x"])
        check(r.returncode == 2 and says in r.stderr, f"--nnodes {bad} refused", r)


if __name__ == "__main__":
    os.environ["DCOMM_STORE_SECRET"] = "elastic-tests-shared-secret"  # every agent of a job shares the user's
    sys.exit(lt.run_case_from_argv(globals(), "JOB", __doc__))
