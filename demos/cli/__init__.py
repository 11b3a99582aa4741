"""The demo-side commands (`robot-rl record-demos`, `episodes`, `record-labels`). Command modules only parse
arguments, build a config and call one function; nothing imports them but `robot_rl.cli`. The command lines of
record-demos and record-labels (which launch files build) are parsed by their libraries (demos.recording.demos /
labels: parse_record_demos_args, parse_record_labels_args), so tests can check them without a command module.
"""
