"""Shared runtime of the soft_inverse_ros nodes: typed parameters from a config dataclass,
clean start/stop, and the executor loop.

Parameters: each node describes its parameters once as a frozen dataclass whose fields
carry ``metadata={"description": ..., "range": (lo, hi), "choices": (...)}``; they are
read-only after start unless the field says ``"dynamic": True``.
:func:`declare_config` declares them with types, ranges and descriptions, reads the
values (parameter files, ``-p`` overrides) and builds the dataclass (whose ``__post_init__`` may validate further); :func:`check_known_parameters`
rejects keys the node does not know. Any problem raises
:class:`NodeConfigError` naming the node and the key; :func:`run_nodes` turns it into a
clear fatal log line and exit code 2.

Executor: rclpy's EventsExecutor uses far less CPU than the default executor on these
machines, but its ``spin()`` ignores SIGINT; we spin with ``spin_once`` in a loop that
stops when SIGINT/SIGTERM set a flag (measured: 1 kHz timers keep their rate), so no
callback is interrupted half-way at shutdown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import typing
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from soft_inverse_ros.core.yaml_files import load_yaml

T = TypeVar("T")

#: exit code of a node that refused its configuration
EXIT_CONFIG_ERROR = 2


class NodeConfigError(ValueError):
    """A node parameter is missing, unknown, of the wrong type or out of range."""


def _param_type(field: dataclasses.Field, hints: dict[str, Any]):
    from rcl_interfaces.msg import ParameterType

    hint = hints[field.name]
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is bool:
        return ParameterType.PARAMETER_BOOL
    if hint is int:
        return ParameterType.PARAMETER_INTEGER
    if hint is float:
        return ParameterType.PARAMETER_DOUBLE
    if hint is str:
        return ParameterType.PARAMETER_STRING
    if origin in (tuple, list) and args:
        inner = args[0]
        return {
            float: ParameterType.PARAMETER_DOUBLE_ARRAY,
            int: ParameterType.PARAMETER_INTEGER_ARRAY,
            str: ParameterType.PARAMETER_STRING_ARRAY,
            bool: ParameterType.PARAMETER_BOOL_ARRAY,
        }[inner]
    raise TypeError(f"config field {field.name}: unsupported type {hint!r}")


def _descriptor(field: dataclasses.Field, param_type: int):
    from rcl_interfaces.msg import (
        FloatingPointRange,
        IntegerRange,
        ParameterDescriptor,
        ParameterType,
    )

    meta = field.metadata
    text = meta.get("description", "")
    if "choices" in meta:
        text += f" (one of: {', '.join(map(str, meta['choices']))})"
    # The config dataclass is built once at start: a run-time ``ros2 param set`` would be
    # accepted and silently ignored, so only fields marked ``"dynamic": True`` (the node
    # applies them in its set-parameters callback) may change after declaration.
    descriptor = ParameterDescriptor(name=field.name, type=param_type, description=text,
                                     read_only=not meta.get("dynamic", False))
    bounds = meta.get("range")
    if bounds is not None:
        lo, hi = bounds
        if param_type == ParameterType.PARAMETER_DOUBLE:
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)
            ]
        elif param_type == ParameterType.PARAMETER_INTEGER:
            descriptor.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
    return descriptor


def check_known_parameters(node, known: Sequence[str]) -> None:
    """Reject parameters given to ``node`` (files, ``-p``) that it does not declare.

    Raises:
        NodeConfigError: naming the unknown keys and listing the known ones.
    """
    known_set = set(known) | {"use_sim_time"}
    unknown = sorted(k for k in given_parameters(node) if k not in known_set)
    if unknown:
        raise NodeConfigError(
            f"{node.get_name()}: unknown parameter(s) {unknown}; "
            f"known: {sorted(known_set - {'use_sim_time'})}"
        )


def given_parameters(node) -> set[str]:
    """The parameter names ``node`` was given (parameter files, ``-p``), not its defaults."""
    return set(getattr(node, "_parameter_overrides", {}) or {})


def config_parameter_names(config_cls: type, prefix: str = "") -> list[str]:
    """The parameter names :func:`declare_config` declares for ``config_cls``."""
    return [prefix + f.name for f in dataclasses.fields(config_cls) if f.init]


#: why ``use_sim_time`` cannot change at runtime (``ros2 param set ... use_sim_time``)
CLOCK_SWITCH_REFUSED = ("use_sim_time is fixed when the node starts (its timers, stamps, staleness checks "
                        "and watchdogs follow one clock; switching stopped them): restart the node, or the "
                        "graph with clock:=")


def refuse_clock_switch(node) -> None:
    """Refuse runtime changes of ``node``'s ``use_sim_time`` (rclpy lets any node switch
    clocks: a servo driver switched from wall time to simulated time stopped ticking, its
    watchdog with it, while its diagnostics said OK). Idempotent."""
    if getattr(node, "_clock_switch_refused", False):
        return
    from rcl_interfaces.msg import SetParametersResult

    def check(params) -> SetParametersResult:
        current = bool(node.get_parameter("use_sim_time").value)
        for param in params:
            if param.name == "use_sim_time" and bool(param.value) != current:
                return SetParametersResult(successful=False, reason=CLOCK_SWITCH_REFUSED)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(check)
    node._clock_switch_refused = True


def declare_config(node, config_cls: type[T], *, prefix: str = "") -> T:
    """Declare the fields of ``config_cls`` as parameters ``<prefix><field>`` of ``node``
    and build the dataclass from their values.

    Call :func:`check_known_parameters` once with every declared name to reject unknown
    keys.

    Raises:
        NodeConfigError: a value of the wrong type or out of range, a missing required
            value, or a validation error of the dataclass.
    """
    from rclpy.exceptions import (
        InvalidParameterTypeException,
        InvalidParameterValueException,
        ParameterException,
    )

    name = node.get_name()
    refuse_clock_switch(node)
    fields = [f for f in dataclasses.fields(config_cls) if f.init]
    hints = typing.get_type_hints(config_cls)
    values: dict[str, Any] = {}
    for field in fields:
        key = prefix + field.name
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = field.default_factory()  # type: ignore[misc]
        else:
            default = None
        param_type = _param_type(field, hints)
        descriptor = _descriptor(field, param_type)
        descriptor.name = key
        try:
            if default is None:
                param = node.declare_parameter(key, descriptor=descriptor)
            elif isinstance(default, (tuple, list)) and not default:
                # an empty default has no element type: declare the array type statically
                from rclpy.parameter import Parameter

                param = node.declare_parameter(key, Parameter.Type(param_type), descriptor)
            else:
                if isinstance(default, tuple):
                    default = list(default)
                param = node.declare_parameter(key, default, descriptor)
        except (InvalidParameterTypeException, InvalidParameterValueException,
                ParameterException) as exc:
            raise NodeConfigError(f"{name}: parameter '{key}': {exc}") from None
        value = param.value
        if value is None and isinstance(default, (tuple, list)) and not default:
            value = ()
        if value is None:
            raise NodeConfigError(f"{name}: parameter '{key}' is required "
                                  f"({field.metadata.get('description', '')})")
        choices = field.metadata.get("choices")
        if choices is not None and value not in choices:
            raise NodeConfigError(
                f"{name}: parameter '{key}' is {value!r}, expected one of {list(choices)}"
            )
        if isinstance(value, float) and not math.isfinite(value) and not field.metadata.get(
            "allow_inf", False
        ):
            raise NodeConfigError(f"{name}: parameter '{key}' must be finite")
        if isinstance(value, list):
            value = tuple(value)
        values[field.name] = value
    try:
        return config_cls(**values)
    except (TypeError, ValueError) as exc:
        raise NodeConfigError(f"{name}: {exc}") from None


def make_executor(context=None):
    """The executor used by every node (EventsExecutor when available), on ``context``
    (rclpy's default context when None)."""
    try:
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    except ImportError:  # older rclpy
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)


class _StartupInterrupted(BaseException):
    """SIGINT or SIGTERM while the nodes were being built (a BaseException: no ``except
    Exception`` of a constructor swallows it)."""


_signals_deferred = [0]  # depth of signals_deferred() blocks in this process
_startup_interrupted = [False]  # a start-up interruption was raised in this process


def _quiet_startup_interrupts() -> None:
    """Keep a start-up interruption, and the wreckage it leaves, off the console.

    The signal handler raises :class:`_StartupInterrupted` in whatever Python code runs;
    when that code was called back from C through ctypes (llvmlite's object-cache
    notification while numba compiles or caches a kernel), ctypes cannot pass it on: it
    ends the callback and prints the exception with a traceback ("Exception ignored on
    calling ctypes callback function"), which a user's Ctrl-C must not show. This hook
    drops those reports (the stop flag is set: the start-up ends once the node being built
    is done). An interrupted constructor also leaves objects half built, whose destructor
    then fails when they are freed: llvmlite's ``ObjectRef.__del__`` printed "Exception
    ignored in … AttributeError: 'ValueRef' object has no attribute '_as_parameter_'" when
    a CI run's Ctrl-C landed while the controller loaded its kernels. Once an interruption
    was raised, the process only leaves, so the hook drops destructors' reports too; every
    other report goes to the previous hook.
    """
    previous = sys.unraisablehook
    if getattr(previous, "_quiet_startup_interrupts", False):
        return

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, _StartupInterrupted):
            return
        if _startup_interrupted[0] and getattr(unraisable.object, "__name__", "") == "__del__":
            return
        previous(unraisable)

    hook._quiet_startup_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """True when ``exc`` or an exception in its chain (``__cause__``/``__context__``) is a
    ``kind``."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Within this block a SIGINT/SIGTERM during start-up does not abandon the start-up at
    once: a driver switching its outputs on (configure, activate) finishes, its node is
    built, and its ``close()`` (outputs safe, port closed) runs before the process exits,
    as for any built node. Without it an interrupt could land between two servos' torque-on
    writes and leave them on."""
    _signals_deferred[0] += 1
    try:
        yield
    finally:
        _signals_deferred[0] -= 1


#: how long after the first SIGINT/SIGTERM the process may take to end [s] (ros2 launch
#: sends SIGTERM after 5 s and SIGKILL 10 s later)
SHUTDOWN_GRACE_S = 4.0


class _ShutdownWatchdog:
    """Ends the process if it is still alive :data:`SHUTDOWN_GRACE_S` after the first
    SIGINT/SIGTERM while the main thread has not begun closing the nodes: it says where
    the main thread is (its stack, on stderr), closes the nodes (outputs safe), and exits
    with status 0.

    Python runs a signal handler only when the main thread comes back to the interpreter;
    twice in CI a node (the plant, the mocap) outlived SIGINT, SIGTERM and 15 s, killed by
    ros2 launch without closing. The watchdog is woken by the C-level signal handler itself
    (``signal.set_wakeup_fd``), so it runs even then. It waits while a driver is switching
    its outputs on (:func:`signals_deferred`), and stands down once the main thread has
    begun closing the nodes (a recorder writing its bag may take longer)."""

    def __init__(self, nodes: list) -> None:
        import os
        import signal
        import threading

        self.nodes = nodes  # run_nodes' list, filled as the nodes are built
        self._lock = threading.Lock()
        self._owner: str | None = None  # who shuts the nodes down: "main" or "watchdog"
        self._read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        threading.Thread(target=self._run, name="shutdown-watchdog", daemon=True).start()

    def _run(self) -> None:
        import os
        import threading
        import time
        import traceback

        os.read(self._read, 1)  # the first SIGINT / SIGTERM
        time.sleep(SHUTDOWN_GRACE_S)
        while _signals_deferred[0]:
            time.sleep(0.05)
        with self._lock:
            if self._owner is not None:  # the main thread is closing the nodes: its job
                return
            self._owner = "watchdog"
        frame = sys._current_frames().get(threading.main_thread().ident)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(none)\n"
        _write_stderr(f"[WARN] shutdown stalled: the main thread did not finish within "
                      f"{SHUTDOWN_GRACE_S:g} s of the signal; closing the nodes from the "
                      f"watchdog and exiting. Main thread at:\n{stack}")
        _close_nodes(list(self.nodes))
        os._exit(0)

    def main_shuts_down(self) -> None:
        """Called by the main thread before it closes the nodes. If the watchdog already
        is, wait for it to end the process."""
        import time

        with self._lock:
            if self._owner is None:
                self._owner = "main"
                return
        while True:
            time.sleep(1.0)


def _close_nodes(nodes: Sequence[Any]) -> None:
    """``close()`` every node that has one (outputs safe, files closed); a failure is
    reported and the others are still closed."""
    for node in nodes:
        close = getattr(node, "close", None)
        if close:
            try:
                close()
            except Exception as exc:  # noqa: BLE001 -- report, keep closing the others
                _write_stderr(f"[ERROR] {node.get_name()}: close failed: {exc}\n")


def _unblock_if_pipe(fd: int) -> None:
    """Make ``fd`` non-blocking when it is a pipe (ros2 launch's, which it may have stopped
    reading, full): a write then fails instead of hanging. A terminal is left alone: the
    flag would stay on the shell's terminal after this process."""
    import os
    import stat

    if stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.set_blocking(fd, False)


def _write_stderr(text: str) -> None:
    """Write to stderr, without blocking on a full pipe."""
    import os

    try:
        _unblock_if_pipe(2)
        os.write(2, text.encode(errors="replace"))
    except OSError:
        pass


def params_files(argv: Sequence[str]) -> list[Path]:
    """The ``--params-file FILE`` arguments among the ROS arguments of ``argv``."""
    files, in_ros_args = [], False
    items = iter(argv)
    for item in items:
        if item == "--ros-args":
            in_ros_args = True
        elif item == "--":
            in_ros_args = False
        elif in_ros_args and item == "--params-file":
            value = next(items, None)
            if value is not None:
                files.append(Path(value))
    return files


def _param_sections(data: Any, prefix: str = "") -> tuple[list[tuple[str, Mapping]], str | None]:
    """(the sections of a parameters file: (node path, its ``ros__parameters``), in file
    order, up to the first malformed key; that key, or None): a section is
    ``{ros__parameters: {...}}``, possibly nested under namespaces."""
    sections: list[tuple[str, Mapping]] = []
    for key, value in data.items():
        path = f"{prefix}/{str(key).strip('/')}" if prefix else str(key).strip("/")
        if not isinstance(value, Mapping):
            return sections, path
        if "ros__parameters" in value:
            if not isinstance(value["ros__parameters"], Mapping):
                return sections, path
            sections.append((path, value["ros__parameters"]))
            continue
        nested, bad = _param_sections(value, path)
        sections += nested
        if bad is not None or not nested:
            return sections, bad or path
    return sections, None


def params_file_problem(argv: Sequence[str]) -> str | None:
    """Why a ``--params-file`` of ``argv`` cannot configure a node (one line), or None:
    missing, not YAML, empty, or a section without ``ros__parameters`` (misspelled). rcl
    would say it in a traceback, or (an empty file) not at all."""
    import yaml

    for path in params_files(argv):
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except OSError as exc:
            return f"parameters file {path}: {exc.strerror or exc}"
        except UnicodeDecodeError as exc:
            return f"parameters file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at {exc.start})"
        except yaml.YAMLError as exc:
            from soft_inverse_ros.core.yaml_files import yaml_problem

            return f"parameters file {path} is not YAML ({yaml_problem(exc)})"
        if data is None:
            return f"parameters file {path} is empty"
        if not isinstance(data, Mapping):
            return f"parameters file {path}: expected node names at the top level, got {type(data).__name__}"
        _, bad = _param_sections(data)
        if bad is not None:
            return (f"parameters file {path}: section {bad!r} is not NODE: {{ros__parameters: {{...}}}} "
                    "(ros__parameters misspelled or missing?)")
    return None


def file_parameters(data: Any, node_path: str) -> dict[str, Any]:
    """The ``ros__parameters`` a parameters file's content ``data`` gives the node
    ``node_path`` (its fully qualified name): every section naming it, later ones winning."""
    values: dict[str, Any] = {}
    for path, params in _param_sections(data)[0] if isinstance(data, Mapping) else ():
        if _section_applies(path, node_path):
            values.update(params)
    return values


def _section_applies(section: str, node_path: str) -> bool:
    """Whether a parameters file's section (``fem_node``, ``/ns/fem_node``, ``/**``,
    ``/**/fem_node``, ``/ns/*``) names the node ``node_path`` (its fully qualified name):
    ``*`` one name, ``**`` any number; a bare name matches that node in any namespace
    (lenient: a false refusal would stop a working graph)."""
    import fnmatch

    pattern = [t for t in section.split("/") if t]
    names = [t for t in node_path.split("/") if t]
    if len(pattern) == 1 and pattern[0] not in ("*", "**"):
        return bool(names) and fnmatch.fnmatchcase(names[-1], pattern[0])

    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(names)
        if pattern[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(names) + 1))
        return j < len(names) and fnmatch.fnmatchcase(names[j], pattern[i]) and match(i + 1, j + 1)

    return match(0, 0)


def init_ros(argv: Sequence[str]) -> str | None:
    """``rclpy.init`` with ``argv`` (no signal handlers: the caller's) after its parameters
    files passed :func:`params_file_problem`; what is wrong (one line), or None when rclpy
    is up. rcl's own refusals (bad ROS arguments) come back as that line, not a traceback."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    problem = params_file_problem(argv)
    if problem is None:
        try:
            rclpy.init(args=list(argv), signal_handler_options=SignalHandlerOptions.NO)
        except Exception as exc:  # noqa: BLE001 -- rcl's RCLError
            problem = f"cannot start ROS 2: {' '.join(str(exc).split())}"
    return problem


#: how close a parameters file's section name must be to a node's name to be taken for a typo of it
_TYPO_SIMILARITY = 0.85


def unused_params_file(argv: Sequence[str], nodes: Sequence[Any]) -> str | None:
    """A ``--params-file`` of ``argv`` with no section for any of ``nodes`` but one whose name
    is a near miss of a node's name (``target_nod``, ``fem_nodes``: its values would be
    silently ignored), or None. A graph's shared file without a section for a node (its
    defaults apply) is not one: the names of the shipped nodes are not near misses of each
    other (SequenceMatcher ratio at most 0.76)."""
    import difflib

    names = [node.get_fully_qualified_name() for node in nodes]
    bases = [name.rstrip("/").rsplit("/", 1)[-1] for name in names]
    for path in params_files(argv):
        sections = [name for name, _ in _param_sections(load_yaml(path.read_text(encoding="utf-8")) or {})[0]]
        if any(_section_applies(section, name) for section in sections for name in names):
            continue
        for section in sections:
            last = section.rsplit("/", 1)[-1]
            close = [b for b in bases if difflib.SequenceMatcher(None, last, b).ratio() >= _TYPO_SIMILARITY]
            if close:
                return (f"parameters file {path}: section {section!r} does not name node {close[0]!r} "
                        f"({', '.join(names)}): a typo? its values would be ignored")
    return None


def run_nodes(factories: Sequence[Callable[[], Any]], args: Sequence[str] | None = None,
              fatal_errors: typing.Mapping[type, int] | None = None) -> int:
    """Init rclpy, build the nodes, spin until SIGINT/SIGTERM, clean up, end the process.

    SIGINT and SIGTERM only set a flag once the nodes are up: the callback that is running
    finishes, the loop stops, ``close()`` (if a node has one) runs, both signals are then
    ignored, and the process ends (:func:`end_process`, which says why the executor, the
    nodes and the context are not torn down: the return value is the process's exit
    status, the function does not return). While the nodes are being built, either signal
    abandons the build at once (a robot model or a numba cache load takes seconds, tens
    under load; ``ros2 launch`` escalates to SIGKILL after 15 s): the nodes already built
    are closed and the process exits with status 0 (inside :func:`signals_deferred`, a
    driver switching its outputs on, the node is built first and then closed; a signal
    landing in Python code that C called back, numba's cache notification, ends the start-up
    once that node is built, without a traceback: :func:`_quiet_startup_interrupts`). A
    :class:`NodeConfigError` (or any ``ValueError`` / ``FileNotFoundError`` raised while a
    node is constructed: bad robot file, bad mesh) is reported as one fatal line and exit
    code 2, without a traceback; so is an exception of a type in ``fatal_errors`` (raised
    while the nodes start or spin), with the exit code it maps to (a driver's device that
    does not answer: 1).
    """
    import signal
    import threading

    import rclpy
    from rclpy.executors import ExternalShutdownException

    stop = threading.Event()
    starting = [False]  # True from inside the try below until the nodes are up

    def on_signal(*_) -> None:
        stop.set()
        if starting[0] and not _signals_deferred[0]:  # abandon the start-up (a model
            _startup_interrupted[0] = True  # build, a numba cache load: seconds)
            raise _StartupInterrupted

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    _quiet_startup_interrupts()
    nodes: list = []
    watchdog = _ShutdownWatchdog(nodes)
    argv = list(args) if args is not None else list(sys.argv)
    problem = init_ros(argv)
    if problem is not None:
        print(f"[FATAL] {problem}", file=sys.stderr, flush=True)
        end_process(EXIT_CONFIG_ERROR)
    code = 0
    executor = make_executor()
    try:
        starting[0] = True
        try:
            for factory in factories:
                if stop.is_set():
                    break
                node = factory()
                nodes.append(node)
                executor.add_node(node)
            unused = unused_params_file(argv, nodes)
            if unused is not None:
                raise NodeConfigError(unused)
        except Exception as exc:
            # the interruption raised inside an extension's call into Python comes back
            # wrapped: pybind11 (rclpy's deserialize_message) turns it into a TypeError
            if stop.is_set() and _caused_by(exc, _StartupInterrupted):
                raise _StartupInterrupted from exc
            raise
        freeze_startup_objects()
        starting[0] = False
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.05)
    except _StartupInterrupted:
        starting[0] = False
        print(f"[INFO] interrupted while starting: {len(nodes)} of {len(factories)} node(s) "
              "built; exiting", file=sys.stderr, flush=True)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (NodeConfigError, ValueError, FileNotFoundError) as exc:
        starting[0] = False
        print(f"[FATAL] {exc}", file=sys.stderr, flush=True)
        code = EXIT_CONFIG_ERROR
    except tuple(fatal_errors or ()) as exc:
        starting[0] = False
        print(f"[FATAL] {exc}", file=sys.stderr, flush=True)
        code = next(c for t, c in (fatal_errors or {}).items() if isinstance(exc, t))
    finally:
        starting[0] = False
        watchdog.main_shuts_down()
        _close_nodes(nodes)
        # no executor.remove_node / executor.shutdown / rclpy.try_shutdown here: they tear
        # down rclpy objects (try_shutdown destroys every node of the context), see end_process
        ignore_termination_signals()
        if sys.exc_info()[0] is not None:  # an unexpected error: its traceback, status 1
            import traceback

            traceback.print_exc()
            code = 1
        end_process(code)
    return code  # not reached


def end_process(code: int) -> typing.NoReturn:
    """Leave the process with ``code`` once its nodes are closed (outputs safe, files
    closed), without shutting down the executor or the context, destroying the DDS
    entities one by one, or letting the interpreter free the rclpy objects.

    Tearing them down races with the EventsExecutor's event callbacks while the rest of
    the graph is shutting down too (ros2/rclpy#1644): node processes segfaulted in
    ``Node.destroy_node`` at Ctrl-C (fem_node, whichever order the executor and the nodes
    went in; the recorder once), also when the runtime called only ``rclpy.try_shutdown()``
    (rclpy >= 9 destroys every node of the context there: fem_node, about 1 run in 10 of
    the Ctrl-C test), and destructors at interpreter exit had aborted (exit -6). The
    operating system releases the sockets and shared memory; the other participants drop
    this one when its DDS lease expires. rclpy's logging is not finalized either: the
    console lines are written as they come, a log file under ``~/.ros/log`` may lack the
    last buffered lines."""
    import os

    # the last line says the status itself: ros2 launch's child watcher at times finds a
    # child already reaped and reports "exit code 255" whatever it was
    print(f"[INFO] exiting with status {code}", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):  # without blocking on a full pipe: a blocked
        try:  # flush would wait for ros2 launch's SIGKILL
            _unblock_if_pipe(stream.fileno())
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def freeze_startup_objects() -> None:
    """Collect once, then move every object alive after start-up (modules, numpy, numba,
    rclpy, the nodes: ~80k objects) out of the garbage collector's reach (``gc.freeze``).

    A full (generation 2) collection traverses every tracked object: 40 ms in a controller
    process after start-up, measured here, i.e. 40 missed 1 ms ticks whenever the allocations
    of the loops trigger one. Frozen objects are never traversed (nor freed: they live as
    long as the process anyway); objects created later are collected as usual."""
    import gc

    gc.collect()
    gc.freeze()


def ignore_termination_signals() -> None:
    """Ignore SIGINT and SIGTERM from here to the process exit (call after shutdown).

    A terminal's Ctrl-C reaches the whole process group, then ``ros2 launch`` forwards
    another SIGINT: a node that has already shut down must not react. Restoring Python's
    handler raised KeyboardInterrupt inside the destructors of rclpy objects freed at exit
    (abort, exit -6); a Python handler is reset to SIG_DFL during interpreter finalization
    (killed by the signal, exit -2); SIG_IGN survives both.
    """
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def main_for(node_cls, args: Sequence[str] | None = None,
             fatal_errors: typing.Mapping[type, int] | None = None) -> int:
    """``main()`` of a single-node executable (:func:`run_nodes`)."""
    return run_nodes([node_cls], args if args is not None else sys.argv, fatal_errors)
