"""Demonstrations and datasets: teleop devices (`demos.devices`, all implementing envs.devices.HumanDevice),
recording demos and labelled frames (`demos.recording`), episode formats and tools (`demos.formats`), and the
command modules (`demos.cli`: record-demos, record-labels, episodes). See ../shared/DESIGN.md.
"""
