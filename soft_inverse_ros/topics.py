"""Topic names and frames of the soft_inverse_ros graph (one place, used by nodes,
launch graphs, the recorder and the analysis tools).

Names are relative, so a launch namespace applies to all of them. QoS profiles are in
:mod:`soft_inverse_ros.nodes.qos`.
"""

#: Robot base frame (REP-103: x forward, y left, z up); every position is expressed in it.
BASE_FRAME = "base_link"
#: Frame of the motion-capture system before registration.
MOCAP_FRAME = "mocap"

# --- the two-rate control pipeline -------------------------------------------------
#: geometry_msgs/PointStamped, effector target [m], target_node -> inverse_controller_node.
TARGET = "target"
#: geometry_msgs/PointStamped, interactive goal for target_node (e.g. from RViz).
TARGET_GOAL = "target_goal"
#: soft_inverse_ros_msgs/ActuatorCommand, controller -> drivers (every command, ~1 kHz).
ACTUATOR_COMMAND = "actuator_command"
#: soft_inverse_ros_msgs/ActuatorCommand, the same commands at ``command_throttle_hz``
#: (and at each status change), controller -> fem_node (remapped onto its
#: ``actuator_command`` by the launch graphs): the low-rate loop needs the newest command
#: ~30 times a second, and each reader of the 1 kHz stream costs the controller a send per
#: command (topic_tools' ``<topic>_throttle`` naming).
ACTUATOR_COMMAND_THROTTLE = "actuator_command_throttle"
#: soft_inverse_ros_msgs/InverseSolverStatus, controller health per tick.
INVERSE_STATUS = "inverse_status"
#: soft_inverse_ros_msgs/FemState, fem_node -> compliance_node.
FEM_STATE = "fem_state"
#: soft_inverse_ros_msgs/ComplianceSnapshot, compliance_node -> controller.
COMPLIANCE = "compliance"

# --- devices -----------------------------------------------------------------------
#: sensor_msgs/JointState, servo positions [rad] / velocities / efforts (servo driver).
SERVO_STATES = "servo/joint_states"
#: sensor_msgs/JointState, chamber pressures [Pa] in ``effort`` (valve driver).
CHAMBER_PRESSURES = "valves/chamber_states"

# --- simulated robot and motion capture --------------------------------------------
#: geometry_msgs/PointStamped, true effector position of the simulated plant [m].
PLANT_EFFECTOR_TRUE = "plant/effector_true"
#: sensor_msgs/PointCloud2, true marker positions of the simulated plant [m].
PLANT_MARKERS_TRUE = "plant/markers_true"
#: geometry_msgs/PoseArray, true poses of the soft snake's plates, link 0's first [m].
PLANT_PLATE_POSES = "plant/plate_poses"
#: geometry_msgs/PointStamped, true centre of mass of the simulated snake [m].
PLANT_COM_TRUE = "plant/com_true"
#: geometry_msgs/PointStamped, measured effector position in the robot frame [m].
MOCAP_EFFECTOR = "mocap/effector"
#: sensor_msgs/PointCloud2, unlabeled markers in the robot frame [m].
MOCAP_MARKERS = "mocap/markers"
#: prefix of geometry_msgs/PoseStamped per rigid body: mocap/<body>/pose.
MOCAP_BODY_PREFIX = "mocap"
#: geometry_msgs/PoseArray, the robot description's obstacles (``collision.obstacles``, in
#: that order) as poses relative to their declared pose [m] in the robot frame: the
#: simulated robot publishes them when an obstacle moves (on hardware: motion capture);
#: fem_node detects contacts against them.
OBSTACLE_POSES = "obstacles/poses"

# --- health and visualization ------------------------------------------------------
#: diagnostic_msgs/DiagnosticArray (absolute, as ROS tools expect).
DIAGNOSTICS = "/diagnostics"
#: visualization_msgs/MarkerArray: deformed mesh, effector, target, cables, pressures.
ROBOT_MARKERS = "visualization/robot"
