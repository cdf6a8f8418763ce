"""The simulation backend: the same topology descriptions, ECN settings, agents and flow
schedules as the emulated BMv2 fabric, as a numpy model vectorized over flows and ports.

See docs/simulator.md for the model, its assumptions and where it departs from a
packet-level fabric.
"""

from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.sim.fabric import Fabric

__all__ = ["Engine", "Fabric", "SimConfig"]
