"""robot-rl kernel: specs, errors, typed config base, lazy extras and the `robot-rl` command.

This package is the ground floor: it imports none of the other robot-rl packages (only `robot_rl.cli`
imports the subcommand it runs, lazily).
"""

__version__ = "0.1.0"
