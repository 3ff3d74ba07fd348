"""A throw-away single-node Slurm and an sshd for the cluster test (issue 30), in a network namespace.

Everything runs in a network namespace of its own (``ip netns``): a loopback interface and a veth
pair whose two ends are both inside it (slurmctld and slurmd bind with ``getaddrinfo(AI_ADDRCONFIG)``,
which finds no address family on a loopback-only host).  No interface of the namespace reaches the
machine's network, so nothing the test starts can be reached from outside it; sshd listens on
127.0.0.1 only.  Slurm: ``slurmctld`` + ``slurmd`` from Debian's ``slurm-wlm``, authenticated by a
``munged`` with a throw-away key, ``proctrack/linuxproc`` (no cgroups), configured by a
``slurm.conf`` in the test's folder (``SLURM_CONF``).  :func:`missing` names what is absent, for a
skip with its reason.  Every daemon is stopped, and the namespace deleted, on leaving
:func:`local_cluster`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator, Sequence

PROGRAMS = ("ip", "nsenter", "munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sshd", "ssh-keygen")


def missing() -> str | None:
    """Why the cluster test cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespace, Slurm daemons)"
    absent = [p for p in PROGRAMS if shutil.which(p) is None and not Path("/usr/sbin", p).exists()]
    if absent:
        return (f"{', '.join(absent)} not installed (Debian: slurm-wlm munge openssh-server iproute2; "
                "`make cluster-tools` installs them)")
    probe = subprocess.run(["ip", "netns", "add", f"priorlab-probe-{os.getpid()}"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"priorlab-probe-{os.getpid()}"], capture_output=True)
    return None


def covered_by_the_cluster_test():
    """``skipif`` for a slow test whose assertions the cluster test (tests/test_slurm.py) makes too, on a
    real scheduler and an SSH remote: it runs only where the cluster test skips (CI time, issue 30)."""
    import pytest

    return pytest.mark.skipif(missing() is None, reason="covered by tests/test_slurm.py's cluster test, which "
                                                        "runs here (it skips where Slurm or sshd is absent)")


SLURM_CONF = """\
ClusterName=priorlab-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=30
NodeName=node0 NodeAddr=127.0.0.1 NodeHostname=localhost CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes=node0 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""

SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {d}/host_key
AuthorizedKeysFile {d}/authorized_keys
PidFile {d}/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
"""


class Cluster:
    """The namespace's servers; :meth:`run` runs a command inside the namespace (``nsenter --net``:
unlike ``ip netns exec`` it leaves ``/sys`` as it is, cgroups included, which slurmd probes)."""

    def __init__(self, directory: Path, namespace: str, ssh_port: int):
        self.dir, self.namespace, self.ssh_port = directory, namespace, ssh_port
        self.key = directory / "client_key"
        self.env = {"SLURM_CONF": str(directory / "slurm.conf")}

    def run(self, cmd: Sequence[str], cwd: Path | None = None, env: dict | None = None, check: bool = True,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(["nsenter", f"--net=/run/netns/{self.namespace}", *cmd], cwd=cwd, capture_output=True, text=True,
                              env={**(env or os.environ), **self.env}, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def queue(self) -> list[str]:
        """Job ids (array tasks as <job>_<task>) still pending or running."""
        return self.run(["squeue", "-h", "-o", "%i"]).stdout.split()

    def wait_idle(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while self.queue():
            if time.monotonic() > end:
                raise AssertionError(f"jobs still queued after {timeout:.0f} s: {self.queue()}")
            time.sleep(1)

    def ssh_url(self, path: Path) -> str:
        return f"ssh://root@127.0.0.1:{self.ssh_port}{path}"


def _kill_pidfile(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(path.read_text().split()[0]), signal.SIGTERM)


def leftovers(directory: Path, namespace_prefix: str = "priorlab-test-", timeout: float = 15.0) -> list[str]:
    """Processes still running from ``directory`` (daemons, jobs) and test namespaces still there,
    after waiting up to ``timeout`` seconds for them to go."""
    end = time.monotonic() + timeout
    while True:
        procs = subprocess.run(["pgrep", "-a", "-f", str(directory)], capture_output=True, text=True).stdout.splitlines()
        spaces = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                  if n.startswith(f"{namespace_prefix}{os.getpid()}")]
        if not (procs or spaces) or time.monotonic() > end:
            return procs + spaces
        time.sleep(0.5)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def local_cluster(directory: Path, cpus: int = 2, ssh_port: int = 2222) -> Iterator[Cluster]:
    """Start munged, slurmctld, slurmd and sshd in a fresh network namespace; stop them all after."""
    d = directory
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a test run stopped by SIGTERM still stops them
    (d / "state").mkdir(parents=True)
    (d / "spool").mkdir()
    ns = f"priorlab-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    cluster = Cluster(d, ns, ssh_port)
    try:
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "link", "add", "pl0", "type", "veth", "peer", "name", "pl1"],
                    ["ip", "addr", "add", "192.0.2.1/32", "dev", "pl0"],
                    ["ip", "link", "set", "pl0", "up"], ["ip", "link", "set", "pl1", "up"]):
            cluster.run(cmd)
        (d / "munge.key").write_bytes(os.urandom(1024))
        (d / "munge.key").chmod(0o600)
        (d / "slurm.conf").write_text(SLURM_CONF.format(d=d, cpus=cpus))
        (d / "sshd_config").write_text(SSHD_CONFIG.format(d=d, port=ssh_port))
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True)
        shutil.copy(d / "client_key.pub", d / "authorized_keys")
        cluster.run(["munged", "--force", f"--key-file={d}/munge.key", f"--socket={d}/munge.sock",
                     f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"])
        conf = str(d / "slurm.conf")
        cluster.run(["slurmctld", "-f", conf, "-i"])
        cluster.run(["slurmd", "-f", conf, "-N", "node0"])
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation folder (systemd makes it)
        cluster.run([shutil.which("sshd") or "/usr/sbin/sshd", "-f", str(d / "sshd_config")])
        end = time.monotonic() + 60
        while "idle" not in cluster.run(["sinfo", "-h", "-o", "%T"], check=False).stdout:
            if time.monotonic() > end:
                raise AssertionError("the test's slurmd did not come up:\n" + (d / "slurmd.log").read_text()[-2000:])
            time.sleep(0.5)
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            for job in cluster.queue():
                cluster.run(["scancel", job], check=False)
        for pid in ("sshd.pid", "slurmd.pid", "slurmctld.pid"):
            _kill_pidfile(d / pid)
        subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "munged", "--stop", f"--socket={d}/munge.sock"],
                       capture_output=True)
        time.sleep(1)
        for pid in ("munged.pid",):
            _kill_pidfile(d / pid)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        signal.signal(signal.SIGTERM, previous)
