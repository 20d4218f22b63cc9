"""After a SAFE spell the controller resets its solver's per-tick reference; a hybrid
robot's joint servos hold their goal on SAFE, so the joints' reference must stay on the
held command: reset to the home pose, the contact QP found no state within one step of the
pose the arm held, and the arm stayed HELD (then SAFE) for good (review of d0a249b)."""

from __future__ import annotations

import numpy as np
import yaml

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.control.actuator_limits import limits_from_description
from soft_inverse_ros.core.control.inverse_qp import CommandStatus, InverseSolver
from soft_inverse_ros.core.control.shipped_settings import shipped_solver_config
from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
from soft_inverse_ros.core.rigid.hybrid_live import HybridSnapshotModel


def test_a_hybrid_arm_in_contact_commands_again_after_a_reset_that_holds_its_joints():
    desc = load_hybrid_description("hybrid_arm")
    params = yaml.safe_load(find_config("sim_hybrid.yaml").read_text())
    target = np.array(params["target_node"]["ros__parameters"]["center"], float)
    model = HybridSnapshotModel(desc, 2)
    config = shipped_solver_config("sim_hybrid.yaml", contact_force_sum_max=desc.force_sum_max,
                                   contact_min_force_sum=desc.min_force_sum)
    limits = limits_from_description(desc)
    joints = np.arange(len(desc.actuator_names)) < desc.n_joints

    def settle_in_contact() -> tuple[InverseSolver, np.ndarray]:
        solver, q = InverseSolver(config, limits), desc.home.copy()
        for frame in range(40):  # frames of 100 ticks on the model's snapshots, into contact
            solver.set_snapshot(model.snapshot(q, target, frame + 1, float(frame + 1)))
            for k in range(100):
                result = solver.solve(target, stamp=frame + 1 + 1e-3 * k)
            q = desc.joint_positions(result.efforts)
        assert result.command_status is CommandStatus.OK and model.scene.forces.sum() > 0
        return solver, q

    solver, q = settle_in_contact()
    solver.set_snapshot(model.snapshot(q, target, 100, 100.0))  # the pose the servos held
    solver.reset(hold=joints)
    after = [solver.solve(target, stamp=100 + 1e-3 * k) for k in range(50)]
    assert after[-1].command_status is CommandStatus.OK
    assert np.abs(desc.joint_positions(after[0].efforts) - q).max() < 0.01  # from the held pose
    # without holding them, the joints' reference went home: no contact state within a step
    solver, q = settle_in_contact()
    solver.set_snapshot(model.snapshot(q, target, 100, 100.0))
    solver.reset()
    assert {solver.solve(target, stamp=100 + 1e-3 * k).command_status for k in range(50)} == {CommandStatus.HELD}
