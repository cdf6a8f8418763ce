"""Lab 1 check: the RED marking action in p4src/include/ecn.p4.

1. the action ``set_ecn`` is complete (no TODO; draws ``random``; compares against kmin,
   kmax and pmax; sets ``hdr.ipv4.ecn``);
2. the program compiles with p4c (``p4c --target bmv2 --arch v1model``) into build/ —
   skipped, and said so, where p4c is absent;
3. the RED curve on BMv2 (redcurve.py): the compiled program runs in one
   simple_switch_grpc, a standing queue sweeps depths 0..55 packets, and the marked
   fraction per depth must follow pmax (q - kmin) / (kmax - kmin) (0 below kmin, 1 from
   kmax) within a Bonferroni bound — the machinery of tests/test_dataplane_marking.py.
   Needs root and BMv2 (skipped, and said so, without them: `sudo make check`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import redcurve
from labcheck import Report, checked_src, parser


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
    args = parser(lab).parse_args()
    src = checked_src(args.src)
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
    out = lab / "build"
    if compile_p4(rep, src, out):
        if args.no_bmv2:
            rep.skip("RED curve on BMv2", "--no-bmv2 given")
        else:
            red_curve(rep, out)
    return rep.done()


def compile_p4(rep: Report, src: Path, out: Path) -> bool:
    """p4c into ``out``; True if the program compiled (a SKIP when p4c is absent)."""
    p4c = shutil.which("p4c")
    if p4c is None:
        rep.skip("compile with p4c", "p4c is not installed here (use the course VM, or run "
                 "`make p4` on a machine with p4c); the BMv2 step needs the compiled program")
        rep.skip("RED curve on BMv2", "no compiled program (p4c missing); without BMv2 see "
                 "README step 5 (the simulator uses the same rule)")
        return False
    out.mkdir(exist_ok=True)
    for old in ("p4cc.json", "p4cc.p4info.txtpb"):  # never measure a stale build
        (out / old).unlink(missing_ok=True)
    res = subprocess.run([p4c, "--target", "bmv2", "--arch", "v1model",
                          "--p4runtime-files", str(out / "p4cc.p4info.txtpb"),
                          "-o", str(out), "p4cc.p4"], cwd=src / "p4src",
                         capture_output=True, text=True)
    ok = rep.check(res.returncode == 0, "p4c compiles the program",
                   "p4c said:\n" + (res.stderr or res.stdout)[-1500:])
    if not ok:
        rep.skip("RED curve on BMv2", "the program does not compile (see above)")
    return ok


def red_curve(rep: Report, build: Path) -> None:
    """Drive a standing queue on BMv2 with the compiled program; judge the RED curve."""
    why = redcurve.skip_reason()
    if why:
        rep.skip("RED curve on BMv2", f"{why}; run `sudo make check` in the course VM, or "
                 "without BMv2 see README step 5 (the simulator uses the same rule)")
        return
    print(f"....  RED curve on BMv2: kmin {redcurve.KMIN}, kmax {redcurve.KMAX} packets, "
          f"pmax {redcurve.PMAX}; sweeping the queue (under a minute)", flush=True)
    try:
        res = redcurve.measure(build / "p4cc.p4info.txtpb", build / "p4cc.json")
    except Exception as exc:  # the student's program may break the pipeline in any way
        rep.fail("RED curve on BMv2", f"the switch run failed: {type(exc).__name__}: {exc}")
        return
    print("\n".join("      " + line for line in res.lines))
    rep.check(res.delivered > 0 and res.non_ect_marked == 0, "non-ECT packets are never marked",
              f"{res.delivered} packets delivered, {res.non_ect_marked} of the non-ECT ones "
              "with ECN bits set (none delivered: does your program still forward?)")
    rep.check(not res.failures, "RED curve on BMv2: marking follows pmax (q-kmin)/(kmax-kmin)",
              redcurve.hint(res.failures))


if __name__ == "__main__":
    sys.exit(main())
