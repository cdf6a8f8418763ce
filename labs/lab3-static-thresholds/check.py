"""Lab 3 check: results.yaml holds your measurements of SECN0/1/2 on incast and WebSearch,
your conclusions agree with your own numbers, and the trade-off is explained (ACC §2.2)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from labcheck import Report, source_dir

SETTINGS = ("secn0", "secn1", "secn2")
WORKLOADS = ("incast", "websearch")
METRICS = ("fct_avg_ms", "fct_p99_ms", "queue_avg_kb")
KEYWORDS = ("queue", "throughput")


def number(v: object) -> float | None:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if x >= 0 else None


def main() -> int:
    src = source_dir(Path(__file__).resolve().parent)
    rep = Report("lab 3 (static thresholds)")
    try:
        doc = yaml.safe_load((src / "results.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        rep.fail("read results.yaml", f"it must be valid YAML ({exc})")
        return rep.done()
    measured = doc.get("measured") or {}
    complete = True
    for w in WORKLOADS:
        for s in SETTINGS:
            row = (measured.get(w) or {}).get(s) or {}
            missing = [m for m in METRICS if number(row.get(m)) is None]
            if missing:
                complete = False
                rep.fail(f"measured.{w}.{s}", f"fill in {missing} from `p4cc report` of your "
                         f"{w} runs (README steps 2-4)")
    if complete:
        rep.ok("every setting measured on both workloads")
    tradeoff = doc.get("tradeoff") or {}
    if complete:
        q = {s: float(measured["incast"][s]["queue_avg_kb"]) for s in SETTINGS}
        lowest = min(q, key=lambda s: q[s])
        rep.check(str(tradeoff.get("lowest_queue_incast")).lower() == lowest,
                  "tradeoff.lowest_queue_incast agrees with your measurements",
                  f"your incast queues are {q}: the lowest is {lowest}")
        best = {w: min(SETTINGS, key=lambda s, w=w: float(measured[w][s]["fct_avg_ms"]))
                for w in WORKLOADS}
        rep.check(str(tradeoff.get("best_fct_websearch")).lower() == best["websearch"],
                  "tradeoff.best_fct_websearch agrees with your measurements",
                  f"your WebSearch average FCTs give {best['websearch']}")
    rep.check(str(tradeoff.get("throughput_friendly")).lower() == "secn2",
              "tradeoff.throughput_friendly", "which setting does ACC §2.2 call friendly to "
              "throughput-sensitive traffic, and why (its thresholds)?")
    text = str(doc.get("explanation") or "")
    rep.check("TODO" not in text and len(text.split()) >= 60
              and all(k in text.lower() for k in KEYWORDS),
              "explanation of the trade-off",
              "explain in >= 60 words, with your numbers, how the thresholds trade queue "
              "(latency of mice) against throughput (elephants), and why no single static "
              "setting wins both workloads")
    return rep.done()


if __name__ == "__main__":
    sys.exit(main())
