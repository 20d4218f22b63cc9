"""Two Linux network namespaces joined by an emulated network link: a two-machine
deployment on one machine (root only). Used by ``experiment distributed``.

Each namespace gets a TUN device (``10.200.0.1`` and ``10.200.0.2``, point to point, a
default route through it so DDS multicast discovery crosses the link); a relay thread in
this process carries every IP packet from one device to the other after the link's delay
(normal jitter, packets may reorder as on a real network) and drops a share of them. This
is what ``tc netem`` would do on a veth pair; it is done in user space because the kernels
of these machines are built without ``sch_netem``. The addresses exist only inside the
namespaces this module creates and deletes. The relay thread runs at SCHED_FIFO
(:data:`RELAY_PRIORITY`, above every node's ``realtime_priority``): it stands in for the
kernel's network stack, which the graph's real-time nodes do not starve; at normal
scheduling they did (snapshots crossed the link at 2.5 Hz instead of 27).
"""

from __future__ import annotations

import fcntl
import heapq
import os
import random
import select
import shutil
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field

ADDRESSES = ("10.200.0.1", "10.200.0.2")
#: SCHED_FIFO priority of the relay thread (the emulated link)
RELAY_PRIORITY = 50
_TUNSETIFF = 0x400454CA
_IFF_TUN, _IFF_NO_PI = 0x0001, 0x1000
_MTU = 1500


class NetnsError(RuntimeError):
    """Network namespaces cannot be set up here (not root, no ``ip``, no TUN, ...)."""


def _run(*argv: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode:
        raise NetnsError(f"{' '.join(argv)}: {result.stderr.strip() or result.returncode}")


def check_available() -> None:
    """Raise :class:`NetnsError` naming what is missing."""
    if os.geteuid() != 0:
        raise NetnsError("network namespaces need root (run as root, or skip this experiment)")
    if shutil.which("ip") is None:
        raise NetnsError("'ip' not found (Debian: apt-get install iproute2)")
    if not os.path.exists("/dev/net/tun"):
        raise NetnsError("/dev/net/tun missing: the kernel has no TUN support")


def _open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI))
    return fd


@dataclass
class LinkSettings:
    """One direction's (and the other's: both are the same) link behaviour."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0  # standard deviation of a normal jitter
    loss_percent: float = 0.0


@dataclass
class LinkedNamespaces:
    """Namespaces ``names[0]`` and ``names[1]`` joined by the relayed TUN link."""

    names: tuple[str, str] = ("sir_ws", "sir_robot")
    seed: int = 1
    settings: LinkSettings = field(default_factory=LinkSettings)
    #: packets carried / dropped by the relay since start
    carried: int = 0
    dropped: int = 0

    def exec_prefix(self, index: int) -> list[str]:
        """argv prefix that runs a command inside namespace ``index``."""
        return ["ip", "netns", "exec", self.names[index]]

    def set_link(self, delay_ms: float = 0.0, jitter_ms: float = 0.0,
                 loss_percent: float = 0.0) -> None:
        self.settings = LinkSettings(delay_ms, jitter_ms, loss_percent)

    def __enter__(self) -> "LinkedNamespaces":
        check_available()
        self.delete()  # leftovers of an interrupted run of our own
        self._fds: list[int] = []
        for index, (ns, address) in enumerate(zip(self.names, ADDRESSES)):
            dev = f"{ns[:11]}t"
            self._fds.append(_open_tun(dev))
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "set", dev, "netns", ns)
            _run("ip", "-n", ns, "addr", "add", f"{address}/32", "peer",
                 f"{ADDRESSES[1 - index]}/32", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "multicast", "on", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "route", "add", "default", "dev", dev)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._relay, name="netns-relay", daemon=True)
        self._thread.start()
        return self

    def _relay(self) -> None:
        try:  # this thread only (Linux scheduling is per thread); root is needed here anyway
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RELAY_PRIORITY))
        except OSError:
            pass  # the link is then as fast as a busy machine lets a normal thread be
        rng = random.Random(self.seed)
        pending: list[tuple[float, int, int, bytes]] = []  # (due, order, out fd, packet)
        order = 0
        fds = self._fds
        while not self._stop.is_set():
            timeout = 0.05 if not pending else max(0.0, pending[0][0] - time.monotonic())
            readable, _, _ = select.select(fds, [], [], min(timeout, 0.05))
            now = time.monotonic()
            for fd in readable:
                out = fds[1 - fds.index(fd)]
                while True:
                    try:
                        packet = os.read(fd, _MTU + 100)
                    except BlockingIOError:
                        break
                    except OSError:
                        return
                    s = self.settings
                    if s.loss_percent and rng.random() * 100.0 < s.loss_percent:
                        self.dropped += 1
                        continue
                    delay = max(0.0, rng.gauss(s.delay_ms, s.jitter_ms) if s.jitter_ms
                                else s.delay_ms) * 1e-3
                    order += 1
                    heapq.heappush(pending, (now + delay, order, out, packet))
            now = time.monotonic()
            while pending and pending[0][0] <= now:
                _, _, out, packet = heapq.heappop(pending)
                try:
                    os.write(out, packet)
                    self.carried += 1
                except OSError:
                    self.dropped += 1

    def delete(self) -> None:
        for ns in self.names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        for fd in self._fds:
            os.close(fd)
        self.delete()
