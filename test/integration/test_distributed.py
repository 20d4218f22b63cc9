"""Two network namespaces over the emulated link (root only): the link delays packets as
told, and a short ``experiment distributed`` run keeps the robot's 1 kHz loop and tracks
with the FEM on the other side of a 5 ms link."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from soft_inverse_ros.experiments.netns import ADDRESSES, LinkedNamespaces, NetnsError, check_available

pytestmark = pytest.mark.integration

try:
    check_available()
except NetnsError as err:  # pragma: no cover - depends on the machine
    pytest.skip(f"network namespaces unavailable: {err}", allow_module_level=True)

# the echo answers until told to stop ("q"); the ping first waits for it to be up (a
# namespace's Python can take more than a moment to start on a loaded host), then times 20
ECHO = ("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "s.bind(('0.0.0.0',9999))\ns.settimeout(60)\n"
        "while True:\n    d,a=s.recvfrom(100)\n    if d==b'q': break\n    s.sendto(d,a)\n")
PING = ("import socket,time,statistics\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "s.settimeout(0.5)\n"
        "for _ in range(60):\n    s.sendto(b'w',('%s',9999))\n"
        "    try:\n        s.recvfrom(10); break\n    except socket.timeout:\n        pass\n"
        "s.settimeout(2)\nr=[]\n"
        "for i in range(20):\n    t=time.monotonic(); s.sendto(b'x',('%s',9999)); s.recvfrom(10)\n"
        "    r.append(time.monotonic()-t)\n"
        "s.sendto(b'q',('%s',9999))\nprint(statistics.median(r))\n" % ((ADDRESSES[1],) * 3))


def _no_leftovers() -> bool:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return "sir_ws" not in out and "sir_robot" not in out


def test_the_link_delays_packets_as_told():
    with LinkedNamespaces() as ns:
        ns.set_link(delay_ms=20.0)
        echo = subprocess.Popen([*ns.exec_prefix(1), sys.executable, "-c", ECHO])
        try:
            rtt = float(subprocess.run([*ns.exec_prefix(0), sys.executable, "-c", PING],
                                       capture_output=True, text=True, timeout=60).stdout)
            echo.wait(timeout=10)
        finally:
            if echo.poll() is None:
                echo.kill()
                echo.wait()
    assert 0.039 < rtt < 0.060, rtt  # 20 ms each way
    assert _no_leftovers()


def test_a_short_distributed_run(graph_env, tmp_path):
    """Snapshots cross the link and arrive later than its delay, the robot side commands,
    and the run's own validity verdict decides what its figures may claim: a valid run
    tracks within 5 mm at 1 kHz; an invalid one (this whole graph, both halves and the link
    relay share the test machine's two cores: a noisy CI host starves it) names why."""
    from soft_inverse_ros.experiments.distributed import measure

    args = argparse.Namespace(robot="builtin_diamond", duration=6.0, startup=90.0,
                              conditions=["delay_5ms"], out=str(tmp_path))
    os.environ.setdefault("ROS_DOMAIN_ID", "77")
    result = measure(args)
    row = result["conditions"][0]
    assert result["namespaces"] == 2
    # the 1 kHz loop lives on the robot's side: it commands (SAFE without snapshots) either way
    assert row["command_rate_hz"] is not None and row["command_rate_hz"] > 100.0, row
    if row["valid"]:
        assert not row["invalid_reasons"], row
        assert row["compliance_rate_hz"] is not None and row["compliance_rate_hz"] > 0.5, row
        assert row["snapshot_age_p50_ms"] > 5.0, row  # snapshots crossed the 5 ms link
        assert row["command_rate_hz"] > 900.0, row  # the 1 kHz loop is on the robot's side
        assert row["plant_mean_error_mm"] < 5.0, row
        assert row["safe_command_fraction"] <= 0.005, row
    else:  # e.g. one CI run whose controller never received a snapshot (its recorder did)
        assert row["invalid_reasons"] and all(isinstance(r, str) and r for r in row["invalid_reasons"]), row
    assert _no_leftovers()
