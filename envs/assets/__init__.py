"""MJCF assets of the MuJoCo twin."""
