"""Linear-elastic displacements vs scikit-fem on the same tet mesh, BCs and body force."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.fem import CorotationalFEM, lame_parameters
from soft_inverse_ros.core.model.linear_solvers import make_solver
from soft_inverse_ros.core.model.mesh_generation import box_mesh

skfem = pytest.importorskip("skfem")


def test_linear_displacement_matches_scikit_fem():
    from skfem import Basis, ElementTetP1, ElementVector, MeshTet, asm, condense, solve
    from skfem.models.elasticity import linear_elasticity

    mesh = box_mesh((0.1, 0.03, 0.02), (6, 3, 2))
    points, tets = np.array(mesh.points), np.array(mesh.tets)
    young, nu, rho = 2e5, 0.4, 1100.0
    g = np.array([0.0, -3.0, -9.81])
    fixed_nodes = np.flatnonzero(points[:, 0] < 1e-9)

    # ours: K0 u = f_gravity on the free DOFs
    fem = CorotationalFEM(points, tets, young, nu, fixed_nodes, density=rho)
    k0 = fem.rest_stiffness()
    f = fem.reduce(fem.gravity_forces(g))
    solver = make_solver("scipy")
    solver.factorize(k0)
    u_ours = fem.expand(solver.solve(f))

    # scikit-fem: same mesh, P1 vector elements, same body force, same clamp
    m = MeshTet(points.T.copy(), tets.T.copy())
    basis = Basis(m, ElementVector(ElementTetP1()))
    lam, mu = lame_parameters(young, nu)
    k = asm(linear_elasticity(lam, mu), basis)

    from skfem import LinearForm

    @LinearForm
    def body(v, w):
        return rho * (g[0] * v[0] + g[1] * v[1] + g[2] * v[2])

    rhs = asm(body, basis)
    dofs = basis.nodal_dofs  # (3, N): DOF of component c at node i
    clamp = dofs[:, fixed_nodes].ravel()
    u = solve(*condense(k, rhs, D=clamp))
    u_skfem = np.stack([u[dofs[c]] for c in range(3)], axis=1)

    err = np.abs(u_ours - u_skfem).max() / np.abs(u_skfem).max()
    assert err <= 1e-8, err
    assert np.abs(u_skfem).max() > 1e-6  # a real deflection was compared
