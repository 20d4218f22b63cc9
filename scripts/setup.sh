#!/usr/bin/env bash
# Set up soft_inverse_ros from PyPI wheels, idempotently:
#   1. a project venv (.venv) with ROS 2 core wheels, the numerical stack and test tools,
#   2. the package itself (editable),
#   3. the message package soft_inverse_ros_msgs built with colcon from msg/ and installed
#      into the venv prefix (so `import soft_inverse_ros_msgs.msg` works in the venv),
#   4. when ../shared/ros2-launch exists (SOFT_INVERSE_ROS_LAUNCH_STACK), the real
#      launch/launch_ros/ros2cli wheels and composition_interfaces (for `ros2 launch`),
#   5. the package registered in the venv's ament index (ros2 launch / ros2 run find it),
#   6. the main job's numba kernels (and the self-collision scene's narrow phase) compiled
#      into numba's cache (core/jit_warm_up.py), so that a first run does not compile them
#      inside the graph (22-28 s before the first command on 2 cores), and the main job's
#      simulated robot built into the plant build cache (core/sim/build_cache.py, ~12 s).
# A stamp file makes a second run skip 1-5 unless requirements or msg definitions changed;
# 6 always runs (1-2 s once cached; an edited kernel's source invalidates its cache entry,
# an edited core module the plant's).
#
# For a system ROS 2 install (apt, Jazzy/Kilted) use colcon as in the README instead.
#
# Environment: PYTHON (default python3, must be CPython 3.11: the ROS wheels are cp311),
#              VENV (default <repo>/.venv),
#              SOFT_INVERSE_ROS_CHOLMOD=1 also installs CHOLMOD (apt + requirements/fast.txt).
#              SOFT_INVERSE_ROS_MUJOCO=1 also installs MuJoCo (requirements/mujoco.txt) for
#              the optional plant model "mujoco".
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$REPO/.venv}"
STAMP="$VENV/.soft_inverse_ros_setup"

say() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

LAUNCH_STACK="${SOFT_INVERSE_ROS_LAUNCH_STACK:-$REPO/../shared/ros2-launch}"

inputs_hash() {
  (cd "$REPO" && cat requirements/*.txt setup.py setup.cfg msg/*.msg \
      interfaces/soft_inverse_ros_msgs/CMakeLists.txt interfaces/soft_inverse_ros_msgs/package.xml \
      scripts/setup.sh && find launch config -type f | sort \
      && ls "$LAUNCH_STACK/wheels" 2>/dev/null) | sha256sum | cut -d' ' -f1
}

warm_up_kernels() {
  "$VENV/bin/python" -m soft_inverse_ros.core.jit_warm_up 2>&1 | sed 's/^/[setup] /' >&2 \
    || die "compiling the numba kernels failed (see above)"
}

want="$(inputs_hash)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$VENV/bin/python" ]] \
   && "$VENV/bin/python" -c "import rclpy, soft_inverse_ros_msgs.msg, soft_inverse_ros" 2>/dev/null; then
  say "up to date ($VENV)"
  warm_up_kernels
  exit 0
fi

ver="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null)" \
  || die "no Python found as '$PYTHON' (set PYTHON=/path/to/python3.11)"
[[ "$ver" == "3.11" ]] || die "Python $ver found, the ROS 2 wheels need CPython 3.11 (set PYTHON=...)"
command -v cmake >/dev/null || die "cmake is required to build the messages (apt-get install cmake)"
command -v c++ >/dev/null || die "a C++ compiler is required to build the messages (apt-get install g++)"

if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating venv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

say "installing Python requirements (ROS 2 wheels, numerics, tests)"
"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install --quiet -r "$REPO/requirements/ros.txt" -r "$REPO/requirements/build.txt" \
  -r "$REPO/requirements/core.txt" -r "$REPO/requirements/test.txt"
"$PY" -m pip install --quiet --no-deps -e "$REPO"

# Optional CHOLMOD (requirements/fast.txt): needs SuiteSparse and OpenBLAS from apt.
if [[ "${SOFT_INVERSE_ROS_CHOLMOD:-0}" == "1" ]] && ! "$PY" -c "import sksparse" 2>/dev/null; then
  say "installing CHOLMOD (apt: libsuitesparse-dev libopenblas-dev; pip: scikit-sparse)"
  command -v apt-get >/dev/null || die "SOFT_INVERSE_ROS_CHOLMOD=1 needs apt-get"
  apt-get install -y -qq libsuitesparse-dev libopenblas-dev >/dev/null \
    || die "apt-get install libsuitesparse-dev libopenblas-dev failed (run apt-get update?)"
  "$PY" -m pip install --quiet -r "$REPO/requirements/fast.txt"
fi

# Optional MuJoCo plant backend (requirements/mujoco.txt, pip only).
if [[ "${SOFT_INVERSE_ROS_MUJOCO:-0}" == "1" ]] && ! "$PY" -c "import mujoco" 2>/dev/null; then
  say "installing MuJoCo (requirements/mujoco.txt)"
  "$PY" -m pip install --quiet -r "$REPO/requirements/mujoco.txt"
fi

# The ROS wheels' exported CMake targets hard-code the wheel build host's include dirs;
# CMake's generate step fails unless these paths exist. Point them at this interpreter.
pyinc="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
npinc="$("$PY" -c 'import numpy; print(numpy.get_include())')"
link_dir() {  # link_dir TARGET LINK: make LINK a symlink to TARGET unless it already resolves
  local target="$1" link="$2"
  if [[ -e "$link" && "$(readlink -f "$link")" == "$(readlink -f "$target")" ]]; then return; fi
  if ! mkdir -p "$(dirname "$link")" 2>/dev/null || ! ln -sfn "$target" "$link" 2>/dev/null; then
    die "cannot create $link -> $target (needs root once: sudo ln -s $target $link)"
  fi
}
link_dir "$pyinc" /opt/python/cp311-cp311/include/python3.11
link_dir "$npinc" /opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include

# colcon_build NAME BASE_PATH: build an interface package into the venv prefix (where the
# ROS wheels' bootstrapper puts its libraries on the search path).
colcon_build() {
  local name="$1" base="$2" build="$REPO/build/$1"
  say "building $name with colcon (into $VENV)"
  mkdir -p "$build"
  (
    cd "$build"
    export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"
    export PATH="$VENV/bin:$PATH"
    "$VENV/bin/colcon" --log-base "$build/log" build \
      --base-paths "$base" \
      --build-base "$build/build" --install-base "$VENV" --merge-install \
      --event-handlers console_cohesion- summary- status- \
      --cmake-args -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF -Wno-dev \
      > "$build/colcon.out" 2>&1
  ) || { tail -n 40 "$build/colcon.out" >&2; die "$name build failed (full log: $build/colcon.out)"; }
}
colcon_build msgs "$REPO/interfaces"

# The real launch stack (launch, launch_ros, ros2launch, ros2cli: not on PyPI) when the
# project's shared folder holds it: the tests run the launch files under `ros2 launch`.
if [[ -d "$LAUNCH_STACK/wheels" ]]; then
  say "installing the ROS 2 launch stack from $LAUNCH_STACK"
  "$PY" -m pip install --quiet --no-index --find-links "$LAUNCH_STACK/wheels" --no-deps \
    launch launch_ros launch_xml launch_yaml ros2launch ros2cli ros2pkg ros2run osrf_pycommon
  colcon_build composition_interfaces "$LAUNCH_STACK/composition_interfaces"
fi

# Register the package in the venv's ament index as a colcon install of an ament_python
# package does, so that `ros2 launch soft_inverse_ros ...` and `ros2 run` find it:
# share/ament_index/resource_index/packages/<pkg>, share/<pkg>/{package.xml,launch,config}
# as per-file links to the repository (ros2launch's search does not follow a linked
# folder; links keep edits live), lib/<pkg>/<node> links to the console scripts.
say "registering soft_inverse_ros in the ament index of $VENV"
share="$VENV/share/soft_inverse_ros"
rm -rf "$share" "$VENV/lib/soft_inverse_ros"
mkdir -p "$VENV/share/ament_index/resource_index/packages" "$share" "$VENV/lib/soft_inverse_ros"
cp "$REPO/resource/soft_inverse_ros" "$VENV/share/ament_index/resource_index/packages/"
ln -s "$REPO/package.xml" "$share/package.xml"
(cd "$REPO" && find launch config -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.rviz' \)) |
  while read -r rel; do
    mkdir -p "$share/$(dirname "$rel")"
    ln -s "$REPO/$rel" "$share/$rel"
  done
# `source .venv/bin/activate` also points the ament index at the venv (ros2 launch/run).
if ! grep -q "soft_inverse_ros: ament index" "$VENV/bin/activate"; then
  cat >> "$VENV/bin/activate" <<'ACTIVATE'
# soft_inverse_ros: ament index of this venv (ros2 launch / ros2 run soft_inverse_ros)
AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export AMENT_PREFIX_PATH
ACTIVATE
fi
nodes="$("$PY" -c "from importlib.metadata import entry_points
print(*sorted(e.name for e in entry_points(group='console_scripts')
              if e.value.startswith('soft_inverse_ros.nodes.')))")"
[[ -n "$nodes" ]] || die "no node console scripts found (is soft_inverse_ros installed?)"
for node in $nodes; do
  [[ -x "$VENV/bin/$node" ]] || die "console script $node missing from $VENV/bin"
  ln -s "$VENV/bin/$node" "$VENV/lib/soft_inverse_ros/$node"
done

"$PY" -c "import rclpy, soft_inverse_ros_msgs.msg, soft_inverse_ros" \
  || die "the venv does not import rclpy / soft_inverse_ros_msgs / soft_inverse_ros"
say "compiling the main job's and the self-collision scene's numba kernels into numba's cache and building the main job's simulated robot (~75 s once, ~2 s after)"
warm_up_kernels
echo "$want" > "$STAMP"
say "ready: $VENV (run: $VENV/bin/soft-inverse-ros --help)"
