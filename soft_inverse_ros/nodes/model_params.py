"""Parameters shared by the nodes that hold a FEM model of the robot."""

from __future__ import annotations

from dataclasses import dataclass, field

from soft_inverse_ros.core.model.linear_solvers import SOLVER_NAMES


@dataclass(frozen=True)
class RobotModelParams:
    robot: str = field(default="builtin_diamond", metadata={
        "description": "robot description: a name in config/robots or a YAML path"})
    mesh: str = field(default="", metadata={
        "description": "replace the description's mesh file (empty: keep it)"})
    solver: str = field(default="auto", metadata={
        "description": "sparse direct solver", "choices": SOLVER_NAMES})
    factor_reuse: bool = field(default=True, metadata={
        "description": "solve by PCG preconditioned with a reused factorization"})
    young_modulus_scale: float = field(default=1.0, metadata={
        "description": "multiplies the description's Young's modulus", "range": (0.01, 100.0)})
    contact: bool = field(default=True, metadata={
        "description": "model the description's collision section (if any) in the fused FEM "
                       "update and publish the contacts with the snapshot"})
    reduction: str = field(default="", metadata={
        "description": "a reduced-order model trained by `soft-inverse-ros reduce-model` (.npz): "
                       "the low-rate update solves in its basis (large meshes; no contact); "
                       "empty: the full FEM"})
    max_contacts: int = field(default=64, metadata={
        "description": "at most this many contacts (smallest gaps) per update and snapshot: "
                       "bounds the snapshot to m (m + n_a + n_e + 11) numbers", "range": (1, 10000)})


def build_model(params: RobotModelParams):
    """Load the description and build its RobotModel (or, with ``reduction``, its
    ReducedRobotModel) at the equilibrium under gravity.

    Raises:
        ValueError / FileNotFoundError: bad description, mesh or reduction (reported by the
            runtime; a reduction of another robot or with contact is a ReductionError).
    """
    import numpy as np

    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel

    desc = load_robot_description(params.robot, mesh_override=params.mesh or None)
    model = RobotModel.from_description(
        desc, solver=params.solver, young_modulus_scale=params.young_modulus_scale,
        factor_reuse=params.factor_reuse, contact=params.contact,
    )
    if params.reduction:
        from soft_inverse_ros.core.model.reduced_model import (
            ReducedRobotModel,
            ReductionError,
            load_model_reduction,
        )

        if model.contact is not None:
            raise ReductionError(f"robot {desc.name!r} has a collision section and the reduced "
                                 "model does not model contact: set contact: false, or no reduction")
        model = ReducedRobotModel(model, load_model_reduction(params.reduction, model))
    elif model.contact is not None:
        model.set_contact(model.contact, max_contacts=params.max_contacts)
    model.equilibrate(np.zeros(model.n_actuators), from_rest=True)
    return model
