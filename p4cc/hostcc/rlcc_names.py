"""RL-CC policies by name: what ``rlcc:<name>`` loads (p4cc.hostcc.cc builds the controller).

The shortcuts for the shipped policy files (:data:`SHIPPED`), what plain ``rlcc`` means
(:data:`DEFAULT_POLICY`), the names of the hand-made PI baseline, the deprecated
shortcuts (warned about once per name), and the ``-int8`` suffix that quantises a
policy; :func:`policy_name` resolves a name, :func:`policy_by_name` loads its policy.
"""

from __future__ import annotations

import logging
from pathlib import Path

from p4cc.hostcc import rlcc
from p4cc.hostcc.rlcc_policies import Policy, ReferencePolicy, data_dir, load_policy

#: the logger of p4cc.hostcc.cc, where these names were resolved before they moved here
#: (the deprecation warning keeps its logger name)
log = logging.getLogger("p4cc.hostcc.cc")

#: ``rlcc:<name>`` shortcuts for the shipped policy files.  ``pi-lstm``, ``pi-mlp``,
#: ``pi-trees``, ``pi-catboost`` are the hand-made PI baseline written by code into each
#: file format (rlcc_reference.py: wired weights, a fitted squash or staircase; the
#: ``-ref`` files): format examples, not learned.  ``adpg-*`` are trained with ADPG
#: (p4cc train rlcc; sidecar .json beside each file: command, seed, commit, training and
#: evaluation).
SHIPPED = {"pi-lstm": "rlcc-lstm-ref.npz", "pi-mlp": "rlcc-mlp-ref.npz",
           "pi-trees": "rlcc-trees-ref.json", "pi-catboost": "rlcc-catboost-ref.json",
           "adpg-mlp": "rlcc-adpg-mlp.npz", "adpg-lstm": "rlcc-adpg-lstm.npz",
           "adpg-trees": "rlcc-distilled-trees.json",
           # the MLP trained on from adpg-mlp (docs/learning.md "RL-CC"): DEFAULT_POLICY
           "adpg-mlp-long": "rlcc-adpg-mlp-long.npz",
           "adpg-mlp-int": "rlcc-adpg-mlp-int.npz"}  # INT variant: δ from the queue depth
#: What plain ``rlcc`` (and ``rlcc:``) means: the trained MLP that meets issue 11's bar
#: (utilisation >= 0.9, Jain >= 0.95, no loss; docs/results.md "RL-CC").
DEFAULT_POLICY = "adpg-mlp-long"
#: Names of the hand-made PI baseline (ReferencePolicy; ``reference`` is its old name).
PI_NAMES = ("pi", "reference")
#: Deprecated shortcuts (they read as learned policies): old name -> new name.  They still
#: resolve, with a warning logged once per name; they go in the next release.
DEPRECATED_NAMES = {"lstm": "pi-lstm", "mlp": "pi-mlp", "trees": "pi-trees",
                    "catboost": "pi-catboost"}
_WARNED: set[str] = set()  # deprecated names warned about in this process
#: ``rlcc:<name>-int8``: int8-quantised inference of the policy <name>.
INT8_SUFFIX = "-int8"


def policy_name(arg: str) -> str | None:
    """The current shortcut ``arg`` of ``rlcc:<arg>`` stands for: :data:`DEFAULT_POLICY`
    for empty, ``pi`` for :data:`PI_NAMES`, the new name of a deprecated shortcut (warned
    once), with a ``-int8`` suffix kept; None for a file path."""
    if arg.endswith(INT8_SUFFIX) and arg != INT8_SUFFIX:
        base = policy_name(arg[: -len(INT8_SUFFIX)])
        return None if base is None else base + INT8_SUFFIX
    if arg in PI_NAMES:
        return "pi"
    if arg in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[arg]
        if arg not in _WARNED:
            _WARNED.add(arg)
            log.warning("rlcc:%s is deprecated (it is the hand-made PI baseline in a policy "
                        "file, not a learned policy): use rlcc:%s", arg, new)
        return new
    arg = arg or DEFAULT_POLICY
    return arg if arg in SHIPPED else None


def policy_by_name(arg: str, params: rlcc.RlccParams) -> Policy:
    """The policy of ``rlcc:<arg>``: empty (:data:`DEFAULT_POLICY`, the trained MLP),
    ``pi`` (or the old name ``reference``: the hand-made PI baseline), a shipped name
    (:data:`SHIPPED`; a deprecated one of :data:`DEPRECATED_NAMES` warns once), or a
    file; a ``-int8`` suffix quantises the policy it names (``adpg-mlp-int8``,
    p4cc.hostcc.rlcc_int8)."""
    if arg.endswith(INT8_SUFFIX) and arg != INT8_SUFFIX:
        from p4cc.hostcc.rlcc_int8 import quantize

        return quantize(policy_by_name(arg[: -len(INT8_SUFFIX)], params), target=params.target)
    name = policy_name(arg)
    if name == "pi":
        return ReferencePolicy()
    if name is not None:
        return load_policy(data_dir() / SHIPPED[name])
    return load_policy(Path(arg))
