"""Start a node graph as separate processes (the wheel-based stand-in for ``ros2 launch``).

Each :class:`~soft_inverse_ros.graph.NodeSpec` becomes
``python -m soft_inverse_ros.nodes.<executable> --ros-args ...`` with the same node name,
parameter files, overrides and remappings that ``launch/*.launch.py`` would pass. The
launcher prefixes each process's output with its name, forwards SIGINT/SIGTERM, shuts the
graph down cleanly (SIGINT, then SIGTERM, then SIGKILL after timeouts), and reports a
process that died: a required one takes the whole graph down. If the launcher itself dies
(``kill -9``), its nodes get SIGTERM from the kernel and stop (soft_inverse_ros/supervision.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TextIO

import yaml

from soft_inverse_ros.dds_shm import remove_stale_fastdds_files
from soft_inverse_ros.graph import NodeSpec, resolve_params_file
from soft_inverse_ros.supervision import LAUNCHER_PID_ENV


def format_parameter(value: object) -> str:
    """A parameter value as the text of ``-p name:=value`` (parsed as YAML by rcl)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # Quote strings that YAML would read as something else ("true", "1.5", "").
        return value if value and yaml.safe_load(value) == value else f"'{value}'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_parameter(v) for v in value) + "]"
    raise TypeError(f"unsupported parameter value {value!r}")


def node_command(spec: NodeSpec, python: str = sys.executable) -> list[str]:
    """The argv that starts one node the way ``ros2 launch`` would."""
    argv = [python, "-m", spec.module, "--ros-args"]
    if spec.renames_node:
        argv += ["-r", f"__node:={spec.name}"]
    for params_file in spec.params_files:
        argv += ["--params-file", str(resolve_params_file(params_file))]
    for name, value in spec.parameters.items():
        argv += ["-p", f"{name}:={format_parameter(value)}"]
    for source, target in spec.remappings:
        argv += ["-r", f"{source}:={target}"]
    return argv


@dataclass
class ProcessExit:
    name: str
    returncode: int
    required: bool


class GraphProcesses:
    """A running graph. Use as a context manager or call :meth:`shutdown` yourself."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        *,
        output: TextIO | None = sys.stdout,
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        """``prefix``: argv put before each node's command (e.g. ``ip netns exec NS``, which
        execs the node: signals still reach it)."""
        self.nodes = tuple(nodes)
        self._prefix = tuple(prefix)
        self._output = output
        self._env = env
        self._log_dir = log_dir
        self._procs: dict[str, subprocess.Popen] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.exits: list[ProcessExit] = []

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> "GraphProcesses":
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env[LAUNCHER_PID_ENV] = str(os.getpid())  # the nodes end if this process dies (supervision.py)
        if self._log_dir:
            self._log_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.nodes:
            proc = subprocess.Popen(
                [*self._prefix, *node_command(spec)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # signals are forwarded by us, not the terminal
                text=True,
                bufsize=1,
            )
            self._procs[spec.name] = proc
            thread = threading.Thread(target=self._pump, args=(spec.name, proc), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _pump(self, name: str, proc: subprocess.Popen) -> None:
        # line-buffered: a log can be followed while the graph runs (``tail -f``, the
        # distributed experiment's readiness check) and a killed launcher loses no lines
        log = open(self._log_dir / f"{name}.log", "w", buffering=1) if self._log_dir else None
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                if log:
                    log.write(line)
                if self._output is not None:
                    with self._lock:
                        self._output.write(f"[{name}] {line}")
                        self._output.flush()
        finally:
            if log:
                log.close()

    def poll(self) -> list[ProcessExit]:
        """Processes that exited since the last call."""
        new = []
        for spec in self.nodes:
            proc = self._procs.get(spec.name)
            if proc is None or proc.returncode is not None:
                continue
            code = proc.poll()
            if code is not None:
                new.append(ProcessExit(spec.name, code, spec.required))
        self.exits.extend(new)
        return new

    def running(self) -> list[str]:
        return [name for name, proc in self._procs.items() if proc.poll() is None]

    def pid(self, name: str) -> int:
        return self._procs[name].pid

    def shutdown(self, *, sigint_timeout: float = 10.0, sigterm_timeout: float = 5.0) -> None:
        """SIGINT every process, then SIGTERM, then SIGKILL those still alive; then remove
        the shared-memory files the ended processes' DDS left behind (``dds_shm.py``)."""
        for sig, timeout in ((signal.SIGINT, sigint_timeout), (signal.SIGTERM, sigterm_timeout),
                             (signal.SIGKILL, 5.0)):
            alive = [p for p in self._procs.values() if p.poll() is None]
            if not alive:
                break
            for proc in alive:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and any(p.poll() is None for p in alive):
                time.sleep(0.05)
        for thread in self._threads:
            thread.join(timeout=2.0)
        self.poll()
        remove_stale_fastdds_files()

    def __enter__(self) -> "GraphProcesses":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()


def run_graph(
    nodes: Sequence[NodeSpec],
    *,
    duration: float | None = None,
    on_tick: Callable[[float], None] | None = None,
    output: TextIO | None = sys.stdout,
    log_dir: Path | None = None,
) -> int:
    """Run until Ctrl-C / SIGTERM, ``duration`` seconds, or a required node dies.

    Returns 0 on a clean stop, 1 when a required node died (reported on stderr).
    """
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    graph = GraphProcesses(nodes, output=output, log_dir=log_dir)
    status = 0
    reported: set[str] = set()
    start = time.monotonic()
    try:
        graph.start()
        while not stop.is_set():
            elapsed = time.monotonic() - start
            if duration is not None and elapsed >= duration:
                break
            for dead in graph.poll():
                reported.add(dead.name)
                kind = "required node" if dead.required else "node"
                print(f"[launch] {kind} {dead.name} died (exit code {dead.returncode})",
                      file=sys.stderr, flush=True)
                if dead.required:
                    status = 1
                    stop.set()
            if on_tick:
                on_tick(elapsed)
            stop.wait(0.1)
    finally:
        graph.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for e in graph.exits:
        if e.name not in reported and e.returncode not in (0, -signal.SIGINT):
            print(f"[launch] {e.name} exited with code {e.returncode} during shutdown",
                  file=sys.stderr)
    return status
