"""``p4cc`` with the how-to's agent, topology and workload registered (docs/howto.md).

    python docs/examples/myp4cc.py run docs/examples/howto.yaml --backend sim

Registries are plain dictionaries filled when p4cc is imported; this script adds the
examples' entries, then hands its arguments to p4cc's own command line, so every
subcommand (``run``, ``report``, ``topo``, ``cli``, ...) sees them.  Your own project can
do the same with its modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chain_topo
import permutation_workload
import qstep_agent

from p4cc.cli import main

for module in (qstep_agent, chain_topo, permutation_workload):
    module.register()

if __name__ == "__main__":
    sys.exit(main())
