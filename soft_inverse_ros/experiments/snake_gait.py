"""snake-gait: the four-link soft snake crawling on wheels under the eq. 9 gait.

The snake (:mod:`soft_inverse_ros.core.snake.snake`, 7 sections per link) is driven through
the valve/chamber pressure model (:class:`PneumaticChambers`: two 3/2 valves per link in
antagonism, supply pressure, latency), one duty per chamber per 60 Hz PWM period: by default
the paper's eq. 11–12 (``--valve-control tracking``: the duty that brings the chamber to its
setpoint within the period, full flow when far below, venting above), or the open-loop
steady-state duty (``feedforward``, which reaches only ~60 % of an 8 psi command at 1 Hz).
Runs: the gait with anisotropic wheel friction, the same with isotropic friction, and the
gait with ±offset. Isotropic friction is the wheels' rolling blocked: the wheel–ground
contact's Coulomb coefficient μ_across in every direction (μ_along is the rolling wheel's
resistance, not a property of the contact). The same gait with both coefficients at μ_along
(a snake sliding on low friction everywhere) is reported too, as
``isotropic_low_over_anisotropic_travel``. Travel and turn are cycle-averaged (the
mean CoM / heading over the last gait period minus that over the first), so the
undulation's own oscillation does not count as travel; the first ``--settle-periods``
periods (start-up, chambers filling) are left out.
Forward is from plate 0 to the last plate (+x at rest): the gait's wave travels from the
last link toward link 0 (link i's phase is ahead of link i−1's by φ > 0), and lateral
undulation pushes the body against the wave, head (the last plate) first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from soft_inverse_ros.cli_values import finite, non_negative, non_negative_count, positive

NAME = "snake-gait"
PSI = 6894.757293168


def _pneumatics(args):
    from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams

    return PneumaticParams(supply_pressure_pa=args.supply_psi * PSI, inflow_coefficient=args.k_in,
                           outflow_rate_pa_s=args.k_out, outflow_knee_pa=args.knee_pa, latency_s=args.latency)


def run(args, mu_along: float, mu_across: float, offset_pa: float) -> dict:
    """One gait run with friction coefficients (μ_along, μ_across); CoM path (T, 3) [m],
    headings [rad] and times [s]."""
    import numpy as np

    from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticChambers
    from soft_inverse_ros.core.snake.gait import Gait, antagonistic_duties, chamber_pressures, tracking_duties
    from soft_inverse_ros.core.snake.snake import Snake, SnakeParams

    snake = Snake(SnakeParams(dt=args.dt, mu_along=mu_along, mu_across=mu_across,
                              slip_regularization=args.slip_regularization))
    pp = _pneumatics(args)
    chambers = PneumaticChambers([pp] * (2 * snake.params.n_links))
    gait = Gait(args.frequency, args.phase, offset_pa, args.amplitude_psi * PSI)
    next_cmd, times, com, heading, peak = 0.0, [], [], [], np.zeros(2 * snake.params.n_links)
    while snake.time < args.duration - 1e-9:
        if snake.time >= next_cmd - 1e-9:
            signed = gait.pressures(snake.time, snake.params.n_links)
            if args.valve_control == "tracking":
                duties = tracking_duties(chambers, snake.time, chamber_pressures(signed).ravel(), 1.0 / args.pwm_hz)
            else:
                duties = antagonistic_duties(signed, pp).ravel()
            chambers.command(snake.time, duties)
            next_cmd += 1.0 / args.pwm_hz
        chambers.advance(snake.time)
        snake.step(chambers.pressure.reshape(-1, 2))
        if snake.time > args.duration - 1.0 / args.frequency:
            peak = np.maximum(peak, chambers.pressure)
        times.append(snake.time)
        com.append(snake.com())
        heading.append(snake.heading())
    return {"t": np.array(times), "com": np.array(com), "heading": np.unwrap(np.array(heading)),
            "peak_chamber_pa": peak}


def _cycle_change(t, values, period, settle):
    """Mean of ``values`` over the last period minus its mean over the period starting at
    ``settle`` [s] (the start-up, with the chambers still filling, is left out)."""
    first = (t > settle) & (t <= settle + period)
    last = t >= t[-1] - period
    return values[last].mean(0) - values[first].mean(0)


def measure(args: argparse.Namespace) -> dict:
    import numpy as np

    period = 1.0 / args.frequency
    specs = {"anisotropic": (args.mu_along, args.mu_across, 0.0),
             "isotropic": (args.mu_across, args.mu_across, 0.0),
             "isotropic_low": (args.mu_along, args.mu_along, 0.0)}
    if args.only_anisotropic:
        specs = {"anisotropic": specs["anisotropic"]}
    else:
        specs.update({"offset_plus": (args.mu_along, args.mu_across, args.offset_psi * PSI),
                      "offset_minus": (args.mu_along, args.mu_across, -args.offset_psi * PSI)})
    runs = {k: run(args, *v) for k, v in specs.items()}
    forward = np.array([1.0, 0.0])
    settle = args.settle_periods * period
    span = args.duration - period - settle
    travel = {k: _cycle_change(r["t"], r["com"][:, :2], period, settle) for k, r in runs.items()}
    turn = {k: float(_cycle_change(r["t"], r["heading"], period, settle)) for k, r in runs.items()}
    aniso = float(np.linalg.norm(travel["anisotropic"]))
    result = {
        "forward_speed_mm_s": 1e3 * float(travel["anisotropic"] @ forward) / span,
        "anisotropic_travel_mm": 1e3 * aniso,
        "turn_deg": {k: float(np.degrees(v)) for k, v in turn.items()},
        "peak_chamber_psi": float(runs["anisotropic"]["peak_chamber_pa"].min() / PSI),
    }
    if not args.only_anisotropic:
        result.update({
            "isotropic_travel_mm": 1e3 * float(np.linalg.norm(travel["isotropic"])),
            "isotropic_over_anisotropic_travel": float(np.linalg.norm(travel["isotropic"])) / aniso,
            "isotropic_low_travel_mm": 1e3 * float(np.linalg.norm(travel["isotropic_low"])),
            "isotropic_low_over_anisotropic_travel": float(np.linalg.norm(travel["isotropic_low"])) / aniso,
            "turn_sign_follows_offset": bool(turn["offset_plus"] > 0 > turn["offset_minus"]),
        })
    return {
        **result,
        "params": {k: getattr(args, k) for k in ("duration", "dt", "frequency", "phase", "amplitude_psi",
                                                  "offset_psi", "settle_periods", "mu_along", "mu_across", "slip_regularization", "valve_control", "supply_psi",
                                                  "k_in", "k_out", "knee_pa", "latency", "pwm_hz")},
        "_runs": runs,
    }


def _figure(out: Path, runs: dict) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    for name, r in runs.items():
        ax.plot(1e3 * r["com"][:, 0], 1e3 * r["com"][:, 1], label=name)
    ax.set_xlabel("CoM x [mm]")
    ax.set_ylabel("CoM y [mm]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "snake-gait-com.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _options_problem(args: argparse.Namespace) -> str:
    """Why the options cannot make a run ("" when they can): what argparse's types cannot
    see alone (one option against another, or against the valves)."""
    from soft_inverse_ros.core.snake.gait import GaitLimits

    period = 1.0 / args.frequency
    if args.dt > 0.02:
        return f"--dt {args.dt:g} s: at most 0.02 s"
    if period < 10 * args.dt:
        return f"--frequency {args.frequency:g} Hz: a gait period of {period:g} s is under 10 steps of --dt {args.dt:g} s"
    if args.duration < (args.settle_periods + 2) * period:
        return (f"--duration {args.duration:g} s: at least --settle-periods + 2 gait periods "
                f"({(args.settle_periods + 2) * period:g} s)")
    if args.pwm_hz > 1.0 / args.dt:
        return f"--pwm-hz {args.pwm_hz:g}: commands go out once per step at most (1/--dt = {1.0 / args.dt:g} Hz)"
    if args.latency > 1.0:
        return f"--latency {args.latency:g} s: at most 1 s (a unit mistake?)"
    offset = 0.0 if args.offset_psi is None else abs(args.offset_psi)
    refusal = GaitLimits(args.supply_psi * PSI).check(args.frequency, args.phase, offset * PSI,
                                                       args.amplitude_psi * PSI)
    if refusal:  # what gait_node refuses (in Pa)
        return f"{refusal} (--frequency, --phase, --amplitude-psi + |--offset-psi| against --supply-psi)"
    return ""


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="soft snake: gait on wheels with anisotropic friction",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = parser.add_argument
    a("--duration", type=positive, default=None, help="simulated time per run [s] (default 4; --quick: 2 periods)")
    # backward Euler is first order in dt here (travel over 2 s at ε = 0.5 mm/s: 1.60, 1.34,
    # 1.20 mm at dt = 10, 5, 2.5 ms; EXPERIMENTS.md): 5 ms halves 10 ms's discretization error
    a("--dt", type=positive, default=0.005, help="time step [s], at most 0.02 (default 0.005)")
    a("--frequency", type=positive, default=1.0, help="gait frequency f [Hz], at most 5 (gait_node's limit)")
    a("--phase", type=finite, default=1.5708, help="phase shift between links φ [rad], |φ| <= 2π")
    a("--amplitude-psi", type=non_negative, default=8.0,
      help="gait amplitude A [psi]; A + |offset| at most --supply-psi")
    a("--offset-psi", type=finite, default=None,
      help="offset for the turning runs [psi] (default 2; not with --only-anisotropic)")
    a("--mu-along", type=non_negative, default=0.01, help="wheel friction along the body: the rolling wheel's resistance (default 0.01)")
    a("--mu-across", type=non_negative, default=1.0, help="wheel friction across the body")
    # ε must be small against the wheels' slip speeds (~0.6-1.4 mm/s side slip under this
    # gait, measured): at ε = 2 mm/s the side friction was viscous and the travel 47 % above
    # its ε -> 0 value; at 0.5 mm/s it is within 5 % of ε = 0.1 mm/s (EXPERIMENTS.md table).
    a("--slip-regularization", type=positive, default=5e-4,
      help="ε of the regularized Coulomb friction [m/s] (default 0.0005)")
    a("--valve-control", choices=("tracking", "feedforward"), default="tracking",
      help="duty per PWM period: 'tracking' (paper eq. 11-12, to the setpoint as fast as the valve flows) "
           "or 'feedforward' (the setpoint's steady-state duty, open loop)")
    a("--supply-psi", type=positive, default=10.0, help="valve supply pressure [psi]")
    a("--k-in", type=positive, default=5000.0, help="valve inflow coefficient [Pa^0.5/s]")
    a("--k-out", type=positive, default=2e5, help="exhaust rate at high pressure [Pa/s]")
    a("--knee-pa", type=positive, default=5e3, help="exhaust knee pressure [Pa]")
    a("--latency", type=non_negative, default=0.02, help="valve command latency [s], at most 1")
    a("--settle-periods", type=non_negative_count, default=None,
      help="gait periods left out at the start (default 1; --quick: 0)")
    a("--pwm-hz", type=positive, default=60.0, help="PWM / duty command rate [Hz], at most 1/--dt (paper: 60)")
    a("--json", action="store_true", help="print one JSON object as the last line")
    a("--out", type=Path, default=None, help="write snake-gait.json and the CoM figure here")
    a("--quick", action="store_true",
      help="2 gait periods and no settling unless --duration / --settle-periods are given (seconds, for tests)")
    a("--only-anisotropic", action="store_true",
      help="only the anisotropic gait run (forward speed and travel; for convergence studies in --dt and "
           "--slip-regularization)")
    parser.set_defaults(func=main)
    return parser


def main(args: argparse.Namespace) -> int:
    from soft_inverse_ros.experiments import emit

    if args.only_anisotropic and args.offset_psi is not None:
        raise SystemExit(f"experiment {NAME}: --offset-psi sets the turning runs, which "
                         "--only-anisotropic leaves out")
    if not args.only_anisotropic and args.offset_psi is None:
        args.offset_psi = 2.0
    if args.duration is None:  # --quick sizes only what is not given
        args.duration = 2.0 / args.frequency if args.quick else 4.0
    if args.settle_periods is None:
        args.settle_periods = 0 if args.quick else 1
    problem = _options_problem(args)
    if problem:
        raise SystemExit(f"experiment {NAME}: {problem}")
    try:
        result = measure(args)
    except ValueError as exc:
        raise SystemExit(f"experiment {NAME}: {exc}") from None
    runs = result.pop("_runs")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result["figure"] = str(_figure(args.out, runs))
    if not args.json:
        print(f"forward {result['forward_speed_mm_s']:.3f} mm/s, iso/aniso "
              f"{result.get('isotropic_over_anisotropic_travel', float('nan')):.3f}, turns {result['turn_deg']}")
    emit(result, args, NAME)
    return 0
