"""Hardware backends behind the seams of `envs.robot`: the Franka arm through libfranka (`FrankyRobot`, franky-control
>= 2.0) and real cameras (`RealSenseCameras` through pyrealsense2, `OpenCVCameras` for plain USB / V4L2 cameras).

Every hardware library is imported lazily, inside the class that needs it: without the `real` extra the error
names it (`pip install 'robot-rl[real]'`), and importing this package needs nothing beyond numpy.

Layout::

    franky_robot.py   FrankyRobotConfig, FrankyRobot (Robot over franky: CartesianImpedanceTracker, Gripper)
    cameras.py        CameraConfig, the newest-frame reader thread, crop / resize, MultiCameras (several devices)
    realsense.py      RealSenseCamera, list_realsense (serials, profiles)
    opencv_camera.py  OpenCVCamera, list_opencv (/dev/video*)

Usage::

    robot = FrankyRobot(FrankyRobotConfig(robot_ip="172.16.0.2"))
    cams = make_cameras(["realsense:123456789012=front", "opencv:/dev/video0=wrist"], size=128)
"""
