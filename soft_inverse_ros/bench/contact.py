"""``soft-inverse-ros bench contact``: cost of contact detection and of the contact solve
per step vs the number of contacts.

Scenario: the cantilever box of ``bench fem`` (``box_robot``, clamped at x = 0, gravity −z;
the smallest one whose bottom face holds the largest requested count, or ``--nodes``) as
the dynamic FEM plant (``SoftRobotPlant``, model fem), released at rest above a slightly
tilted floor (a ``Plane``) that touches the bottom corner at the free end. For each
requested count N the floor's tilt is chosen from the sorted node distances so that
exactly N surface nodes are within the alarm distance at the start of the step (gaps from
0 at that corner to just below the alarm distance). The free motion is one implicit-Euler
step of the plant without contact (gravity sags the box into the floor), the
configuration the plant's contact correction sees (core/contact/correction.py).

Timed per case, on that step's data, each ``--repeat`` times (or until the samples add up
to ``--max-seconds``; at least one sample; the sample count is reported):

- ``detect``: ``ContactModel.detect`` at the start positions (obstacle test of every
  surface node: signed distances, normals, the sparse rows H);
- ``detect_mesh``: the same with the floor as a mesh obstacle (core/contact/mesh_obstacle.py:
  a 10 mm slab under the box whose top face is the plane, each face split into
  ``--mesh-divisions``² squares); it must find the plane's contacts and gaps;
- ``w``: W = H A⁻¹ Hᵀ with the plant's own system matrix of that step (A = A0 + k_c U Uᵀ,
  A0 = (1/h² + α/h) M + (1 + β/h) K): H restricted to the free DOFs, dense Hᵀ,
  ``SoftRobotPlant._solve_columns`` (the step's existing factorization of A0, one
  forward/back solve per column, Woodbury for taut cables), H (A⁻¹Hᵀ), symmetrized;
- ``gs``: projected Gauss–Seidel on the frictionless LCP (the contact model's tolerance
  and sweep cap), with its sweeps and complementarity residual ‖min(δ, λ W_ii)‖∞ [m];
- ``exact``: the LCP as a QP by daqp, polished on the active set;
- ``coulomb``: block Gauss–Seidel with Coulomb friction (``--mu``) on the 3N×3N W of the
  normal and tangent rows (whose forming is timed as ``w_coulomb``);
- ``reduced``: the reduced contact basis (Goury §III, ``--basis-k`` vectors from the NNMF
  of 16 neighbouring problems' forces): the k × k Ŵ (k column solves) and its LCP, with
  the force error and the penetration it leaves (``_reduced``).

Medians and p95 in ms. With ``--json`` the last output line is one JSON object
(``cases``: one dict per requested count; ``n_contacts`` the requested count,
``actual_contacts`` the detected one).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import sys
import time
from pathlib import Path

from soft_inverse_ros import finite_json
from soft_inverse_ros.bench._threads import limit_threads

NAME = "contact"
#: largest box mesh the benchmark builds (memory of the factorization)
NODES_MAX = 60_000
#: the floor's tilt direction in (x, y): the contact patch grows from the corner
#: (x max, y max) of the bottom face; the irrational y weight avoids equal distances
_TILT = (1.0, 1.0 / 11.0 ** 0.5)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        NAME, help="time contact detection and the contact solve vs the number of contacts",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--contacts", default="10,100,500",
                        help="comma-separated contact counts (default 10,100,500)")
    parser.add_argument("--repeat", default="50", help="timed samples per quantity (default 50)")
    parser.add_argument("--max-seconds", default="60",
                        help="stop sampling a quantity once its samples add up to this [s] "
                             "(at least one sample; default 60)")
    parser.add_argument("--nodes", default=None,
                        help="box mesh of about this many nodes (default: the smallest box whose "
                             "bottom face holds the largest count)")
    parser.add_argument("--alarm-mm", default="2",
                        help="contact alarm distance [mm] (above the motion per step; default 2)")
    parser.add_argument("--dt", default="0.01", help="plant time step [s] (default 0.01)")
    parser.add_argument("--mu", default="0.5", help="Coulomb friction coefficient (default 0.5)")
    parser.add_argument("--solver", default="auto", help="sparse direct solver of the plant")
    parser.add_argument("--basis-k", default="5",
                        help="reduced contact basis size for the reduced solve (Goury: 5; 0: skip)")
    parser.add_argument("--mesh-divisions", default="32",
                        help="the floor also as a mesh obstacle (a slab, each face split into N x N "
                             "squares: 12 N^2 triangles) for detect_mesh (default 32)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


# --------------------------------------------------------------------------- arguments
class _BadArgument(ValueError):
    pass


def _number(text, option: str, kind=float, *, minimum=None, positive=False):
    try:
        value = kind(str(text).strip())
    except ValueError:
        raise _BadArgument(f"{option} must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if not math.isfinite(value):
        raise _BadArgument(f"{option} must be finite, got {text!r}")
    if positive and not value > 0:
        raise _BadArgument(f"{option} must be > 0, got {text!r}")
    if minimum is not None and value < minimum:
        raise _BadArgument(f"{option} must be >= {minimum}, got {text!r}")
    return value


def _parse(args: argparse.Namespace) -> dict:
    from soft_inverse_ros.core.model.linear_solvers import SOLVER_NAMES

    parts = str(args.contacts).split(",")
    if not all(p.strip() for p in parts):
        raise _BadArgument(f"--contacts must be a comma-separated list of counts, got {args.contacts!r}")
    counts = [_number(p, "--contacts", int, minimum=1) for p in parts]
    if args.solver not in SOLVER_NAMES:
        raise _BadArgument(f"--solver must be one of {list(SOLVER_NAMES)}, got {args.solver!r}")
    opts = {
        "counts": counts,
        "repeat": _number(args.repeat, "--repeat", int, minimum=1),
        "max_seconds": _number(args.max_seconds, "--max-seconds", positive=True),
        "nodes": None if args.nodes is None else _number(args.nodes, "--nodes", int, minimum=50),
        "alarm": _number(args.alarm_mm, "--alarm-mm", positive=True) * 1e-3,
        "dt": _number(args.dt, "--dt", positive=True),
        "mu": _number(args.mu, "--mu", positive=True),
        "solver": args.solver,
        "basis_k": _number(args.basis_k, "--basis-k", int, minimum=0),
        "mesh_divisions": _number(args.mesh_divisions, "--mesh-divisions", int, minimum=1),
    }
    if opts["nodes"] is None:
        opts["nodes"] = _default_nodes(max(counts))
        if opts["nodes"] > NODES_MAX:
            raise _BadArgument(f"--contacts {max(counts)} needs a box of {opts['nodes']} nodes, "
                               f"more than the {NODES_MAX} supported")
    elif opts["nodes"] > NODES_MAX:
        raise _BadArgument(f"--nodes: more than {NODES_MAX} nodes is not supported, got {args.nodes!r}")
    return opts


# --------------------------------------------------------------------------- scenario
def _box_divisions(n_nodes: int) -> int:
    """The k of ``box_robot`` (a (4k, k, k) hex grid) for about ``n_nodes`` nodes."""
    k = max(1, round((n_nodes / 4.0) ** (1.0 / 3.0)))
    return min(range(max(1, k - 2), k + 3), key=lambda d: abs((4 * d + 1) * (d + 1) ** 2 - n_nodes))


def _default_nodes(largest: int) -> int:
    """Nodes of the smallest box whose bottom face, clamped row aside, holds ``largest``
    nodes with 5 % to spare (k ≥ 3)."""
    # (4k + 1)(k + 1) bottom nodes, k + 1 of them clamped: 4k(k + 1) ≥ 1.05 largest
    k = math.ceil((-1.0 + math.sqrt(1.0 + 1.05 * largest)) / 2.0)
    while 4 * k * (k + 1) < 1.05 * largest:  # round-off
        k += 1
    k = max(k, 3)
    return (4 * k + 1) * (k + 1) ** 2


def _box(n_nodes: int):
    """``box_robot``'s (description, mesh), the mesh handed to the plant without a file."""
    from soft_inverse_ros.bench.fem import box_robot
    from soft_inverse_ros.core.model.description import MeshSpec

    desc, mesh = box_robot(n_nodes)

    @dataclasses.dataclass(frozen=True)
    class _Generated(MeshSpec):
        def load(self):  # the mesh generated above
            return mesh

    return dataclasses.replace(desc, mesh=_Generated(file=Path("<generated box>"))), mesh


def _plant(desc, dt: float, solver: str):
    from soft_inverse_ros.core.sim.plant import PlantConfig, SoftRobotPlant

    return SoftRobotPlant(desc, PlantConfig(robot=desc.name, model="fem", dt=dt, solver=solver))


def _floor(positions, surface, bottom, n: int, alarm: float):
    """The tilted floor plane with exactly ``n`` of the ``surface`` nodes within ``alarm`` [m]
    (the bottom face's nodes ordered by height above it, the first touching it)."""
    import numpy as np

    from soft_inverse_ros.core.contact.geometry import Plane

    a, b = _TILT
    q = np.sort(a * positions[bottom, 0] + b * positions[bottom, 1])[::-1]
    if n >= q.size:
        raise _BadArgument(f"--contacts {n}: the box's bottom face has only {q.size} nodes (give a larger --nodes)")
    spread = q[0] - 0.5 * (q[n - 1] + q[n])  # tilt-free height range of the n nodes [m]
    r = alarm / spread  # = s / |(−s a, −s b, 1)|: the n-th node lies alarm above the floor
    if r * r * (a * a + b * b) >= 0.5:  # steeper than 45°
        raise _BadArgument(f"--contacts {n}: too few nodes for a floor tilted less than 45° "
                           f"at --alarm-mm {alarm * 1e3:g} on this mesh (more contacts or a finer --nodes)")
    s = r / np.sqrt(1.0 - r * r * (a * a + b * b))
    normal = np.array([-s * a, -s * b, 1.0])
    normal /= np.linalg.norm(normal)
    lowest = float((positions[surface] @ normal).min())
    return Plane(tuple(lowest * normal), tuple(normal)), float(np.degrees(np.arccos(normal[2])))


def _floor_mesh(plane, surface_positions, divisions: int, alarm: float):
    """The floor as a mesh obstacle: a 10 mm slab whose top face is the plane over the
    robot's footprint (+ 10 mm), each face split into ``divisions``² squares."""
    import numpy as np

    from soft_inverse_ros.core.contact.mesh_obstacle import MeshGeometry, MeshObstacle, box_surface

    n = np.asarray(plane.normal, dtype=float)
    n /= np.linalg.norm(n)
    u = np.cross(n, [0.0, 1.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(n, u)
    p0 = np.asarray(plane.point, dtype=float)
    rel = surface_positions - p0
    a, b = rel @ u, rel @ v
    local, faces = box_surface((a.min() - 0.01, b.min() - 0.01, -0.01), (a.max() + 0.01, b.max() + 0.01, 0.0),
                               divisions)
    world = p0 + local[:, :1] * u + local[:, 1:2] * v + local[:, 2:] * n
    return MeshObstacle(MeshGeometry(world, faces), reach=alarm)


def _timed(fn, repeat: int, budget: float):
    """(samples [s], last result): ``fn()`` up to ``repeat`` times or ``budget`` seconds."""
    samples, result = [], None
    while len(samples) < repeat and (not samples or sum(samples) < budget):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return samples, result


def _stats(samples) -> dict:
    import numpy as np

    ms = np.asarray(samples) * 1e3
    return {"median": float(np.median(ms)), "p95": float(np.percentile(ms, 95)), "n": int(ms.size)}


def _coulomb_rows(cs, free_dofs, positions, start):
    """Rows [n_i, t1_i, t2_i] over the free DOFs and their free gaps/slips, as
    ``ContactModel.correct`` builds them with friction."""
    import numpy as np
    import scipy.sparse as sp

    m = cs.size
    tangent = cs.tangent_rows()
    rows = sp.vstack([cs.rows[:, free_dofs], tangent[:, free_dofs]], format="csr")
    order = np.empty(3 * m, dtype=np.int64)
    order[0::3] = np.arange(m)
    order[1::3] = m + 2 * np.arange(m)
    order[2::3] = m + 2 * np.arange(m) + 1
    slip = tangent @ (positions - start).reshape(-1)
    delta = np.empty(3 * m)
    delta[0::3] = cs.gaps_at(positions)
    delta[1::3] = slip[0::2]
    delta[2::3] = slip[1::2]
    return rows[order], delta


def _case(plant, step: dict, n: int, floor, opts: dict) -> dict:
    import numpy as np

    from soft_inverse_ros.core.contact.correction import ContactModel

    x0, xf, geo, surface = step["x0"], step["x_free"], step["geo"], step["surface"]
    free = plant.fem.free_dofs
    plane, tilt = floor
    gs_model = ContactModel(obstacles=[plane], alarm_distance=opts["alarm"], nodes=surface)
    exact_model = ContactModel(obstacles=[plane], alarm_distance=opts["alarm"], nodes=surface, solver="exact")
    coulomb_model = ContactModel(obstacles=[plane], alarm_distance=opts["alarm"], nodes=surface,
                                 friction=opts["mu"])
    repeat, budget = opts["repeat"], opts["max_seconds"]

    t_detect, cs = _timed(lambda: gs_model.detect(x0), repeat, budget)
    detected = cs.size
    mesh_model = ContactModel(obstacles=[_floor_mesh(plane, x0[surface], opts["mesh_divisions"],
                                                     opts["alarm"])],
                              alarm_distance=opts["alarm"], nodes=surface)
    t_detect_mesh, cs_mesh = _timed(lambda: mesh_model.detect(x0), repeat, budget)
    if cs_mesh.size != detected or not np.allclose(np.sort(cs_mesh.gaps), np.sort(cs.gaps), atol=1e-12):
        raise RuntimeError(f"bench contact: the floor as a mesh found {cs_mesh.size} contacts, the plane {detected}")
    normal_rows = cs.rows[:, free]  # contacts between clamped nodes are dropped, as correct() does
    movable = np.sqrt(np.asarray(normal_rows.multiply(normal_rows).sum(axis=1)).ravel()) > 1e-9
    cs = cs.subset(movable)
    if cs.size == 0:
        raise _BadArgument(f"--contacts {n}: no movable contact detected")
    rows = cs.rows[:, free]
    delta_free = cs.gaps_at(xf)

    def form_w(rows=rows):
        a_inv_ht = plant._solve_columns(rows.T.toarray(), geo)  # noqa: SLF001 - the plant's own A⁻¹
        w = rows @ a_inv_ht
        return 0.5 * (w + w.T)

    t_w, w = _timed(form_w, repeat, budget)
    t_gs, gs = _timed(lambda: gs_model.solve(w, delta_free), repeat, budget)
    t_exact, exact = _timed(lambda: exact_model.solve(w, delta_free), repeat, budget)
    rows3, delta3 = _coulomb_rows(cs, free, xf, x0)
    t_w3, w3 = _timed(lambda: form_w(rows3), repeat, budget)
    mu = np.full(cs.size, opts["mu"])
    t_coulomb, coulomb = _timed(lambda: coulomb_model.solve(w3, delta3, mu), repeat, budget)
    scale = max(float(np.abs(exact.forces).max()), 1e-300)
    reduced = _reduced(plant, geo, cs, rows, w, delta_free, exact, opts) if opts["basis_k"] else {}
    return {**reduced,
        "n_contacts": n,
        "actual_contacts": int(cs.size),
        "detected": int(detected),
        "floor_tilt_deg": tilt,
        "penetrating_free": int((delta_free < 0).sum()),
        "detect_ms": _stats(t_detect),
        "detect_mesh_ms": _stats(t_detect_mesh),
        "mesh_triangles": int(len(mesh_model.obstacles[0].geometry.faces)),
        "w_ms": _stats(t_w),
        "gs_ms": _stats(t_gs),
        "exact_ms": _stats(t_exact),
        "w_coulomb_ms": _stats(t_w3),
        "coulomb_ms": _stats(t_coulomb),
        "gs_sweeps": int(gs.iterations),
        "residual": float(gs.residual),
        "gs_converged": bool(gs.converged),
        "exact_residual": float(exact.residual),
        "gs_vs_exact": float(np.abs(gs.forces - exact.forces).max()) / scale,
        "loaded_contacts": int((exact.forces > 1e-9 * scale).sum()),
        "total_force_N": float(exact.forces.sum()),
        "coulomb_sweeps": int(coulomb.iterations),
        "coulomb_residual": float(coulomb.residual),
        "coulomb_converged": bool(coulomb.converged),
    }


def _reduced(plant, geo, cs, rows, w, delta_free, exact, opts: dict) -> dict:
    """The reduced contact basis (Goury §III, λ = Ψβ) on this case: Ψ by NNMF (k =
    ``--basis-k``) of the exact forces of 16 neighbouring problems (the floor shifted by
    ±1/8 … ±1 alarm distances and tilted along x, never the case itself), then the timed
    reduced solve — Ŵ = (HᵀΨ)ᵀ A⁻¹ (HᵀΨ), k column solves whatever the contact count, and
    the k-dimensional LCP — against the full one (W's forming and the exact LCP), with the
    reduced forces' error and the penetration they leave (gaps with the full W)."""
    import numpy as np

    from soft_inverse_ros.core.contact.nnmf import nnmf
    from soft_inverse_ros.core.contact.signorini import solve_signorini_exact

    repeat, budget, alarm = opts["repeat"], opts["max_seconds"], opts["alarm"]
    x = cs.points[:, 0]
    along = (x - x.mean()) / max(float(np.ptp(x)), 1e-12)
    snapshots = []
    for shift in np.concatenate((-np.arange(1, 9), np.arange(1, 9))) * alarm / 8.0:
        d = delta_free + shift + 0.5 * alarm * along * np.sign(shift)
        snapshots.append(solve_signorini_exact(w, d).forces)
    s_mat = np.array(snapshots).T  # (m, 16)
    k = opts["basis_k"]
    if k > min(s_mat.shape):  # (it was capped without a word)
        raise ValueError(f"--basis-k {k}: at most {min(s_mat.shape)} here ({s_mat.shape[0]} contacts, "
                         f"{s_mat.shape[1]} snapshots of their forces)")
    psi = nnmf(s_mat, k).basis  # (m, k) ≥ 0

    def reduced_solve():
        hpsi = np.asarray(rows.T @ psi)  # (n_free, k)
        a_inv = plant._solve_columns(hpsi, geo)  # noqa: SLF001 - the plant's own A⁻¹
        w_hat = hpsi.T @ a_inv
        w_hat = 0.5 * (w_hat + w_hat.T)
        used = np.diag(w_hat) > 1e-12 * float(np.diag(w_hat).max())
        beta = np.zeros(k)
        beta[used] = solve_signorini_exact(w_hat[np.ix_(used, used)], psi[:, used].T @ delta_free).forces
        return beta

    t_red, beta = _timed(reduced_solve, repeat, budget)
    forces = psi @ beta
    gaps = w @ forces + delta_free
    ref = max(float(np.linalg.norm(exact.forces)), 1e-300)
    return {"basis_k": int(k), "reduced_ms": _stats(t_red),
            "reduced_force_error": float(np.linalg.norm(forces - exact.forces)) / ref,
            "reduced_total_force_N": float(forces.sum()),
            "reduced_penetration_mm": 1e3 * float(max(0.0, -gaps.min()))}


def _header() -> str:
    return (f"{'N':>5s} {'actual':>6s} {'loaded':>6s} {'detect ms':>16s} {'mesh det. ms':>16s} {'W ms':>16s} "
            f"{'GS ms':>16s} {'sweeps':>6s} {'residual':>8s} {'exact ms':>16s} {'W3 ms':>16s} "
            f"{'Coulomb ms':>18s} {'sweeps':>6s} {'residual':>8s}")


def _row(c: dict) -> str:
    def t(key: str, width: int = 16) -> str:
        s = c[key]
        text = f"{s['median']:.3g}/{s['p95']:.3g}" + (f" n{s['n']}" if s["n"] < 10 else "")
        return f"{text:>{width}s}"

    flag = "" if c["coulomb_converged"] else "*"
    return (f"{c['n_contacts']:5d} {c['actual_contacts']:6d} {c['loaded_contacts']:6d} {t('detect_ms')} {t('detect_mesh_ms')} "
            f"{t('w_ms')} {t('gs_ms')} {c['gs_sweeps']:6d} {c['residual']:8.1e} {t('exact_ms')} "
            f"{t('w_coulomb_ms')} {t('coulomb_ms', 18)} {c['coulomb_sweeps']:5d}{flag:1s} "
            f"{c['coulomb_residual']:8.1e}")


def _warm_up() -> None:
    """Imports and first calls of the solvers (daqp) outside the timed samples."""
    import numpy as np

    from soft_inverse_ros.core.contact.signorini import solve_coulomb_gs, solve_signorini_exact, solve_signorini_gs

    w = np.array([[2.0, 0.5], [0.5, 1.0]])
    d = np.array([-1.0, 0.5])
    solve_signorini_gs(w, d)
    solve_signorini_exact(w, d)
    solve_coulomb_gs(np.eye(3), np.array([-1.0, 0.1, 0.0]), np.array([0.5]))


def measure(opts: dict, out=None) -> dict:
    """Run every case of the parsed options ``opts`` (see :func:`_parse`); print the table
    to ``out`` (default: the current sys.stdout)."""
    import numpy as np

    out = sys.stdout if out is None else out
    counts = opts["counts"]
    n_nodes = opts["nodes"]
    _warm_up()
    t0 = time.perf_counter()
    desc, mesh = _box(n_nodes)
    x0 = np.array(mesh.points, dtype=float)
    surface = np.unique(mesh.boundary_faces())
    bottom = surface[np.abs(x0[surface, 2] - x0[:, 2].min()) < 1e-9]
    floors = {n: _floor(x0, surface, bottom, n, opts["alarm"]) for n in counts}  # bad counts fail here
    plant = _plant(desc, opts["dt"], opts["solver"])
    if not np.array_equal(plant.positions, x0):
        raise RuntimeError("bench contact: the plant's nodes differ from the generated mesh's")
    plant.step()  # the free motion: one implicit-Euler step without contact
    step = {"x0": x0, "x_free": plant.positions.copy(), "geo": plant._geo,  # noqa: SLF001
            "surface": surface, "bottom": bottom}
    motion = float(np.linalg.norm(step["x_free"] - x0, axis=1).max())
    setup = time.perf_counter() - t0
    solver = plant.solver_stats()
    solver_name = getattr(getattr(plant._solver, "direct", None), "name", opts["solver"])  # noqa: SLF001
    k = _box_divisions(n_nodes)
    print(f"bench contact: cantilever box {plant.mesh.n_points} nodes ({4 * k}x{k}x{k} hexes), "
          f"{plant.fem.n_free} free DOFs, {step['bottom'].size} bottom-face nodes; solver {solver_name}, "
          f"one thread; dt {opts['dt']:g} s, alarm {opts['alarm'] * 1e3:g} mm, mu {opts['mu']:g}; "
          f"largest free motion in the step {motion * 1e3:.3f} mm; setup {setup:.1f} s", file=out, flush=True)
    if motion >= opts["alarm"]:
        print(f"note: the free motion ({motion * 1e3:.3f} mm) exceeds the alarm distance: contacts can be missed",
              file=out)
    print(f"times: median/p95 ms over {opts['repeat']} samples (fewer: nK, capped at {opts['max_seconds']:g} s "
          "per quantity); W by the plant's _solve_columns (factorization of the step's A0 reused); "
          "loaded = contacts carrying force (exact LCP); * = Coulomb GS hit its sweep cap", file=out)
    print(_header(), file=out, flush=True)
    cases = []
    for n in counts:
        c = _case(plant, step, n, floors[n], opts)
        cases.append(c)
        print(_row(c), file=out, flush=True)
        if c["actual_contacts"] != n:
            print(f"  note: {n} contacts requested, {c['actual_contacts']} detected and movable "
                  f"({c['detected']} detected)", file=out, flush=True)
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "bench": NAME,
        "cases": cases,
        "robot": f"box_robot({n_nodes})",
        "nodes": int(plant.mesh.n_points),
        "free_dofs": int(plant.fem.n_free),
        "bottom_nodes": int(step["bottom"].size),
        "solver": solver_name,
        "factorizations": int(solver.factorizations),
        "dt": opts["dt"],
        "alarm_mm": opts["alarm"] * 1e3,
        "mu": opts["mu"],
        "free_motion_max_mm": motion * 1e3,
        "repeat": opts["repeat"],
        "max_seconds": opts["max_seconds"],
        "threads": 1,
        "setup_s": setup,
        "machine": {"machine": platform.machine(), "processor": platform.processor() or None,
                    "system": platform.system(), "cpus": os.cpu_count(), "load_average": load},
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def run(args: argparse.Namespace) -> int:
    try:
        opts = _parse(args)
    except _BadArgument as exc:
        print(f"bench {NAME}: {exc}", file=sys.stderr)
        return 2
    limiter = limit_threads()  # one BLAS thread while timing
    try:
        result = measure(opts)
    except _BadArgument as exc:
        print(f"bench {NAME}: {exc}", file=sys.stderr)
        return 2
    finally:
        if limiter is not None:  # a caller in the same process (tests) gets its threads back
            limiter.restore_original_limits()
    result["threadpoolctl"] = limiter is not None
    if args.json:
        print(finite_json.dumps(result), flush=True)
    return 0
