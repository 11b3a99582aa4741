"""Episode formats for other tool chains: `lerobot` (LeRobotDataset layout: parquet + mp4) and `rosbag`
(rosbag2 / MCAP). Nothing is imported here.
"""
