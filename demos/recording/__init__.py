"""Recording episodes with a teleop device (demos.devices) on the twin or over a robot server: demonstrations
(`demos.recording.demos`: RecordDemosConfig, record_demos, record_episode, make_recording_env) and labelled frames
for a reward classifier (`demos.recording.labels`: RecordLabelsConfig, record_labels, record_segment, the labelers
EventLabeler / InfoLabeler, BackOutAfterSuccess, make_continuing_env). Both write robot_rl.episodes files, one per
episode or segment, atomically. Nothing is imported here.
"""
