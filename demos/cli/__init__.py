"""The demo-side commands (`robot-rl record-demos`, `episodes`, `record-labels`). Command modules only parse
arguments, build a config and call one function; nothing imports them but `robot_rl.cli`.
"""
