"""TensorBoard scalars of a one-process run (`robot-rl train`, the forward/backward run) in OUT/tensorboard
(robot_rl.run_dir.tensorboard_dir, the distributed learner's directory too); a no-op with a note when tensorboard is
not installed.

Usage::

    tb = ScalarWriter(tensorboard_dir(out))
    tb.write({"success_rate": 0.5, "return": 3.2}, step=1000)   # numbers only; env_step is the x axis
    tb.close()
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ScalarWriter:
    """TensorBoard scalars when tensorboard is installed (a no-op otherwise)."""

    def __init__(self, logdir: Path) -> None:
        self._writer: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(logdir))
        except ImportError:
            print("[train] tensorboard not installed: no TensorBoard scalars (pip install tensorboard)",
                  file=sys.stderr)

    def write(self, row: Mapping[str, Any], step: int) -> None:
        if self._writer is None:
            return
        for k, v in row.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k != "env_step":
                self._writer.add_scalar(k, v, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
