"""The docs' commands, executed so they cannot rot (convention: docs/howto.md,
"Documenting a command").

Collected from the fenced blocks of README.md, docs/*.md and labs/*/README.md: every line
of a block tagged sh/bash/shell/console (console: the ``$ `` lines), and the lines of an
untagged block that start with a command (p4cc, sudo, make, python, .venv/bin/...).  The
HTML comment ``<!-- doc-test: MODE [reason] -->`` on the line before a block sets what
happens to its commands; blocks without one are ``parse``d, except those listed in
``UNTAGGED`` (pages this test's author does not own).

* ``run``: each line runs in a scratch directory with the repository's entries linked in
  (except ``runs/``), the venv first on PATH; exit 0 required.  Default suite.
* ``tools``: as ``run``, where BMv2 is installed (marker ``bmv2``); read-only commands.
* ``fabric``: as ``run``, starts a fabric: root, BMv2 and Mininet (markers ``bmv2``,
  ``root``, ``mininet``, ``slow``), one fabric at a time (``/tmp/p4cc-fabric.lock``).
* ``parse``: ``p4cc ...`` goes through p4cc's own argument parser, and a spec it runs must
  load; ``make T VAR=...``: target and variables exist in the Makefile; ``python X ...``
  runs ``python X ... --help``.  Anything else must be tagged.
* ``skip REASON``: not run, the reason is required.
* ``file PATH`` before a ``python`` block: the block is verbatim in PATH.
"""

from __future__ import annotations

import contextlib
import fcntl
import html
import importlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
DOC_FILES = sorted({REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("labs/README.md"),
                    *REPO.glob("labs/*/README.md")})
SHELL_LANGS = {"sh", "bash", "shell", "console"}
MODES = {"run", "tools", "fabric", "parse", "skip", "file"}
MARKER_RE = re.compile(r"^\s*<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->\s*$")
FENCE_RE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
COMMAND_WORDS = {"p4cc", "sudo", "make", "python", "python3"}
ENV_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: commands in pages whose owners did not tag them: (page, command prefix) -> mode
UNTAGGED: dict[tuple[str, str], str] = {
    ("docs/dataplane.md", "python -m p4cc.controlplane.p4build ["):
        "skip synopsis: [...] marks optional arguments; the command is `make p4`",
    ("docs/hostcc.md", "p4cc host recv ["): "skip synopsis of `p4cc host recv` options",
    ("docs/hostcc.md", "p4cc host send --dst IP"): "skip synopsis of `p4cc host send` options",
    ("docs/sweeps.md", "ray "): "skip starts or stops a node of a Ray cluster (several machines)",
}
RUN_TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    mode: str
    arg: str  # the reason (skip) or the file (file)
    lines: tuple[tuple[int, str], ...]  # (line number, text) of the block's body

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


@dataclass(frozen=True)
class Command:
    block: Block
    line: int
    text: str
    mode: str
    reason: str

    @property
    def where(self) -> str:
        return f"{self.block.path.relative_to(REPO)}:{self.line}"


def read_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file with its doc-test marker (if any)."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i
        body: list[tuple[int, str]] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append((i + 1, lines[i]))
            i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER_RE.match(prev)
        mode, arg = (marker.group(1), marker.group(2)) if marker else ("", "")
        blocks.append(Block(path, start + 1, lang, mode, arg, tuple(body)))
        i += 1
    return blocks


def _is_command(text: str) -> bool:
    words = text.split()
    while words and ENV_ASSIGN_RE.match(words[0]):
        words = words[1:]
    return bool(words) and (words[0] in COMMAND_WORDS or words[0].startswith(".venv/bin/"))


def block_commands(block: Block) -> list[Command]:
    """The commands of a block (continuation lines joined), with their mode."""
    if block.lang in SHELL_LANGS:
        raw = [(n, t) for n, t in block.lines]
        if block.lang == "console":
            raw = [(n, t.strip()[2:]) for n, t in raw if t.strip().startswith("$ ")]
    elif block.lang == "":  # commands among other text: filtered after joining lines
        raw = list(block.lines)
    else:
        return []
    out: list[Command] = []
    pending: tuple[int, str] | None = None
    for n, t in raw:
        t = t.strip()
        if pending is not None:
            n, t = pending[0], pending[1] + " " + t
            pending = None
        if t.endswith("\\"):
            pending = (n, t[:-1].rstrip())
            continue
        if not t or t.startswith("#") or (block.lang == "" and not _is_command(t)):
            continue
        rel = str(block.path.relative_to(REPO))
        mode, reason = block.mode or "parse", block.arg
        for (page, prefix), tag in UNTAGGED.items():
            if not block.mode and rel == page and t.startswith(prefix):
                mode, _, reason = tag.partition(" ")
        out.append(Command(block, n, t, mode, reason))
    return out


def all_blocks() -> list[Block]:
    return [b for p in DOC_FILES for b in read_blocks(p)]


def all_commands() -> list[Command]:
    return [c for b in all_blocks() for c in block_commands(b)]


def _blocks_in(mode: str) -> list[Block]:
    return [b for b in all_blocks() if b.mode == mode and block_commands(b)]


# ------------------------------------------------------------------------ the convention
def test_collection_finds_the_docs_commands() -> None:
    """The collector sees the commands this test exists for (so it cannot pass empty)."""
    cmds = all_commands()
    texts = {(c.where.split(":")[0], c.text) for c in cmds}
    assert ("README.md", "make setup") in {(w, t.split("#")[0].strip()) for w, t in texts}
    for page in ("docs/overview.md", "docs/howto.md", "docs/troubleshooting.md"):
        assert any(c.where.startswith(page) and c.mode == "run" for c in cmds), page
    assert any(c.mode == "parse" and c.text.startswith("p4cc run ") for c in cmds)


def test_every_marker_is_known_and_every_skip_says_why() -> None:
    problems = []
    for b in all_blocks():
        if not b.mode:
            continue
        if b.mode not in MODES:
            problems.append(f"{b.where}: unknown doc-test mode {b.mode!r}; one of {MODES}")
        if b.mode == "skip" and not b.arg:
            problems.append(f"{b.where}: `doc-test: skip` needs a reason")
        if b.mode == "file" and not (REPO / b.arg).is_file():
            problems.append(f"{b.where}: `doc-test: file {b.arg}` names no file")
    for c in all_commands():
        if c.mode == "skip" and not c.reason:
            problems.append(f"{c.where}: skipped without a reason")
    assert not problems, "\n".join(problems)


def test_untagged_entries_still_match_a_command() -> None:
    """An UNTAGGED entry whose command was removed from its page must go too."""
    cmds = all_commands()
    for (page, prefix) in UNTAGGED:
        assert any(c.where.startswith(page + ":") and c.text.startswith(prefix)
                   for c in cmds), f"UNTAGGED ({page}, {prefix!r}) matches nothing"


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.mode == "file"],
                         ids=lambda b: b.where)
def test_python_block_is_verbatim_in_its_file(block: Block) -> None:
    text = "\n".join(t for _, t in block.lines)
    assert text.strip() in (REPO / block.arg).read_text(), (
        f"{block.where}: the block is no longer in {block.arg}; copy the current code")


# ------------------------------------------------------------------------------ parse
def _argv(text: str) -> list[str]:
    argv = shlex.split(text, comments=True)
    while argv and ENV_ASSIGN_RE.match(argv[0]):
        argv = argv[1:]
    if argv and argv[0] == "sudo":
        argv = argv[1:]
        while argv and argv[0].startswith("-"):
            argv = argv[1:]
    return argv


def _kind(argv: list[str]) -> tuple[str, list[str]]:
    head = argv[0] if argv else ""
    if Path(head).name == "p4cc":
        return "p4cc", argv[1:]
    if Path(head).name in ("python", "python3") and len(argv) > 1:
        if argv[1] == "-m" and len(argv) > 2:
            return ("p4cc", argv[3:]) if argv[2] == "p4cc" else ("python", argv[1:])
        return "python", argv[1:]
    if head == "make":
        return "make", argv[1:]
    return "other", argv


def _parse_p4cc(args: list[str]) -> None:
    from p4cc.cli import build_parser

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            ns = build_parser().parse_args(args)
    except SystemExit as exc:
        assert exc.code in (0, None), err.getvalue().strip()
        return
    spec = getattr(ns, "spec", None)
    if ns.command in ("run", "sweep") and isinstance(spec, str):
        path = REPO / spec
        if path.is_file():
            from p4cc.experiment.spec import load_spec

            load_spec(path)
        else:
            assert re.search(r"[A-Z<]", spec), f"{spec} does not exist"


def _makefile() -> str:
    return (REPO / "Makefile").read_text()


def _check_make(args: list[str]) -> None:
    text = _makefile()
    for a in args:
        if "=" in a:
            var = a.split("=", 1)[0]
            assert re.search(rf"^{re.escape(var)}\s*[?:]?=", text, re.M), (
                f"the Makefile has no variable {var}")
        elif not a.startswith("-"):
            assert re.search(rf"^{re.escape(a)}\s*:", text, re.M), (
                f"the Makefile has no target {a!r}")


def _parse_commands() -> list[Command]:
    return [c for c in all_commands() if c.mode == "parse"]


@pytest.mark.parametrize("cmd", _parse_commands(), ids=lambda c: c.where)
def test_parse_command(cmd: Command, tmp_path: Path) -> None:
    kind, args = _kind(_argv(cmd.text))
    if kind == "p4cc":
        _parse_p4cc(args)
    elif kind == "make":
        _check_make(args)
    elif kind == "python":
        res = subprocess.run([sys.executable, *args, "--help"], cwd=_scratch(tmp_path),
                             capture_output=True, text=True, timeout=120, env=_env())
        assert res.returncode == 0, f"{cmd.where}: {cmd.text} --help:\n{res.stderr[-2000:]}"
    else:
        pytest.fail(f"{cmd.where}: `{cmd.text}` cannot be checked by parsing; tag its block "
                    "`<!-- doc-test: run|tools|fabric|skip REASON -->` (docs/howto.md)")


# -------------------------------------------------------------------------------- run
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def _scratch(tmp: Path) -> Path:
    """A working directory that looks like the repository, except that ``runs/`` is its
    own: every top-level entry of the checkout is linked in."""
    work = tmp / "work"
    if not work.exists():
        work.mkdir()
        for entry in REPO.iterdir():
            if entry.name in ("runs", ".git") or entry.name.endswith("_cache"):
                continue
            (work / entry.name).symlink_to(entry)
    return work


def run_block(block: Block, tmp: Path) -> None:
    work = _scratch(tmp)
    for cmd in block_commands(block):
        text = cmd.text[len("sudo "):] if cmd.text.startswith("sudo ") else cmd.text
        res = subprocess.run(["bash", "-c", text], cwd=work, capture_output=True, text=True,
                             timeout=RUN_TIMEOUT_S, env=_env())
        assert res.returncode == 0, (f"{cmd.where}: `{cmd.text}` exited {res.returncode}\n"
                                     f"{res.stdout[-2000:]}\n{res.stderr[-3000:]}")


@pytest.mark.parametrize("block", _blocks_in("run"), ids=lambda b: b.where)
def test_run_block(block: Block, tmp_path: Path) -> None:
    run_block(block, tmp_path)


@pytest.mark.bmv2
@pytest.mark.parametrize("block", _blocks_in("tools"), ids=lambda b: b.where)
def test_tools_block(block: Block, tmp_path: Path) -> None:
    for tool in ("simple_switch_grpc", "simple_switch_CLI"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    run_block(block, tmp_path)


@contextlib.contextmanager
def _fabric_lock() -> Iterator[None]:
    """One fabric at a time on a shared machine."""
    with open("/tmp/p4cc-fabric.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.mininet
@pytest.mark.slow
@pytest.mark.parametrize("block", _blocks_in("fabric"), ids=lambda b: b.where)
def test_fabric_block(block: Block, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    for tool in ("simple_switch_grpc", "mnexec"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    with _fabric_lock():
        run_block(block, tmp_path)


# ------------------------------------------------------------------- the how-to examples
def _example(name: str) -> ModuleType:
    """Import docs/examples/<name>.py without registering anything."""
    path = REPO / "docs" / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"p4cc_docs_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


def _record(port: int, qlen: float) -> Any:
    from p4cc.controlplane.records import PortTelemetry

    return PortTelemetry("s1", port, 1.0, 0.1, qlen, qlen, 1e6, 0.0, 100, 0, 0, None, 1, 1, 0)


def test_example_agent_halves_and_restores_kmax(monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.controlplane.agents import static
    from p4cc.controlplane.agents.base import Agent
    from p4cc.scale import get_scale

    mod = _example("qstep_agent")
    scale = get_scale("testbed")
    monkeypatch.setitem(static.AGENTS, "qstep", "")  # removed again after the test
    mod.register()
    agent = static.make_agent("qstep", scale)
    assert isinstance(agent, Agent) and agent.name == "qstep"
    start = agent.start
    agent.reset({1: None, 2: None})
    first = agent.act({1: _record(1, 0.0), 2: _record(2, 0.0)})
    assert first == {1: start, 2: start}  # takes over with SECN1
    assert agent.act({1: _record(1, 0.0)}) == {}  # nothing changes, nothing returned
    high = agent.act({1: _record(1, 3.0 * start.kmax_bytes)})
    assert high[1].kmax_bytes == start.kmax_bytes // 2
    high[1].validate(scale.buffer_bytes)
    low = agent.act({1: _record(1, 0.0)})
    assert low[1].kmax_bytes == start.kmax_bytes
    for _ in range(20):  # never below Kmin
        out = agent.act({2: _record(2, 1e9)})
    assert agent.current[2].kmax_bytes >= agent.current[2].kmin_bytes
    assert out == {}


def test_example_topology_is_a_valid_description(monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.controlplane.routes import compute_routes
    from p4cc.errors import ConfigError
    from p4cc.topo import spec as topo_spec

    mod = _example("chain_topo")
    monkeypatch.setitem(topo_spec.TOPOLOGIES, "chain", topo_spec.star)  # removed after
    mod.register()
    topo = topo_spec.parse_topo("chain,switches=3,hosts=2")
    assert [s.name for s in topo.switches] == ["s1", "s2", "s3"]
    assert [h.switch for h in topo.hosts] == ["s1", "s1", "s3", "s3"]
    assert topo.host("h3").ip == "10.0.2.1"
    assert topo.peer("s2", 1) == ("s1", 3) and topo.peer("s2", 2) == ("s3", 3)
    routes = compute_routes(topo)
    assert routes["s2"].lookup("10.0.2.1").nhop.port == 2  # s2 forwards h3's traffic to s3
    assert routes["s1"].lookup("10.0.1.2").nhop.port == 2  # h2 hangs off s1's port 2
    with pytest.raises(ConfigError, match="switches=1"):
        topo_spec.parse_topo("chain,switches=1")
    with pytest.raises(ConfigError, match="no parameter 'spines'"):
        topo_spec.parse_topo("chain,spines=2")


def test_example_workload_parses_and_generates(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from p4cc.errors import ConfigError
    from p4cc.experiment.schedule import build_schedule
    from p4cc.experiment.spec import parse_spec
    from p4cc.traffic import kinds

    mod = _example("permutation_workload")
    monkeypatch.setitem(kinds.KINDS, "permutation", kinds.KINDS["bulk"])  # removed after
    mod.register()
    doc = {"name": "perm", "topology": "star,hosts=4", "duration_s": 1.0,
           "workloads": [{"type": "permutation", "size_bytes": 1000, "period_s": 0.25,
                          "shift": 1}]}
    spec = parse_spec(doc)
    schedule, _ = build_schedule(spec, 1)
    assert len(schedule) == 4 * 4  # 4 hosts x 4 rounds
    first = schedule[schedule["start_s"] == 0.0]
    assert dict(zip(first["src"], first["dst"], strict=True)) == {
        "h1": "h2", "h2": "h3", "h3": "h4", "h4": "h1"}
    assert np.all(schedule["size_bytes"] == 1000)
    bad = {**doc, "workloads": [{"type": "permutation", "period_s": 0}]}
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.period_s: must be > 0"):
        parse_spec(bad)
    bad = {**doc, "workloads": [{"type": "permutation", "bogus": 1}]}
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.bogus"):
        parse_spec(bad)


# ------------------------------------------------------------------------- the picture
FIGURE = REPO / "docs" / "figures" / "overview.svg"
#: P4 objects the picture names: each must be in the compiled program's P4Info
FIGURE_P4_NAMES = ("ipv4_lpm", "ecmp_nhop", "int_watchlist", "port_offered", "ecn_config",
                   "set_ecn", "port_tx", "port_marked", "q_enq_sum", "q_enq_cnt",
                   "q_enq_max", "q_sojourn_sum", "incast_bits", "flow_bits",
                   "elephant_bits", "flow_bytes_r0", "int_sink")
#: Python names the picture shows, with where they live
FIGURE_PY_NAMES = (
    ("p4cc.controlplane.telemetry", "TelemetryPoller"),
    ("p4cc.controlplane.records", "PortTelemetry"),
    ("p4cc.controlplane.loop", "ControlLoop"),
    ("p4cc.controlplane.switch", "SwitchControl"),
    ("p4cc.controlplane.ecn", "EcnConfig"),
    ("p4cc.controlplane.agents.static", "register_agent"),
    ("p4cc.controlplane.agents.static", "make_agent"),
    ("p4cc.experiment.store", "RunWriter"),
    ("p4cc.experiment.session", "FabricSession"),
    ("p4cc.hostcc.cc", "DcqcnController"),
    ("p4cc.hostcc.dcqcn", "DcqcnFlows"),
    ("p4cc.sim.cc", "DcqcnHook"),
    ("p4cc.sim.engine", "Engine"),
)


def _svg_text(path: Path) -> list[str]:
    raw = path.read_text()
    return [html.unescape(t) for t in re.findall(r"<(?:text|tspan)[^>]*>([^<]+)", raw)]


def test_figure_names_exist_in_the_code() -> None:
    text = "\n".join(_svg_text(FIGURE))
    p4info = (REPO / "p4cc" / "data" / "p4" / "p4cc.p4info.txtpb").read_text()
    for name in FIGURE_P4_NAMES:
        assert name in text, f"the picture no longer shows {name}"
        assert re.search(rf'name: "[\w.]*\b{name}"', p4info), f"{name} is not in the P4Info"
    for module, attr in FIGURE_PY_NAMES:
        assert attr in text, f"the picture no longer shows {attr}"
        assert hasattr(importlib.import_module(module), attr), f"{module}.{attr} is gone"
    py_files = {str(p.relative_to(REPO)) for p in (REPO / "p4cc").rglob("*.py")}
    p4_files = {str(p.relative_to(REPO)) for p in (REPO / "p4src").rglob("*.p4")}
    for token in sorted(set(re.findall(r"[\w/]+\.py\b", text))):
        assert any(f == token or f.endswith("/" + token) for f in py_files), (
            f"the picture names {token}, which is not a module of p4cc")
    for token in sorted(set(re.findall(r"[\w/]+\.p4\b", text))):
        assert any(f == token or f.endswith("/" + token) for f in p4_files), (
            f"the picture names {token}, which is not in p4src/")


def test_figure_matches_its_script(tmp_path: Path) -> None:
    """The committed SVG says what docs/figures/overview.py draws (regenerate it after
    editing the script: `python docs/figures/overview.py`)."""
    out = tmp_path / "overview.svg"
    res = subprocess.run([sys.executable, str(REPO / "docs" / "figures" / "overview.py"),
                          "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert _svg_text(out) == _svg_text(FIGURE)


def test_docs_link_the_new_pages() -> None:
    readme = (REPO / "README.md").read_text()
    for page in ("docs/overview.md", "docs/howto.md", "docs/troubleshooting.md"):
        assert page in readme, f"README.md does not link {page}"
    overview = (REPO / "docs" / "overview.md").read_text()
    assert "figures/overview.svg" in overview
