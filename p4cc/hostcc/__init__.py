"""Userspace host congestion control: transport, pacing, and the CC cores.

The congestion-control cores (:mod:`p4cc.hostcc.dcqcn`, :mod:`p4cc.hostcc.rlcc`) are
pure, vectorized functions over N flows, shared by the host sender (through the N=1
wrappers in :mod:`p4cc.hostcc.cc`) and the simulator.  See ``docs/hostcc-cc.md``.
"""
