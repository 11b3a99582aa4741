"""franky-sim with a table the hand can push into, and the push reported as libfranka reports it: franky-sim's own
state leaves the external wrench estimate O_F_ext_hat_K at zero, so this launcher fills it with the MuJoCo contact
wrench the table exerts on the arm (force in the base frame, N; torque about the TCP, Nm), every 1 ms step. Then a
franky condition on Measure.FORCE_X/Y/Z and the robot server's guard see a real push, through the libfranka protocol.

Run with franky-sim's own Python (its virtualenv pins a newer MuJoCo than ours; tests/franky_faults.FrankySim starts
it with `table=True`)::

    .venv-franky-sim/bin/python tests/franky_sim_table.py --table-top-z 0.40

The table is a 30 x 60 cm box in front of the arm (x 0.40 .. 0.70 m, y -0.30 .. 0.30 m) with its top at
--table-top-z (m, base frame); franky-sim's FR3 starts with the TCP at about (0.55, 0, 0.52).
"""

from __future__ import annotations

import argparse
import dataclasses
import xml.etree.ElementTree as ET
from typing import Any

import franky_sim
import mujoco
import numpy as np
from franky_sim.mujoco_simulator import MujocoSimulator


def contact_wrench(model: Any, data: Any, table_id: int, pos_ee: np.ndarray) -> tuple[float, ...]:
    """(fx, fy, fz, tx, ty, tz): what the table exerts on the arm, in the base (world) frame, torque about pos_ee."""
    force, torque, f6 = np.zeros(3), np.zeros(3), np.zeros(6)
    for i in range(data.ncon):
        c = data.contact[i]
        if table_id not in (c.geom1, c.geom2):
            continue
        mujoco.mj_contactForce(model, data, i, f6)
        f_world = c.frame.reshape(3, 3).T @ f6[:3]  # the contact frame's rows are its axes; normal: geom1 -> geom2
        f_on_arm = f_world if c.geom1 == table_id else -f_world
        force += f_on_arm
        torque += np.cross(np.asarray(c.pos) - pos_ee, f_on_arm)
    return (*force.tolist(), *torque.tolist())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table-top-z", type=float, default=0.40, help="height of the table top (m, base frame)")
    args = p.parse_args()
    with MujocoSimulator(enable_visualization=False) as sim:
        half_h = 0.025
        ET.SubElement(sim.worldbody, "geom", name="table", type="box", size=f"0.15 0.3 {half_h}",
                      pos=f"0.55 0 {args.table_top_z - half_h}", rgba="0.6 0.5 0.4 1")
        robot = sim.add_robot()
        cls = type(robot)
        plain_state = cls.state.fget

        def state_with_push(self: Any) -> Any:
            s = plain_state(self)
            if self._model is None:
                return s
            table_id = mujoco.mj_name2id(self._model, mujoco.mjtObj.mjOBJ_GEOM, "table")
            pos_ee = np.asarray(s.O_T_EE, np.float64).reshape(4, 4, order="F")[:3, 3]
            return dataclasses.replace(s, O_F_ext_hat_K=contact_wrench(self._model, self._data, table_id, pos_ee))

        cls.state = property(state_with_push)
        with franky_sim.SimulationServer(sim) as server:
            print(f"table top at z = {args.table_top_z} m")
            print(f"Connect to the server using '{robot.hostname}' as the robot IP address", flush=True)
            try:
                server.run_forever()
            except KeyboardInterrupt:
                pass


if __name__ == "__main__":
    main()
