"""Hardware backends behind the seams of `envs.robot`: the Franka arm through libfranka (`FrankyRobot`, franky-control
>= 2.0) and real cameras (RealSense through pyrealsense2, plain USB / V4L2 cameras through OpenCV: `make_cameras`).

Every hardware library is imported lazily, inside the class that needs it: without the `real` extra the error
names it (the `real` extra), and importing this package needs nothing beyond numpy.

Layout::

    franky_robot.py    FrankyRobotConfig, FrankyRobot (Robot over franky: CartesianImpedanceTracker, Gripper)
    franky_gripper.py  GripperCommands (the Franka Hand's debounced binary command)
    franky_listen.py   StateTap (the guard's per-state hooks: franky motion callbacks and a force-limit reaction)
    camera_source.py   CameraConfig, CameraError, FrameSource (the device interface the backends implement)
    cameras.py         ThreadedCamera (newest-frame reader), crop_resize, MultiCameras, make_cameras (spec strings
                       KIND:ID=NAME; the backends imported lazily)
    realsense.py       RealSenseSource, list_realsense (serials, profiles)
    opencv_camera.py   OpenCVSource, list_opencv (/dev/video*)
    safety_box.py      box_from_poses, task configs (write_task_config / load_task_config), record_safety_box
    camera_tools.py    list_cameras, capture_cameras (`robot-rl cameras list|show|record`)
    check.py           check_hardware (`robot-rl check-hardware`: read the arm and cameras, move nothing)
The command modules are envs.cli.cameras, envs.cli.check_hardware and envs.cli.safety_box.

Usage::

    robot = FrankyRobot(FrankyRobotConfig(robot_ip="172.16.0.2"))
    cams = make_cameras(["realsense:123456789012=front", "opencv:/dev/video0=wrist"], image_size=128)
"""
