"""``soft-inverse-ros fit-pneumatics``: fit the chamber pressure model to a step response.

Input: a CSV with columns ``time_s``, ``pressure_pa`` (measured gauge pressure) and
``duty`` (the duty commanded at that sample, 0..1), e.g. logged while stepping one valve
between full inflation and full deflation. Output: the fitted ``pneumatics:`` block for
the valve driver configuration, and the response error.

Lines starting with ``#`` are comments; a UTF-8 byte-order mark (Excel) is ignored.
``time_s`` must be in seconds: a log whose median sample period is 0.5 s or more (a log in
milliseconds at up to 2 kHz) is refused.

A fitted parameter pinned at a bound of the fit (the inflow and outflow rates within a
factor e^5 of their estimate from the data, the knee in [1 Pa, 10 x supply], the latency in
[0, 0.2 s]) is a bound, not a measurement: the data do not determine it (a log in ms, a
step too short to settle, no full deflation). Such a fit is reported (``at_bounds`` in the
JSON, a warning, a comment in the block) and exits 1 unless ``--accept-bounds``.

``--demo`` fits a synthetic "measured" response (known parameters + Gaussian noise)
instead, and prints fitted against true values.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import non_negative, non_negative_count, positive, positive_at_most

#: Parameters of the synthetic demo response (also a plausible small soft actuator).
DEMO_TRUE = {
    "supply_pressure_pa": 100_000.0,
    "inflow_coefficient": 2100.0,
    "outflow_rate_pa_s": 400_000.0,
    "outflow_knee_pa": 20_000.0,
    "latency_s": 0.015,
}
#: Demo duty schedule: inflate fully, deflate fully, half duty, deflate [(time s, duty)].
DEMO_SCHEDULE = [(0.1, 1.0), (0.8, 0.0), (1.6, 0.5), (2.4, 0.0)]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fit-pneumatics",
        help="fit the valve/chamber pressure model to a measured step response",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("csv", nargs="?", type=pathlib.Path, help="time_s,pressure_pa,duty CSV")
    parser.add_argument("--supply-pa", type=positive, help="supply pressure [Pa] (required with a CSV)")
    parser.add_argument("--demo", action="store_true", help="fit a synthetic noisy response")
    parser.add_argument("--noise-pa", type=non_negative, default=None,
                        help="--demo: sensor noise [Pa] (default 500)")
    parser.add_argument("--rate-hz", type=positive_at_most(MAX_DEMO_RATE_HZ, "each model evaluation steps through "
                                                          "every sample: beyond it the fit takes minutes"),
                        default=None, help=f"--demo: sample rate [Hz], at most {MAX_DEMO_RATE_HZ:g} (default 200)")
    parser.add_argument("--seed", type=non_negative_count, default=None, help="--demo: noise seed (default 0)")
    parser.add_argument("--accept-bounds", action="store_true",
                        help="exit 0 even when fitted parameters sit at the fit's bounds (still warned about)")
    parser.add_argument("--plot", help="save measured vs fitted to this image (no suffix: .png)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=_run)


#: longest step-response recording [s] taken for seconds (a valve test lasts seconds; a log
#: in milliseconds read as seconds made the fit simulate for hours)
MAX_SPAN_S = 600.0
#: smallest median sample period [s] refused as "not seconds": a log in milliseconds sampled
#: at up to 2 kHz has a median period >= 0.5 (ms read as s), while a real log sampled at 2 Hz
#: or slower cannot resolve the latency (fit bound 0.2 s) nor a chamber's rise (tens of ms),
#: so no usable log in seconds is refused. A ms log sampled faster than 2 kHz passes this
#: check: the fit then pins parameters at its bounds, which is refused after the fit.
MIN_REFUSED_PERIOD_S = 0.5
#: highest --demo sample rate [Hz]: the fit steps the model through every sample in Python
#: (~0.1 s per evaluation of the 3 s demo at 10 kHz, up to 200 evaluations); a pressure log
#: is rarely faster, and 1 kHz already resolves the model's fastest time (the latency, ms)
MAX_DEMO_RATE_HZ = 10_000.0
#: longest parse error kept in a message [characters] (numpy lists every bad line)
MAX_PROBLEM_CHARS = 200


def _schedule_from_duty(times, duty):
    """(initial duty, switch times, duties) of a sampled piecewise-constant duty."""
    import numpy as np

    changes = np.flatnonzero(np.diff(duty) != 0.0) + 1
    return float(duty[0]), [float(times[i]) for i in changes], [float(duty[i]) for i in changes]


def _data_lines(path: pathlib.Path) -> list[str]:
    """The header and data lines of ``path``: comments (``#``) and blank lines dropped, a
    UTF-8 byte-order mark (a CSV saved by Excel) ignored."""
    from soft_inverse_ros.core.csv_files import data_lines

    try:
        lines = data_lines(path)
    except UnicodeDecodeError:
        raise ValueError(f"cannot read {path}: not UTF-8 text") from None
    if not lines:
        raise ValueError(f"cannot read {path}: the file is empty (no header line, no rows)")
    return lines


def _one_line(exc: Exception) -> str:
    """``exc``'s message as one short line: numpy's first bad line of its list, capped."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    detail = next((ln for ln in lines if ln.startswith("Line #")), lines[0] if lines else type(exc).__name__)
    more = len(lines) - 2 if detail.startswith("Line #") else 0
    text = detail + (f" (and {more} more line(s))" if more > 0 else "")
    return text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 3] + "..."


def _load_csv(path: pathlib.Path):
    import numpy as np

    lines = _data_lines(path)
    try:
        data = np.genfromtxt(lines, delimiter=",", names=True, dtype=float)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"cannot read {path}: {_one_line(exc)}") from None
    names = data.dtype.names or ()
    missing = [c for c in ("time_s", "pressure_pa", "duty") if c not in names]
    if missing:
        raise ValueError(f"{path} lacks column(s) {', '.join(missing)} (has {', '.join(names) or 'none'})")
    t, p, d = (np.atleast_1d(data[c]) for c in ("time_s", "pressure_pa", "duty"))
    if t.size < 2:
        raise ValueError(f"{path}: {t.size} data row(s); a step response needs more")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(d))):
        raise ValueError(f"{path} has non-numeric time_s or duty values")
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"{path}: time_s must increase strictly")
    if t[-1] - t[0] > MAX_SPAN_S:
        raise ValueError(f"{path}: time_s spans {t[-1] - t[0]:g} s (more than {MAX_SPAN_S:g} s): is it in seconds?")
    period = float(np.median(np.diff(t)))
    if period >= MIN_REFUSED_PERIOD_S:
        raise ValueError(f"{path}: time_s has a median sample period of {period:g} s (at least "
                         f"{MIN_REFUSED_PERIOD_S:g} s: too slow for a step response): is it in seconds, not ms?")
    if np.any((d < 0) | (d > 1)):
        raise ValueError(f"{path}: duty must lie in [0, 1]")
    if np.all(d == d[0]):
        raise ValueError(f"{path}: the duty never changes: no step to fit")
    return t, p, d


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from soft_inverse_ros.core.drivers.pneumatic_model import (
        PneumaticParams,
        fit_step_response,
        simulate_schedule,
    )

    truth = None
    if args.demo and (args.csv is not None or args.supply_pa is not None):
        print("fit-pneumatics: --demo fits a synthetic response; it takes no CSV or --supply-pa",
              file=sys.stderr)
        return 2
    demo_only = [f"--{k.replace('_', '-')}" for k in ("noise_pa", "rate_hz", "seed") if getattr(args, k) is not None]
    if demo_only and not args.demo:
        print(f"fit-pneumatics: {', '.join(demo_only)}: for the --demo response only (a CSV's samples are measured)",
              file=sys.stderr)
        return 2
    args.noise_pa = 500.0 if args.noise_pa is None else args.noise_pa
    args.rate_hz = 200.0 if args.rate_hz is None else args.rate_hz
    args.seed = 0 if args.seed is None else args.seed
    if args.demo:
        truth = PneumaticParams(**DEMO_TRUE)
        times = np.arange(0.0, 3.0, 1.0 / args.rate_hz)
        switches = [s for s, _ in DEMO_SCHEDULE]
        duties = [u for _, u in DEMO_SCHEDULE]
        initial = 0.0
        clean = simulate_schedule(truth, times, switches, duties)
        measured = clean + np.random.default_rng(args.seed).normal(0.0, args.noise_pa, times.size)
        supply = truth.supply_pressure_pa
    else:
        if args.csv is None or args.supply_pa is None:
            print("fit-pneumatics: give a CSV and --supply-pa, or --demo", file=sys.stderr)
            return 2
        times, measured, duty = _load_csv(args.csv)
        initial, switches, duties = _schedule_from_duty(times, duty)
        supply = args.supply_pa
        top = float(np.nanmax(measured))
        if top > 1.05 * supply:
            print(f"fit-pneumatics: the measured pressure reaches {top:g} Pa, above --supply-pa {supply:g} Pa: "
                  "check both are in Pa (gauge)", file=sys.stderr)
            return 2
        if max([initial, *duties]) >= 0.99 and top < 0.05 * supply:  # a weak valve, or kPa
            print(f"fit-pneumatics: warning: under full duty the pressure peaks at {top:g} Pa, under 5 % of "
                  f"--supply-pa {supply:g} Pa: is the log in kPa? (the fit below takes it as Pa)",
                  file=sys.stderr)
        clean = None

    fit = fit_step_response(times, measured, switches, duties, supply, initial_duty=initial)
    got = fit.params
    fields = ("inflow_coefficient", "outflow_rate_pa_s", "outflow_knee_pa", "latency_s")
    result = {
        "fitted": {"supply_pressure_pa": supply, **{f: getattr(got, f) for f in fields}},
        "rms_error_pa": fit.rms_error_pa,
        "max_error_pa": fit.max_error_pa,
        "model_evaluations": fit.iterations,
        "at_bounds": fit.at_bounds,
    }
    if truth is not None:
        result["true"] = DEMO_TRUE
        result["relative_error"] = {
            f: (getattr(got, f) - getattr(truth, f)) / getattr(truth, f) for f in fields
        }
        result["noise_pa"] = args.noise_pa
        result["rms_error_vs_noiseless_pa"] = float(np.sqrt(np.mean((fit.fitted - clean) ** 2)))

    if args.plot is not None:
        from soft_inverse_ros.output_paths import writable_figure

        plot = writable_figure(args.plot, "--plot")
        if isinstance(plot, str):
            print(f"fit-pneumatics: {plot}", file=sys.stderr)
            return 2
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot(times, measured / 1e3, ".", ms=2, label="measured")
        ax.plot(times, fit.fitted / 1e3, "-", label="fitted model")
        ax.set_xlabel("time [s]")
        ax.set_ylabel("pressure [kPa]")
        ax.legend()
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        result["plot"] = str(plot)

    if args.json:
        print(finite_json.dumps(result))
        return _bounds_verdict(fit.at_bounds, args.accept_bounds)
    if truth is not None:
        print(f"{'parameter':<22}{'true':>14}{'fitted':>14}{'error':>9}")
        for f in fields:
            t_val, g_val = getattr(truth, f), getattr(got, f)
            print(f"{f:<22}{t_val:>14.6g}{g_val:>14.6g}{100 * (g_val - t_val) / t_val:>8.2f}%")
        print(f"noise {args.noise_pa:g} Pa; residual RMS {fit.rms_error_pa:.1f} Pa; "
              f"fitted vs noiseless RMS {result['rms_error_vs_noiseless_pa']:.1f} Pa")
    else:
        print(f"residual RMS {fit.rms_error_pa:.1f} Pa, max {fit.max_error_pa:.1f} Pa")
    print("pneumatics:")
    for key, value in result["fitted"].items():
        side = fit.at_bounds.get(key)
        print(f"  {key}: {value:.6g}" + (f"  # at the fit's {side} bound: not determined by the data" if side else ""))
    return _bounds_verdict(fit.at_bounds, args.accept_bounds)


def _bounds_verdict(at_bounds: dict[str, str], accepted: bool) -> int:
    """Exit status of a fit: a parameter at a bound of the fit is the bound, not a value the
    data determined, and most likely wrong (a log in ms, a step too short): warned about,
    and exit 1 (the fit is printed, for inspection) unless ``--accept-bounds``, since e.g. a
    latency below one sample period legitimately sits at 0."""
    if not at_bounds:
        return 0
    pinned = ", ".join(f"{name} at its {side} bound" for name, side in at_bounds.items())
    verdict = "accepted (--accept-bounds)" if accepted else "not trusted: exit 1 (--accept-bounds to accept it)"
    print(f"fit-pneumatics: warning: {pinned}: the data do not determine them (time_s in ms? a step too "
          f"short to settle? no full deflation?); fit {verdict}", file=sys.stderr)
    return 0 if accepted else 1
