"""Run report: a folder with ``metrics.json``, ``metrics.md`` (tables) and PNG plots.

Usage (what ``soft-inverse-ros analyze BAG`` does)::

    report = write_report("bags/run1", "bags/run1_report", nominal_command_hz=200.0)
    report.metrics["tracking"]["plant"]["rms_mm"]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soft_inverse_ros import finite_json
from soft_inverse_ros.analysis import plots
from soft_inverse_ros.analysis.contacts import load_contacts, plot_contacts
from soft_inverse_ros.analysis.metrics import Interp, compute_metrics, tracking_error
from soft_inverse_ros.analysis.run_data import find_topic, load_run
from soft_inverse_ros.analysis.snake import load_snake, plot_snake, snake_metrics
from soft_inverse_ros.analysis.snapshots import render_marker_snapshots
from soft_inverse_ros.analysis.validity import (
    RunValidity,
    ValidityLimits,
    assess_run,
    headline,
    load_controller_status,
    load_plant_clock,
    summary,
)
from soft_inverse_ros.topics import CHAMBER_PRESSURES


@dataclass
class Report:
    out_dir: Path
    metrics: dict[str, Any]
    files: list[Path] = field(default_factory=list)


def default_report_dir(bag: str | Path) -> Path:
    """``<bag folder>_report`` next to the bag (for a storage file: next to its folder)."""
    bag = Path(bag).resolve()  # "." (run inside the bag folder) has no name
    base = bag if bag.is_dir() else bag.parent
    return base.with_name(f"{base.name}_report")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 or abs(value) >= 1e4 else f"{value:.{digits}f}"
    return str(value)


def metrics_markdown(metrics: dict[str, Any]) -> str:
    """Human-readable tables of :func:`compute_metrics` output."""
    lines = [f"# Run report: `{metrics['bag']}`", ""]
    if validity := metrics.get("validity"):
        lines += [f"**{line.strip()}**" if i == 0 else line
                  for i, line in enumerate(headline(RunValidity(**validity)))] + [""]
    summ = metrics.get("summary") or {}
    if summ.get("plant_error_samples"):
        lines += [f"Tracking window (what the validity and `--json` judge): from "
                  f"{summ['tracking_start_s']:.2f} s of the recording, "
                  f"{summ['plant_error_samples']} plant samples: mean "
                  f"{_fmt(summ['plant_mean_error_mm'])} mm, RMS {_fmt(summ['plant_rms_error_mm'])} mm, "
                  f"max {_fmt(summ['plant_max_error_mm'])} mm.", ""]
    tracking = {k: v for k, v in metrics["tracking"].items() if v}
    if tracking:
        lines += ["## Tracking error (|effector − target|, the whole recording: start-up included)", "",
                  "| source | phase | n | mean [mm] | RMS [mm] | max [mm] | p95 [mm] |",
                  "|---|---|---|---|---|---|---|"]
        for label, s in tracking.items():
            rows = [("all", s)] + list(s["phases"].items())
            for phase, r in rows:
                lines.append(f"| {label} | {phase} | {r['n']} | {_fmt(r['mean_mm'])} | "
                             f"{_fmt(r['rms_mm'])} | {_fmt(r['max_mm'])} | {_fmt(r['p95_mm'])} |")
        lines.append("")
    rates = {k: v for k, v in metrics["rates"].items() if v}
    if rates:
        lines += ["## Loop rates", "",
                  "| stream | n | rate [Hz] | nominal [Hz] | jitter std [ms] | jitter p99 [ms] | "
                  "max period [ms] | missed slots |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, r in rates.items():
            missed = r["missed_slot_fraction"]
            lines.append(
                f"| {name} | {r['n']} | {_fmt(r['rate_hz'])} | {_fmt(r['nominal_hz'])} "
                f"({r['nominal_source'] or '–'}) | {_fmt(r['jitter_std_ms'])} | "
                f"{_fmt(r['jitter_p99_ms'])} | {_fmt(r['period_max_ms'])} | "
                f"{'–' if missed is None else f'{100 * missed:.2f} %'} |")
        lines.append("")
    if lat := metrics.get("latency_target_to_command"):
        lines += ["## Target stamp → tick start (not end to end)", "",
                  "From a target's stamp to the start of the controller tick that answered it "
                  "(the command's header stamp): the solve, the publish and the delivery come after "
                  "it. End-to-end latency is measured at a receiver: `soft-inverse-ros bench pipeline`.", "",
                  "| n | mean [ms] | p50 [ms] | p99 [ms] | max [ms] |", "|---|---|---|---|---|",
                  f"| {lat['n']} | {_fmt(lat['mean_ms'])} | {_fmt(lat['p50_ms'])} | "
                  f"{_fmt(lat['p99_ms'])} | {_fmt(lat['max_ms'])} |", ""]
    if sm := metrics.get("smoothness"):
        lines += ["## Actuator smoothness (total variation over the run)", "",
                  "| actuator | efforts TV | efforts TV / s | strokes TV | strokes TV / s |",
                  "|---|---|---|---|---|"]
        per_s_e = sm["efforts_total_variation_per_s"] or {}
        per_s_s = sm["strokes_total_variation_per_s"] or {}
        for name, tv in sm["efforts_total_variation"].items():
            lines.append(f"| {name} | {_fmt(tv)} | {_fmt(per_s_e.get(name))} | "
                         f"{_fmt(sm['strokes_total_variation'][name])} | {_fmt(per_s_s.get(name))} |")
        lines.append("")
    if st := metrics.get("command_status"):
        lines += [f"Command status: {st['ok']} ok, {st['held']} held, {st['safe']} safe "
                  f"(of {st['n']}).", ""]
    for key, title in (("solver", "QP solver"), ("fem", "FEM loop")):
        if section := metrics.get(key):
            lines += [f"## {title}", "", "| quantity | mean [ms] | p50 [ms] | p99 [ms] | max [ms] |",
                      "|---|---|---|---|---|"]
            for name, s in section.items():
                if isinstance(s, dict):
                    lines.append(f"| {name} | {_fmt(s['mean_ms'])} | {_fmt(s['p50_ms'])} | "
                                 f"{_fmt(s['p99_ms'])} | {_fmt(s['max_ms'])} |")
            if key == "solver":
                lines.append(f"\nNot-OK command fraction: {100 * section['not_ok_fraction']:.2f} %")
            lines.append("")
    if snake := metrics.get("snake"):
        from soft_inverse_ros.analysis.snake import snake_markdown

        lines += snake_markdown(snake)
    if contacts := metrics.get("contacts"):
        lines += ["## Contacts (the simulated robot's, per diagnostics window)", "",
                  f"Windows in contact: {contacts['windows_in_contact']} of {contacts['windows']}; "
                  f"contacts at most {contacts['contacts_max']}; total contact force at most "
                  f"{_fmt(contacts['contact_force_total_max_N'])} N; penetration of the free "
                  f"motion at most {_fmt(contacts['free_penetration_max_mm'])} mm.", ""]
    lines += ["## Topics", "", "| topic | messages |", "|---|---|"]
    lines += [f"| `{t}` | {n} |" for t, n in metrics["topics"].items()]
    if metrics["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in metrics["notes"]]
    return "\n".join(lines) + "\n"


def write_report(
    bag: str | Path,
    out_dir: str | Path | None = None,
    *,
    namespace: str | None = None,
    nominal_command_hz: float | None = None,
    nominal_snapshot_hz: float | None = None,
    target_interp: Interp = "linear",
    moving_threshold: float = 1e-3,
    snapshots: int = 3,
    plots_enabled: bool = True,
) -> Report:
    """Analyze ``bag`` and write the report folder (created; files overwritten).

    Args:
        bag: Bag folder or storage file.
        out_dir: Report folder (default :func:`default_report_dir`).
        namespace: Namespace of the graph topics (None: root or the unique namespaced one).
        nominal_command_hz, nominal_snapshot_hz: Nominal loop rates for the jitter and
            missed-slot figures (None: the controller's own rate from its diagnostics, else
            1 / median period for the tables and 1 kHz for the verdict); the verdict counts
            the missed command slots at the controller's own rate when its diagnostics say
            it, whatever ``nominal_command_hz`` (a note says so when they differ).
        target_interp: ``linear`` or ``hold`` (see :func:`metrics.target_at`), for the
            tables and the verdict's figures alike.
        moving_threshold: Target speed [m/s] above which a sample belongs to the moving phase.
        snapshots: Number of 3D robot images rendered from the MarkerArray topic.
        plots_enabled: False writes only metrics.json and metrics.md.
    """
    run = load_run(bag, namespace)
    controller = load_controller_status(bag, namespace)
    table_command_hz = nominal_command_hz or (controller.rate_hz if controller is not None else None)
    metrics = compute_metrics(
        run, nominal_command_hz=table_command_hz, nominal_snapshot_hz=nominal_snapshot_hz,
        target_interp=target_interp, moving_threshold=moving_threshold,
    )
    commands_row = metrics.get("rates", {}).get("actuator_command")
    if nominal_command_hz is None and table_command_hz is not None and commands_row:
        commands_row["nominal_source"] = "controller diagnostics"  # not the user's
    # the slots are those of the loop that commands this robot (the snake's gait: 100 Hz)
    limits = ValidityLimits(nominal_command_hz=nominal_command_hz) if nominal_command_hz \
        else ValidityLimits()
    snake = load_snake(bag)
    validity = assess_run(run, load_plant_clock(bag, namespace), limits, controller,
                          tracking=snake is None, target_interp=target_interp)
    if snake is not None:
        validity.commander = "gait"
    metrics["validity"] = validity.as_dict()
    metrics["summary"] = summary(run, validity)
    contacts = load_contacts(bag, namespace)
    if contacts is not None:  # the tables and the JSON, with or without plots
        metrics["contacts"] = contacts.summary()
        metrics["summary"].update({f"plant_{k}": v for k, v in metrics["contacts"].items()
                                   if k != "windows"})
    out = Path(out_dir) if out_dir is not None else default_report_dir(bag)
    out.mkdir(parents=True, exist_ok=True)
    report = Report(out, metrics)
    if snake is not None:
        metrics["snake"] = snake_metrics(snake)
        pressures = find_topic(metrics["topics"], CHAMBER_PRESSURES, namespace)
        reason = None
        if pressures is None:
            reason = (f"cannot tell whether the snake was actuated: the bag holds no "
                      f"{CHAMBER_PRESSURES} (the valve driver's chamber pressures)")
        elif not metrics["topics"][pressures]:
            reason = ("the valve driver published no chamber pressure: the snake was not "
                      "actuated (see the valve driver's log)")
        for d in (metrics["validity"], metrics["summary"]) if reason else ():
                d["invalid_reasons"] = [*d["invalid_reasons"], reason]
                d["valid"] = False
        metrics["summary"]["snake_forward_speed_mm_s"] = metrics["snake"]["forward_speed_mm_s"]
        if plots_enabled:
            report.files += plot_snake(snake, out)
    if plots_enabled:
        errors = (
            {label: tracking_error(s, run.target, target_interp, moving_threshold)
             for label, s in run.effectors.items()}
            if run.target is not None else {}
        )
        candidates = [
            plots.plot_trajectory_xy(run, out / "trajectory_xy.png"),
            plots.plot_trajectory_time(run, out / "trajectory_time.png"),
            plots.plot_tracking_error(run, errors, out / "tracking_error.png"),
            plots.plot_actuators(run, out / "actuators.png"),
            plots.plot_rates(run, out / "rates.png", (table_command_hz, nominal_snapshot_hz)),
        ]
        report.files += [p for p in candidates if p is not None]
        if contacts is not None:
            report.files.append(plot_contacts(contacts, out / "contacts.png"))
        if run.markers_topic and snapshots > 0:
            images = render_marker_snapshots(bag, run.markers_topic, out, snapshots)
            report.files += [i.path for i in images]
            metrics["snapshots"] = [{"file": i.path.name, "bag_time_s": i.time_s} for i in images]
    metrics["files"] = [p.name for p in report.files]
    (out / "metrics.json").write_text(finite_json.dumps(metrics, indent=2) + "\n")
    md = metrics_markdown(metrics)
    if report.files:
        md += "\n## Figures\n\n" + "\n".join(f"![{p.stem}]({p.name})" for p in report.files) + "\n"
    (out / "metrics.md").write_text(md)
    report.files = [out / "metrics.json", out / "metrics.md", *report.files]
    return report
