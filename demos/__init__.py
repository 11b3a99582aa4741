"""robot-rl package (see ../shared/DESIGN.md)."""
