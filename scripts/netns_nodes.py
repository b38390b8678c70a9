"""Pretend nodes on one machine: network namespaces joined through a switch, each launched with its own hostname.

Used by scripts/bench-nodes.py and the cross-node tests (tests/failure/cross_node.py). Every name carries a tag
(the creating process's pid), so two runs never collide, and everything this creates lives inside namespaces it
created: node i is the namespace `dcomm-<kind>-n<i>-<tag>` holding one end of a veth pair (`eth0`, address
SUBNET.(i+1)/24); the other ends are ports of a bridge in the switch namespace `dcomm-<kind>-sw-<tag>`. Nothing is
added to the namespace the script runs in. Deleting the namespaces (`close()`) removes the veths, the bridge and
the addresses with them.

Processes started with `prefix(i)` run in node i's network namespace and in a UTS namespace of their own named
`dcomm-node<i>`: dcomm's default host id already tells namespaces apart (hostname:netns inode), but OpenMPI decides
what is on-node by hostname, so without it MPI would use shared memory between "nodes".

Optional shaping makes the switch look like a data-centre link: each node's port is limited to RATE in both
directions (tbf on both veth ends) and a one-way DELAY is added on the node's egress (netem under the tbf; kernels
without sch_netem cannot add a delay, which `shaping` then says).
"""
import json
import os
import shutil
import signal
import subprocess

CMD_TIMEOUT_S = 30


class NamespacesUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no iproute2, no veth/bridge support): callers skip (exit 77)."""


def _run(args, check=True):
    r = subprocess.run(args, capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip() or f'exit {r.returncode}'}")
    return r


def unavailable_reason():
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", "hostname"):
        if shutil.which(tool) is None:
            return f"the `{tool}` tool is not installed (iproute2, util-linux, hostname)"
    return None


class Nodes:
    def __init__(self, n, kind="bn", subnet="10.213.0", rate=None, delay=None, burst="256kb", mtu=None):
        """n nodes; rate: a tc rate ("10gbit") or None; delay: a tc time ("20us") or None; mtu: the links' MTU."""
        self.n = n
        self.tag = os.getpid()
        self.ns = [f"dcomm-{kind}-n{i}-{self.tag}" for i in range(n)]
        self.switch = f"dcomm-{kind}-sw-{self.tag}"
        self.addrs = [f"{subnet}.{i + 1}" for i in range(n)]
        self.hostnames = [f"dcomm-node{i}" for i in range(n)]
        self.rate, self.delay, self.burst, self.mtu = rate, delay, burst, mtu
        self.shaping = "none (veth at memory speed)"
        self._made = []

    def __enter__(self):
        reason = unavailable_reason()
        if reason:
            raise NamespacesUnavailable(reason)
        try:
            self._create()
        except BaseException as e:
            self.close()
            if isinstance(e, RuntimeError):
                raise NamespacesUnavailable(f"cannot make network namespaces here: {e}") from e
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _ns(self, name):
        _run(["ip", "netns", "add", name])
        self._made.append(name)

    def _create(self):
        self._ns(self.switch)
        sw = ["ip", "-n", self.switch]
        _run(sw + ["link", "add", "br0", "type", "bridge"])
        _run(sw + ["link", "set", "br0", "up"])
        for i, ns in enumerate(self.ns):
            self._ns(ns)
            port = f"p{i}"
            # Made inside the switch namespace, then one end moved: no interface ever appears in the caller's.
            _run(sw + ["link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(sw + ["link", "set", port, "master", "br0"])
            node = ["ip", "-n", ns]
            if self.mtu:
                _run(sw + ["link", "set", port, "mtu", str(self.mtu)])
                _run(node + ["link", "set", "eth0", "mtu", str(self.mtu)])
            _run(sw + ["link", "set", port, "up"])
            _run(node + ["addr", "add", f"{self.addrs[i]}/24", "dev", "eth0"])
            _run(node + ["link", "set", "eth0", "up"])
            _run(node + ["link", "set", "lo", "up"])
        if self.rate or self.delay:
            self._shape()

    def _shape(self):
        delay_note = ""
        for i, ns in enumerate(self.ns):
            for where, dev, with_delay in ((ns, "eth0", True), (self.switch, f"p{i}", False)):
                tc = ["tc", "-n", where, "qdisc", "add", "dev", dev]
                parent = ["root"]
                if self.rate:
                    _run(tc + ["root", "handle", "1:", "tbf", "rate", self.rate, "burst", self.burst,
                               "latency", "50ms"])
                    parent = ["parent", "1:1"]
                if with_delay and self.delay:
                    r = _run(tc + parent + ["handle", "10:", "netem", "delay", self.delay, "limit", "100000"],
                             check=False)
                    if r.returncode != 0:
                        delay_note = f"; delay {self.delay} NOT applied ({r.stderr.strip()}: no sch_netem here)"
        rate = f"{self.rate} per node port, both directions (tbf, burst {self.burst})" if self.rate else "no rate limit"
        delay = f", one-way delay {self.delay} (netem)" if self.delay and not delay_note else ""
        self.shaping = rate + delay + delay_note

    def delay_applied(self):
        return bool(self.delay) and "NOT applied" not in self.shaping

    def prefix(self, i):
        """The command prefix that runs a program on node i (its network namespace, its own hostname)."""
        return ["ip", "netns", "exec", self.ns[i], "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.hostnames[i]]

    def dcomm_run(self, i, dcomm_run, nproc, program, options=(), port=29500, rdzv_timeout=60):
        """The command line of node i's dcomm-run: node 0's hosts the store at its address (a fixed port is safe:
        every node namespace has its own port space). The launchers need one DCOMM_STORE_SECRET in the env."""
        return self.prefix(i) + [
            dcomm_run, "--nnodes", str(self.n), "--node-rank", str(i), "--nproc-per-node", str(nproc),
            "--master-addr", self.addrs[0], "--master-port", str(port), "--rdzv-timeout", str(rdzv_timeout),
            *options, "--", *program]

    def link_bytes(self, i):
        """(sent, received) bytes on node i's interface since it was made: what crossed its link, headers included."""
        r = _run(["ip", "-n", self.ns[i], "-s", "-j", "link", "show", "eth0"])
        stats = json.loads(r.stdout)[0]["stats64"]
        return stats["tx"]["bytes"], stats["rx"]["bytes"]

    def pids(self):
        """Processes still inside this run's namespaces (all started by it: nothing else enters them)."""
        found = []
        for name in self._made:
            found += [int(p) for p in _run(["ip", "netns", "pids", name], check=False).stdout.split()]
        return found

    def close(self):
        # A process left inside keeps its namespace (and its veth) alive after the name is gone, unreachable for
        # the next cleanup: callers stop theirs first, and whatever is left here (an orphaned orted or ompi-server)
        # was started inside these namespaces by this run, so it is killed by pid before the names go.
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in reversed(self._made):
            _run(["ip", "netns", "del", name], check=False)
        self._made = []


def run_all(cmds, timeout_s, env=None):
    """Runs the commands at once (one launcher per node); returns [(exit code, stdout, stderr)] in order. A command
    still running after timeout_s is killed (its output so far is lost) and the TimeoutExpired goes on."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for c in cmds]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout_s)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def transcript(results):
    """run_all's results as text, node by node, for a failure report."""
    return "\n".join(f"--- node {n}: exit {rc}\nstdout:\n{out}\nstderr:\n{err}" for n, (rc, out, err) in
                     enumerate(results))


KINDS = ("bn", "xn", "rn", "ux")  # bench-nodes.py, cross_node.py, two_nodes.py, ucx_mp_tests.py


def leftovers(kinds=KINDS):
    """Namespaces made here whose creating process is gone (a run killed with SIGKILL cannot clean up)."""
    out = _run(["ip", "netns", "list"], check=False).stdout
    stale = []
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if not any(name.startswith(f"dcomm-{kind}-") for kind in kinds):
            continue
        tag = name.rsplit("-", 1)[-1]
        if tag.isdigit() and not os.path.exists(f"/proc/{tag}"):
            stale.append(name)
    return stale
