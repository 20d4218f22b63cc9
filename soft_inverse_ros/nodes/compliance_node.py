"""compliance_node: linearizes each FEM state into a compliance snapshot.

Receives fem_node's states, sets its own copy of the robot model to each (positions and
efforts), computes W_ea, W_aa, W_ee from the tangent stiffness at that state (reusing
its factorization across states), and publishes the snapshot for the high-rate inverse
controller. Separate from fem_node so the two pipeline on two cores (or two machines);
run ``combined:=true`` to fuse both into fem_node instead.

Subscribes: fem_state (FemState). Publishes: compliance (ComplianceSnapshot, reliable,
transient local), /diagnostics.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np
from rclpy.node import Node
from soft_inverse_ros_msgs.msg import ComplianceSnapshot, FemState

from soft_inverse_ros import topics
from soft_inverse_ros.core.model.robot_model import ConvergenceError
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import now_seconds, snapshot_to_msg, to_seconds
from soft_inverse_ros.nodes.model_params import RobotModelParams, build_model
from soft_inverse_ros.nodes.scheduling import apply_scheduling, check_scheduling, nice_field_metadata
from soft_inverse_ros.nodes.node_runtime import (
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)


@dataclass(frozen=True)
class ComplianceNodeConfig:
    frame_id: str = field(default=topics.BASE_FRAME, metadata={"description": "robot base frame"})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling), as fem_node's (needs root or an rtprio limit, else a warning)",
        "range": (0, 99)})
    nice: int = field(default=0, metadata=nice_field_metadata("the compliance loop"))
    max_clock_skew: float = field(default=0.1, metadata={
        "description": "FEM states stamped further ahead of this node's clock than this, or "
                       "at time <= 0, are refused [s] (as the controller's)",
        "range": (0.0, 10.0)})

    def __post_init__(self) -> None:
        check_scheduling(self.realtime_priority, self.nice)


class ComplianceNode(Node):
    def __init__(self, node_name: str = "compliance_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, ComplianceNodeConfig)
        model_params = declare_config(self, RobotModelParams)
        check_known_parameters(self, config_parameter_names(ComplianceNodeConfig)
                               + config_parameter_names(RobotModelParams))
        self.model = build_model(model_params)
        self._scheduling = apply_scheduling(self, self.config.realtime_priority,
                                            "snapshots may come late on a busy machine",
                                            self.config.nice)
        if self.model.contact is not None:
            self.get_logger().warning(
                "the robot's collision section is modelled only by fem_node with fused_compliance: "
                "true; these snapshots carry no contacts")
        self._n_values = self.model.mesh.n_points * 3
        self._seq = 0
        self._rejected = 0
        self._failures = 0
        self._last_error = ""
        self._times: list[float] = []
        self._pub = self.create_publisher(ComplianceSnapshot, topics.COMPLIANCE, qos.LATCHED)
        self.create_subscription(FemState, topics.FEM_STATE, self._on_state, qos.STATE)
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)

    def _on_state(self, msg: FemState) -> None:
        t0 = time.perf_counter()
        positions = np.asarray(msg.positions, dtype=float)
        efforts = np.asarray(msg.lambda_a, dtype=float)
        stamp = to_seconds(msg.header.stamp)
        problem = ""
        if positions.size != self._n_values or efforts.size != self.model.n_actuators \
                or not np.all(np.isfinite(positions)):
            problem = (f"{positions.size} coordinates / {efforts.size} efforts, expected "
                       f"{self._n_values} / {self.model.n_actuators}, all finite")
        elif stamp <= 0.0 or stamp - now_seconds(self) > self.config.max_clock_skew:
            problem = (f"stamped {stamp:.3f} s, {stamp - now_seconds(self):.3f} s from this node's "
                       f"clock (not a time, or ahead by more than max_clock_skew "
                       f"{self.config.max_clock_skew} s)")
        if problem:
            self._rejected += 1
            self._last_error = f"rejected FEM state {msg.seq}: {problem}"
            self.get_logger().warning(self._last_error, throttle_duration_sec=1.0)
            return
        try:
            self.model.set_state(positions.reshape(-1, 3), efforts)
            self._seq += 1
            snap = self.model.snapshot(self._seq, stamp)
        except (ConvergenceError, ValueError, ArithmeticError) as exc:
            self._failures += 1
            self._last_error = f"compliance failed: {exc}"
            self.get_logger().error(self._last_error, throttle_duration_sec=1.0)
            return
        snap = dataclasses.replace(snap, fem_step_time=float(msg.step_time))
        self._pub.publish(snapshot_to_msg(snap, frame_id=self.config.frame_id,
                                          state_seq=msg.seq))
        self._times = (self._times + [time.perf_counter() - t0])[-200:]

    def _diagnostics(self):
        times = np.asarray(self._times) if self._times else np.zeros(1)
        level = diag.OK if not self._last_error else diag.WARN
        values = {"scheduling": self._scheduling,
                  "snapshots_published": self._seq, "rejected_states": self._rejected,
                  "failed": self._failures,
                  "compute_time_p50_ms": 1e3 * float(np.median(times)),
                  "compute_time_max_ms": 1e3 * float(times.max())}
        message = self._last_error or "ok"
        self._last_error = ""
        return [diag.status(f"{self.get_name()}: compliance", level, message, values)]


def main(args=None) -> int:
    return main_for(ComplianceNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
