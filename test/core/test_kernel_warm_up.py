"""The controller's kernel warm-up (core/control/kernel_warm_up.py): after it, a live
snapshot and its ticks compile nothing more (a compilation in the executor thread would
stop the 1 kHz ticks for seconds on a cold numba cache). Each case runs in a fresh
interpreter: in this one, other tests may have compiled the kernels already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from soft_inverse_ros.core.control import tick_kernels

pytestmark = pytest.mark.skipif(tick_kernels.KERNELS != "numba", reason="numba not installed")

SCRIPT = """
import dataclasses, json, sys
import numpy as np
from soft_inverse_ros.core.control import contact_qp, tick_kernels
from soft_inverse_ros.core.control.actuator_limits import limits_from_description
from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig
from soft_inverse_ros.core.control.kernel_warm_up import warm_up_solver
from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
from soft_inverse_ros.core.rigid.hybrid_live import HybridSnapshotModel

with_contact = sys.argv[1] == "contact"
kernels = (tick_kernels.prepare, tick_kernels.finish, tick_kernels.slacks, contact_qp.state_qp,
           tick_kernels.contact_bounds, tick_kernels.contact_finish)
if contact_qp.state_solve_direct is not None:
    kernels += (contact_qp.state_solve_direct,)
if tick_kernels.direct_tick is not None:
    kernels += (tick_kernels.direct_tick,)
desc = load_hybrid_description("hybrid_arm")
config = InverseSolverConfig(epsilon=1e-3, contact_force_sum_max=desc.force_sum_max,
                             contact_min_force_sum=desc.min_force_sum)
limits = limits_from_description(desc)
model = HybridSnapshotModel(desc)  # its own settling may call kernels of its own: not these
before = [len(k.signatures) for k in kernels]
warm_up_solver(config, limits, desc.actuator_kinds, desc.effector_row_names,
               actuator_names=desc.actuator_names, with_contact=with_contact)
warmed = [len(k.signatures) for k in kernels]
tip, _ = model.scene.probe_points()
target = np.array([tip[0] + 0.01, tip[1] + 0.01, model.scene.block_top_z - 0.012])
snap = model.snapshot(desc.home.copy(), target, 1, 1.0)
if not with_contact:
    snap = dataclasses.replace(snap, contacts=None)
solver = InverseSolver(config, limits)
assert solver.set_snapshot(snap).accepted
ok = 0
for k in range(20):
    r = solver.solve(target, stamp=1.0 + 1e-3 * k)
    if r.ok:
        ok += 1
        r.active
print(json.dumps({"before": before, "warmed": warmed, "after": [len(k.signatures) for k in kernels],
                  "ok": ok, "contacts": snap.contacts is not None}))
"""


@pytest.mark.parametrize("case", ["contact", "no_contact"])
def test_a_live_snapshot_compiles_nothing_after_the_warm_up(case):
    out = subprocess.run([sys.executable, "-c", SCRIPT, case], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["ok"] > 0 and r["contacts"] == (case == "contact")
    assert r["warmed"] != r["before"]  # the warm-up compiled (or loaded) kernels
    assert r["after"] == r["warmed"], r  # the live snapshot and its ticks: nothing new
