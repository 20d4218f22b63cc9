"""snake-link: curvature of the two-chamber bending link vs chamber pressure (paper Fig. 5).

The link (:mod:`soft_inverse_ros.core.snake.link_model`) is clamped at its first plate; each
chamber in turn is pressurized from 0 to 8 psi in 1 psi steps (static equilibrium, Newton
continued from the previous pressure). The curvature is the yaw of the end plate relative
to the first plate [rad] (the paper subtracts the yaws of the two rigid connectors). A
least-squares straight line per side (slope [rad/psi], intercept [rad], R²; the points
include 0 psi, so the intercept says how far the response is from proportional), and the
left/right asymmetry |s_L − s_R| / mean(|s|). Sign: signed pressure < 0 is the left
chamber (y < 0), which bends the link to positive yaw.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from soft_inverse_ros.cli_values import count, positive

if TYPE_CHECKING:
    import numpy as np

NAME = "snake-link"


def _fit(p: "np.ndarray", y: "np.ndarray") -> tuple[float, float, float]:
    """(slope, intercept, R²) of the least-squares line y = a p + b."""
    import numpy as np

    a, b = np.polyfit(p, y, 1)
    res = y - (a * p + b)
    r2 = 1.0 - float(res @ res) / float(((y - y.mean()) ** 2).sum())
    return float(a), float(b), r2


def measure(args: argparse.Namespace) -> dict:
    import time

    import numpy as np

    from soft_inverse_ros.core.snake.link_mesh import LinkGeometry
    from soft_inverse_ros.core.snake.link_model import PSI, BendingLink, LinkMaterial

    link = BendingLink(LinkGeometry(sections=args.sections), LinkMaterial(young_modulus=args.young_modulus_kpa * 1e3))
    psi = np.arange(0.0, args.max_psi + 1e-9, args.step_psi)
    sides = {}
    t0 = time.perf_counter()
    for side, sign in (("left", -1.0), ("right", 1.0)):
        link.x = link.rest_points.copy()
        yaw = np.array([link.plate_yaw(link.solve(sign * p * PSI)) for p in psi])
        slope, intercept, r2 = _fit(sign * psi, yaw)
        sides[side] = {"pressure_psi": sign * psi, "yaw_rad": yaw, "slope": slope,
                       "intercept": intercept, "r2": r2}
    solve_s = time.perf_counter() - t0
    p_all = np.concatenate([sides["left"]["pressure_psi"], sides["right"]["pressure_psi"]])
    y_all = np.concatenate([sides["left"]["yaw_rad"], sides["right"]["yaw_rad"]])
    slope_all, _, r2_all = _fit(p_all, y_all)
    s_l, s_r = abs(sides["left"]["slope"]), abs(sides["right"]["slope"])
    return {
        "curvature_slope_per_psi": slope_all,
        "curvature_r2": min(r2_all, sides["left"]["r2"], sides["right"]["r2"]),
        "curvature_r2_both_sides_one_line": r2_all,
        "left_right_asymmetry": abs(s_l - s_r) / (0.5 * (s_l + s_r)),
        "left": sides["left"], "right": sides["right"],
        "curvature_per_m_at_max_psi": float(np.abs(y_all).max() / link.geometry.length),
        "mesh_nodes": link.link_mesh.mesh.n_points, "mesh_tets": link.link_mesh.mesh.n_tets,
        "sections": args.sections, "young_modulus_kpa": args.young_modulus_kpa,
        "solve_time_s": solve_s,
    }


def _figure(out: Path, result: dict) -> Path:
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for side, mark in (("left", "o"), ("right", "s")):
        ax.plot(result[side]["pressure_psi"], np.degrees(result[side]["yaw_rad"]), mark, label=f"{side} chamber")
    p = np.linspace(-8, 8, 3)
    ax.plot(p, np.degrees(result["curvature_slope_per_psi"] * p), "k-", lw=0.8,
            label=f"linear fit, R² = {result['curvature_r2_both_sides_one_line']:.4f}")
    ax.set_xlabel("chamber overpressure [psi] (< 0: left)")
    ax.set_ylabel("end-plate yaw difference [deg]")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = out / "snake-link.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="soft snake link: curvature vs pressure (paper Fig. 5)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-psi", type=positive, default=8.0, help="largest overpressure [psi] (paper: 8)")
    parser.add_argument("--step-psi", type=positive, default=None,
                        help="pressure step [psi] (default 1; --quick: 2)")
    parser.add_argument("--sections", type=count, default=13, help="cross-sections along the link (paper: 13)")
    parser.add_argument("--young-modulus-kpa", type=positive, default=66.0, help="silicone E [kPa] (paper: 66)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", type=Path, default=None, help="write snake-link.json and the figure here")
    parser.add_argument("--quick", action="store_true", help="2 psi steps unless --step-psi is given (seconds, for tests)")
    parser.set_defaults(func=main)
    return parser


def main(args: argparse.Namespace) -> int:
    from soft_inverse_ros.experiments import emit

    if args.step_psi is None:  # --quick sizes only what is not given
        args.step_psi = 2.0 if args.quick else 1.0
    if not (0 < args.step_psi <= args.max_psi <= 20 and args.sections >= 4 and args.young_modulus_kpa > 0):
        raise SystemExit(f"experiment {NAME}: need 0 < --step-psi <= --max-psi <= 20, --sections >= 4, "
                         "--young-modulus-kpa > 0")
    result = measure(args)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result["figure"] = str(_figure(args.out, result))
    if not args.json:
        print(f"slope {result['curvature_slope_per_psi']:.5f} rad/psi, R² {result['curvature_r2']:.5f}, "
              f"asymmetry {100 * result['left_right_asymmetry']:.2f} %")
    emit(result, args, NAME)
    return 0
