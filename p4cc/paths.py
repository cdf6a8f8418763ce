"""Where p4cc's files are: one place for every path the package needs.

The compiled P4 programs ship inside the package (``p4cc/data/p4``, package data), so an
installed p4cc finds its pipeline without a source checkout; ``make p4`` writes them
there from ``p4src/``.  The source checkout (``REPO_ROOT``) is only needed to compile
P4 or to record the git commit of a run.
"""

from __future__ import annotations

from pathlib import Path

#: The installed (or editable) ``p4cc`` package directory.
PACKAGE_DIR = Path(__file__).resolve().parent
#: Package data: compiled P4 artifacts, the default experiment's spec.
DATA_DIR = PACKAGE_DIR / "data"
#: ``<name>.json`` (BMv2) and ``<name>.p4info.txtpb`` (P4Runtime) per P4 program.
P4_BUILD_DIR = DATA_DIR / "p4"
#: p4cc's own pipeline.
P4_JSON = P4_BUILD_DIR / "p4cc.json"
P4INFO = P4_BUILD_DIR / "p4cc.p4info.txtpb"
#: Package data of the traffic generators (flow-size CDFs) and of the host CC
#: (reference RL-CC policies).
TRAFFIC_DATA_DIR = PACKAGE_DIR / "traffic" / "data"
HOSTCC_DATA_DIR = PACKAGE_DIR / "hostcc" / "data"
#: The source checkout holding this package (meaningful only in a checkout: see
#: ``in_checkout``).
REPO_ROOT = PACKAGE_DIR.parent
#: P4 sources (present in a checkout, not in an installed wheel).
P4SRC_DIR = REPO_ROOT / "p4src"


def in_checkout() -> bool:
    """True when p4cc runs from a source checkout (git metadata and p4src/ beside it)."""
    return (REPO_ROOT / ".git").exists() and P4SRC_DIR.is_dir()


def p4_artifacts(program: str) -> tuple[Path, Path]:
    """(P4Info, BMv2 JSON) of a compiled program in ``P4_BUILD_DIR``."""
    return P4_BUILD_DIR / f"{program}.p4info.txtpb", P4_BUILD_DIR / f"{program}.json"
