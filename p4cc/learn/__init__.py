"""Training of the learning switch agents ACC and PET on the simulator (torch, optional).

``acc`` and ``pet`` hold one algorithm each, top to bottom; ``env`` the training
environment, ``nets`` the torch networks, ``replay`` ACC's memories, ``runlog`` curves
and checkpoints, ``cli`` ``p4cc train``.  The deployed agents run the exported weights
with numpy (p4cc.controlplane.agents.learned).  RL-CC (ADPG, a per-flow rate policy):
``rlcc_adpg`` top to bottom, ``rlcc_nets``, ``rlcc_export``, ``rlcc_eval``,
``rlcc_distill``, ``rlcc_cli``; deployed through p4cc.hostcc.rlcc_policies.  Design:
docs/learning.md.
"""
