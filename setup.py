"""ament_python package soft_inverse_ros (also pip-installable for the wheel-based setup)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "soft_inverse_ros"

# ROS 2 node executables (for `ros2 run soft_inverse_ros <name>` and launch files).
NODES = [
    f"{name} = soft_inverse_ros.nodes.{name}:main"
    for name in (
        "target_node",
        "fem_node",
        "compliance_node",
        "inverse_controller_node",
        "recorder_node",
        "plant_sim_node",
        "mocap_node",
        "servo_driver_node",
        "valve_driver_node",
        "gait_node",
        "snake_plant_node",
        "hybrid_model_node",
        "hybrid_plant_node",
    )
]

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.rviz")),
        (f"share/{PACKAGE}/config/robots",
         glob("config/robots/*.yaml") + glob("config/robots/*.npz") + glob("config/robots/*.urdf")),
        (f"share/{PACKAGE}/config/drivers", glob("config/drivers/*.yaml")),
        (f"share/{PACKAGE}/config/trajectories", glob("config/trajectories/*.csv")),
        (f"share/{PACKAGE}/msg", glob("msg/*.msg")),
    ],
    package_data={PACKAGE: ["data/*"]},
    include_package_data=True,
    install_requires=["setuptools"],
    # optional plant backend (plant model "mujoco"); same pin as requirements/mujoco.txt
    extras_require={"mujoco": ["mujoco-core==4.0.1"]},
    zip_safe=False,
    maintainer="soft_inverse_ros developers",
    maintainer_email="maintainers@soft-inverse-ros.org",
    description="Real-time inverse control of soft robots from FEM models, as ROS 2 nodes.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [f"soft-inverse-ros = {PACKAGE}.cli:main", *NODES],
    },
)
