"""Episode files for people and other tool chains: `episode_io` (load_episodes, camera_names, EpisodeToolError, the
tools' exit codes), `video` (PNG strips, mp4 through ffmpeg: camera_strip, video_frames, find_ffmpeg, write_mp4),
`episode_tools` (the `robot-rl episodes` bodies: inspect_episodes, export_episodes, import_episodes,
replay_episodes), `lerobot` (the LeRobotDataset layout: parquet + mp4) and `rosbag` (rosbag2 / MCAP). Nothing is
imported here.
"""
