"""Experiment spec validation: every malformed field is named in the error."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from p4cc.cli import main
from p4cc.errors import ConfigError
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import load_spec, parse_spec, resolve

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))

BASE: dict[str, Any] = {
    "name": "t", "backend": "sim", "topology": "leafspine,spines=2,leaves=2,hosts=2",
    "scale": "testbed", "duration_s": 10, "seed": 1, "agents": ["secn1", "secn2"],
    "host_cc": "dcqcn",
    "workloads": [
        {"type": "websearch", "load": 0.5, "windows": [[0, 5]]},
        {"type": "datamining", "load": 0.5, "windows": [[5, "end"]]},
        {"type": "incast", "load": 0.3, "receiver": "h1", "senders": [2, 3]},
        {"type": "storage", "pattern": "oltp", "io_depth": 4},
        {"type": "bulk", "pairs": [["h1", "h2"]]},
    ],
    "link_failures": [{"at": 3, "until": 6, "fraction": 0.1}],
}


def _with(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    node: Any = doc
    keys = path.replace("]", "").replace("[", ".").split(".")
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = keys[-1]
    if value is _DELETE:
        del node[int(last) if last.isdigit() else last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return doc


_DELETE = object()

BAD = [
    ("name", "bad name!", r"^name: "),
    ("backend", "ns3", r"^backend: 'ns3'"),
    ("topology", "ring,hosts=3", r"^topology: unknown topology 'ring'"),
    ("topology", "star,hosts=1", r"^topology: topology parameter hosts"),
    ("scale", "huge", r"^scale: unknown scale"),
    ("duration_s", -1, r"^duration_s: -1 must be > 0"),
    ("duration_s", "ten", r"^duration_s: 'ten' is not a time"),
    ("seed", "x", r"^seeds\[0\]: 'x' must be an integer"),
    ("interval_s", 0, r"^interval_s: 0 must be in"),
    ("agents", [], r"^agents: must be a non-empty list"),
    ("agents", ["secn1", "Bad Agent"], r"^agents\[1\]: 'Bad Agent'"),
    ("agents", ["secn1", "nope"], r"^agents\[1\]: unknown agent 'nope'; choose one of"),
    ("host_cc", "cubic", r"^host_cc: 'cubic'"),
    ("workloads", [], r"^workloads: must be a non-empty list"),
    ("workloads[1].load", 1.5, r"^workloads\[1\]\.load: 1.5 is outside \(0, 1\]"),
    ("workloads[0].load", 0, r"^workloads\[0\]\.load: 0 is outside"),
    ("workloads[0].type", "memcached", r"^workloads\[0\]\.type: unknown workload 'memcached'"),
    ("workloads[0].lod", 0.5, r"^workloads\[0\]\.lod: unknown key"),
    ("workloads[0].senders", ["h1", "h99"], r"^workloads\[0\]\.senders\[1\]: 'h99' is not a host"),
    ("workloads[0].windows", [[4, 2]], r"^workloads\[0\]\.windows\[0\]: \[4, 2\]"),
    ("workloads[0].windows", [[0, 20]], r"^workloads\[0\]\.windows\[0\]: .*<= duration_s"),
    ("workloads[0].size_scale", -2, r"^workloads\[0\]\.size_scale: -2 must be > 0"),
    ("workloads[2].receiver", "h42", r"^workloads\[2\]\.receiver: 'h42' is not a host"),
    ("workloads[2].senders", [5, 2], r"^workloads\[2\]\.senders: min 5 > max 2"),
    ("workloads[3].pattern", "oltpx", r"^workloads\[3\]\.pattern: unknown storage pattern"),
    ("workloads[3].io_depth", 256, r"^workloads\[3\]\.io_depth: 256 must be an integer in "
                                   r"\[1, 128\]"),
    ("workloads[4].pairs", [["h1", "h1"]], r"^workloads\[4\]\.pairs\[0\]"),
    ("workloads[4].tag", "websearch", r"^workloads: tags .* are not unique"),
    ("link_failures[0].fraction", 2, r"^link_failures\[0\]\.fraction: 2 is outside"),
    ("link_failures[0].until", 1, r"^link_failures\[0\]\.until: 1 must be after"),
    ("link_failures[0].at", 11, r"^link_failures\[0\]\.at: 11 must be in"),
    ("outputs", ["flows", "pcap"], r"^outputs: "),
    ("extra", 1, r"^extra: unknown key"),
]


def test_base_spec_is_valid() -> None:
    spec = parse_spec(BASE)
    assert spec.agents == ("secn1", "secn2") and spec.seeds == (1,)
    assert spec.workloads[1].windows == ((5.0, 10.0),)
    assert spec.interval_s == pytest.approx(500e-6 * spec.scale_obj.time_factor)


@pytest.mark.parametrize(("path", "value", "pattern"), BAD, ids=[b[0] for b in BAD])
def test_malformed_field_is_named(path: str, value: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        parse_spec(_with(path, value))


def test_switch_links_needed_for_fractional_failures() -> None:
    doc = _with("topology", "star,hosts=4")
    doc["workloads"] = [{"type": "fbhdp", "load": 0.2}]
    with pytest.raises(ConfigError, match=r"^link_failures\[0\]\.fraction: .*no switch-to-"):
        parse_spec(doc)


def test_cdf_file_is_checked_before_running(tmp_path: Path) -> None:
    (tmp_path / "bad.cdf").write_text("0 0\n100 80\n50 90\n200 100\n")
    doc = copy.deepcopy(BASE)
    doc["workloads"] = [{"type": "cdf", "cdf": "bad.cdf", "load": 0.3}]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"^workloads\[0\]\.cdf: .*not monotone"):
        load_spec(tmp_path / "s.yaml")
    (tmp_path / "bad.cdf").write_text("0 0\n100 80\n200 100\n")
    spec = load_spec(tmp_path / "s.yaml")  # relative to the spec file
    assert spec.workloads[0].p["cdf"] == str(tmp_path / "bad.cdf")


def test_paper_time_is_scaled_and_recorded() -> None:
    doc = _with("duration_s", {"paper_time": 0.02})
    doc["workloads"][0]["windows"] = [[0, {"paper_time": 0.01}]]
    spec = parse_spec(doc)
    tf = spec.scale_obj.time_factor
    assert spec.duration_s == pytest.approx(0.02 * tf)
    assert spec.workloads[0].windows == ((0.0, pytest.approx(0.01 * tf)),)
    fields = {f for f, _, _ in spec.paper_values}
    assert {"duration_s", "workloads[0].windows[0][1]", "interval_s"} <= fields
    r = resolve(spec)
    assert r["scale"]["time_factor"] == pytest.approx(tf)
    assert r["topology"]["hosts"] == 4
    assert yaml.safe_load(yaml.safe_dump(r)) == r  # plain YAML types only


def test_units_in_time_strings() -> None:
    spec = parse_spec(_with("interval_s", "250ms"))
    assert spec.interval_s == pytest.approx(0.25)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_validate_and_describe_themselves(path: Path) -> None:
    text = path.read_text()
    assert text.startswith("# Reproduces")
    spec = load_spec(path)
    assert spec.description
    if spec.scale == "testbed":  # paper-scale schedules are large; built by the sim tests
        schedule, _ = build_schedule(spec, spec.seeds[0])
        assert len(schedule) > 0


def test_cli_bad_spec_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(_with("workloads[1].load", 1.5)))
    assert main(["run", str(tmp_path / "bad.yaml")]) == 2
    assert "workloads[1].load: 1.5 is outside (0, 1]" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert not (tmp_path / "runs").exists()


def test_cli_process_exit_code_2(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    res = subprocess.run([sys.executable, "-m", "p4cc", "run", str(tmp_path / "bad.yaml")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "not valid YAML" in res.stderr


def test_check_asks_the_backend_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`p4cc run --check` also refuses what the chosen backend cannot honour."""
    doc = copy.deepcopy(BASE)
    doc["backend"] = "bmv2"
    # storage ('after' chains) runs on bmv2 since issue 10; a fabric beyond its size
    # limit is still refused
    doc["topology"] = "star,hosts=12"
    doc["workloads"] = [{"type": "storage", "pattern": "oltp", "io_depth": 4}]
    doc.pop("link_failures")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["run", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert "bmv2 backend" in err and "--backend sim" in err
    assert main(["run", str(path), "--check", "--backend", "sim"]) == 0


def test_fixed_rate_host_cc() -> None:
    """host_cc ``fixed:<rate>`` parses on both backends; a bad rate names the field."""
    spec = parse_spec(_with("host_cc", "fixed:3M"))
    assert spec.host_cc == "fixed:3M"
    with pytest.raises(ConfigError, match=r"host_cc: .*bad rate"):
        parse_spec(_with("host_cc", "fixed:fast"))
