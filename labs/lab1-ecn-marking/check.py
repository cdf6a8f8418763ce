"""Lab 1 check: the RED marking action in p4src/include/ecn.p4.

1. the action ``set_ecn`` is complete (no TODO; draws ``random``; compares against kmin,
   kmax and pmax; sets ``hdr.ipv4.ecn``);
2. the program compiles with p4c (``p4c --target bmv2 --arch v1model``) into build/ —
   skipped, and said so, where p4c is absent;
3. the RED curve on BMv2 (a standing queue, marked fraction per queue depth against
   pmax (q - kmin) / (kmax - kmin)) — not automated yet: measure it by hand (README
   step 5) with `p4cc cli` and `p4cc top`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from labcheck import Report, source_dir  # noqa: E402


def action_body(text: str) -> str:
    m = re.search(r"action\s+set_ecn\s*\([^)]*\)\s*\{", text)
    if not m:
        return ""
    depth, i = 1, m.end()
    while depth and i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def code_only(body: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)


def main() -> int:
    lab = Path(__file__).resolve().parent
    src = source_dir(lab)
    rep = Report("lab 1 (ECN marking in P4)")
    ecn = src / "p4src" / "include" / "ecn.p4"
    if not rep.check(ecn.is_file(), "p4src/include/ecn.p4 exists",
                     "restore the starter's p4src/ (git checkout labs/)"):
        return rep.done()
    body = action_body(ecn.read_text())
    code = code_only(body)
    rep.check(bool(body) and "TODO" not in body, "set_ecn has no TODO left",
              "write the marking logic in the action set_ecn and delete the TODO comment")
    rep.check("random(" in code, "set_ecn draws a random number",
              "use random(u, (bit<48>)0, RED_U_MAX) for the probabilistic part")
    rep.check(all(re.search(rf"\b{k}\b", code) for k in ("kmin", "kmax", "pmax", "enq_qdepth")),
              "set_ecn uses kmin, kmax, pmax and the queue depth",
              "compare standard_metadata.enq_qdepth with kmin and kmax; scale by pmax")
    rep.check(re.search(r"hdr\.ipv4\.ecn\s*=", code) is not None and "ECN_CE" in code,
              "set_ecn sets hdr.ipv4.ecn to ECN_CE when marking",
              "assign hdr.ipv4.ecn = ECN_CE (keep the old value when not marking)")
    p4c = shutil.which("p4c")
    if p4c is None:
        rep.skip("compile with p4c", "p4c is not installed here (use the course VM, or run "
                 "`make p4` on a machine with p4c); the BMv2 step needs the compiled program")
    else:
        out = lab / "build"
        out.mkdir(exist_ok=True)
        res = subprocess.run([p4c, "--target", "bmv2", "--arch", "v1model",
                              "--p4runtime-files", str(out / "p4cc.p4info.txtpb"),
                              "-o", str(out), "p4cc.p4"], cwd=src / "p4src",
                             capture_output=True, text=True)
        rep.check(res.returncode == 0, "p4c compiles the program",
                  "p4c said:\n" + (res.stderr or res.stdout)[-1500:])
    rep.skip("RED curve on BMv2", "not automated yet: measure it by hand (README step 5)")
    return rep.done()


if __name__ == "__main__":
    sys.exit(main())
