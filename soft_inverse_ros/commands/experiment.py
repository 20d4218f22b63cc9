"""``soft-inverse-ros experiment NAME``: the validation experiments (offline co-simulation).

Experiments (see EXPERIMENTS.md for the recorded results and what they mean):

- ``async-vs-sync``: two-rate (asynchronous) control vs the single-rate baseline on a
  mismatched dynamic plant (ICRA 2015 Figs. 4–6, 1.82 vs 2.33 mm);
- ``qp-variation``: variation of the QP matrices between snapshots vs speed (ICRA 2015 table);
- ``closed-loop``: open vs closed loop (mocap feedback) on the mismatched plant;
- ``plant-mismatch``: static effector response of the simulated robot (as the live graph
  builds it) vs the controller's model, per actuator;
- ``plant-reach``: static reach of the simulated robot along the demo's target path (the
  gap from each point to the closest equilibrium, for the path raised by given amounts);
- ``distributed``: the FEM and the controller in two network namespaces over a delayed,
  lossy link (root only);
- ``self-collision``: SOFA's finger pulled with and without self-collision (Goury 2021 Fig. 5);
- ``reduced-contact``: the finger's contact forces on a reduced NNMF basis (Goury §III–IV);
- ``inverse-contact``: inverse control of the finger with its notches closed (QP with
  complementarity, full and reduced contact, a force-sum limit; Coevoet eq. 13–14);
- ``hybrid-alignment``: a URDF arm carrying a soft rod aligns its probe in a soft block
  (Coevoet Figs 8–9);
- ``snake-link``: curvature of the pneumatic snake's two-chamber link vs pressure (Fig. 5);
- ``snake-gait``: the four-link snake crawling on wheels with the eq. 9 gait.

Each takes ``--json`` (last output line: one JSON object), ``--out DIR`` (JSON and figures)
and ``--quick`` (small sizes).
"""

from __future__ import annotations

import argparse
import importlib


def register(subparsers: argparse._SubParsersAction) -> None:
    from soft_inverse_ros import experiments

    parser = subparsers.add_parser(
        "experiment", help="run a validation experiment (async-vs-sync, closed-loop, self-collision, "
             "inverse-contact, hybrid-alignment, snake-link, ...)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="experiment", metavar="NAME")
    for module in experiments.EXPERIMENTS.values():
        importlib.import_module(f"{experiments.__name__}.{module}").register(sub)
    for experiment in sub.choices.values():  # --out checked before the run, not written after it
        run = experiment.get_default("func")
        if run is not None:
            experiment.set_defaults(func=_out_checked(run))
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _out_checked(run):
    """``run`` preceded by a check that ``--out`` can hold the results (an experiment writes
    them at its end: a mistyped folder cost the whole run), its refusals (``SystemExit``
    with a message) printed as one line prefixed with the experiment's name, exit 2."""
    def checked(args: argparse.Namespace) -> int:
        import sys
        from pathlib import Path

        from soft_inverse_ros.output_paths import writable_folder

        out = getattr(args, "out", None)
        problem = None if out is None else writable_folder(Path(out), "--out")
        if problem is not None:
            print(f"experiment {args.experiment}: {problem}", file=sys.stderr)
            return 2
        try:
            return run(args)
        except SystemExit as exc:  # an experiment's refusal: one line with its name, exit 2
            if not isinstance(exc.code, str):
                raise
            message = exc.code
            for prefix in (f"experiment {args.experiment}: ", f"{args.experiment}: "):
                message = message.removeprefix(prefix)
            print(f"experiment {args.experiment}: {message}", file=sys.stderr)
            return 2

    return checked
