"""``p4cc shell s1``: the P4 community's p4runtime-shell attached to a switch of the
running fabric (docs/emulation.md, "p4runtime-shell").

Its own environment: p4runtime-shell 0.0.6 (the current release) pins
``protobuf<3.21``, ``p4runtime==1.4.1``, ``ipython==7.31.*`` and ``jedi==0.17.2``,
while p4cc needs ``p4runtime==1.6.0`` and protobuf >= 4.21 (it runs on protobuf 5+), so
they cannot share a venv; ``make setup`` makes ``.venv-p4rt-shell`` beside ``.venv``
(``make p4rt-shell`` alone) and this module runs the shell's Python from there.

Not disturbing the session: p4cc's controller is the primary client of every switch
with election id (0, 1) (p4cc.controlplane.p4runtime.P4RuntimeClient).  p4runtime-shell
defaults to election id (1, 0) — higher, so by default it would take primary, and p4cc's
threshold writes would fail and INT PacketIns go to the shell.  ``p4cc shell`` passes
``--election-id 0,0`` (lower: BMv2's P4Runtime server accepts 0 and makes the shell a
backup, which may Read tables, counters and registers but not Write).  ``--write`` passes
(1, 0) instead, on request: the shell is primary while it runs (the control loop's
writes fail meanwhile; when the shell leaves, the server hands primary back to p4cc).
No ``--config`` either: it would push the pipeline again, wiping p4cc's entries; the
shell reads the P4Info from the switch, which is p4cc's (paths.P4INFO, pushed by the
session).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from p4cc.errors import ToolMissingError
from p4cc.paths import REPO_ROOT

#: where ``make setup`` puts p4runtime-shell's venv
SHELL_VENV = REPO_ROOT / ".venv-p4rt-shell"
#: election ids (high, low): below p4cc's (0, 1) -> backup; above -> primary
BACKUP_ELECTION_ID = (0, 0)
PRIMARY_ELECTION_ID = (1, 0)
#: the non-interactive runner: set up, run the code in the shell's namespace, tear down
_RUNNER = """
import sys
import p4runtime_sh.shell as sh
from p4runtime_sh.context import P4RuntimeEntity, P4Type
addr, dev, hi, lo, code = sys.argv[1:6]
sh.setup(device_id=int(dev), grpc_addr=addr, election_id=(int(hi), int(lo)), verbose=False)
ns = dict(vars(sh))  # the names the interactive shell offers (p4runtime_sh.shell.main)
ns.update({t.p4info_name: sh.P4Objects(t) for t in P4Type})
for entity, p4type, cls in [
        (P4RuntimeEntity.table_entry, P4Type.table, sh.TableEntry),
        (P4RuntimeEntity.counter_entry, P4Type.counter, sh.CounterEntry),
        (P4RuntimeEntity.direct_counter_entry, P4Type.direct_counter, sh.DirectCounterEntry),
        (P4RuntimeEntity.meter_entry, P4Type.meter, sh.MeterEntry)]:
    ns[entity.name] = sh.P4RuntimeEntityBuilder(p4type, entity, cls)
ns["p4info"] = sh.context.p4info
try:
    exec(compile(code, "<p4cc shell -c>", "exec"), ns)
finally:
    sh.teardown()
"""


def shell_python() -> Path:
    """The Python of p4runtime-shell's venv (``P4CC_P4RT_SHELL_PYTHON`` overrides)."""
    env = os.environ.get("P4CC_P4RT_SHELL_PYTHON")
    py = Path(env) if env else SHELL_VENV / "bin" / "python"
    if not py.is_file():
        raise ToolMissingError(
            f"p4runtime-shell's venv is missing ({py}): run `make setup` (or `make "
            "p4rt-shell`); it needs its own venv because it pins protobuf<3.21 and "
            "p4runtime 1.4.1, which p4cc cannot use")
    return py


def shell_argv(grpc_addr: str, device_id: int, write: bool = False,
               code: str | None = None, python: Path | None = None) -> list[str]:
    """The command line of p4runtime-shell on one switch: interactive, or running
    ``code`` (Python, p4runtime-shell's names in scope: ``table_entry``,
    ``counter_entry``, ``P4Objects`` ...) and exiting."""
    py = str(python or shell_python())
    hi, lo = PRIMARY_ELECTION_ID if write else BACKUP_ELECTION_ID
    if code is not None:
        return [py, "-c", _RUNNER, grpc_addr, str(device_id), str(hi), str(lo), code]
    return [py, "-m", "p4runtime_sh", "--grpc-addr", grpc_addr, "--device-id",
            str(device_id), "--election-id", f"{hi},{lo}"]


def intro(switch: str, grpc_addr: str, device_id: int, write: bool) -> str:
    mode = ("PRIMARY: you may write; p4cc's control loop cannot until you leave"
            if write else "backup (read-only): p4cc's controller stays primary")
    return (f"p4runtime-shell on {switch} ({grpc_addr}, device {device_id}), {mode}.\n"
            "  tables   # the program's tables; then e.g.\n"
            "  for e in table_entry['P4ccEgress.ecn.ecn_config'].read(): print(e)\n"
            "  for c in counter_entry['P4ccEgress.ecn.port_marked'].read(): print(c)\n"
            "  exit with Ctrl-D")


def exec_shell(argv: Sequence[str]) -> None:
    """Replace this process with the shell (interactive use)."""
    if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
        raise ToolMissingError(f"{argv[0]} not found")
    os.execv(argv[0], list(argv))
