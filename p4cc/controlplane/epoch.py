"""Epoch telemetry: interval statistics without register resets from the control plane.

Today's program (read-and-reset) keeps per-interval registers that the poller reads and
then resets with 7 Thrift calls per poll; the packets between a read and its reset are
lost to both intervals, and under load one poll's reads and resets were hundreds of ms
apart.  The epoch program (designed here; its P4 in p4src/include/telemetry.p4 once
written) changes what the data plane keeps:

* ``q_enq_sum``, ``q_enq_cnt``, ``q_sojourn_sum`` are **cumulative** (never reset, 64
  bit, like the counters): the poller takes differences, so reading them late shifts
  packets between adjacent intervals but loses none;
* ``q_enq_max`` and the bitmaps ``incast_bits``, ``flow_bits``, ``elephant_bits`` are
  **banked by epoch parity** (2x their size: bank ``epoch & 1``) and every cell has an
  **epoch tag** (``q_max_tag`` per port, ``incast_tag`` / ``flow_tag`` per bitmap word;
  ``flow_bits`` and ``elephant_bits`` share ``flow_tag``): a packet that finds a tag other
  than the current epoch restarts the cell (max = its depth, word = its bit) and writes
  the tag;
* the control plane writes the one-cell register ``tel_epoch`` = e + 1 at each poll
  (one Thrift call instead of 7 resets), then reads bank ``e & 1`` at leisure: nothing
  writes it during epoch e + 1, and a cell whose tag is not e saw no packet in epoch e
  (it reads as 0).

``is_epoch_program`` detects the program by its register names, so the poller works
with both programs; ``closed_bank`` extracts the closed epoch's values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

EPOCH_REGISTER = "tel_epoch"
CUMULATIVE = ("q_enq_sum", "q_enq_cnt", "q_sojourn_sum")
#: banked register -> its tag register (one tag per cell of the banked register)
BANKED = {"q_enq_max": "q_max_tag", "incast_bits": "incast_tag", "flow_bits": "flow_tag",
          "elephant_bits": "flow_tag"}


def is_epoch_program(register_names: Iterable[str]) -> bool:
    """True if the program has the epoch register (names may carry a control prefix,
    e.g. ``MyEgress.telemetry.tel_epoch``)."""
    return any(n == EPOCH_REGISTER or n.endswith("." + EPOCH_REGISTER)
               for n in register_names)


def closed_bank(values: Sequence[int], tags: Sequence[int], epoch: int) -> list[int]:
    """The cells of bank ``epoch & 1`` whose tag is ``epoch`` (others read 0)."""
    size = len(values) // 2
    base = (epoch & 1) * size
    return [int(values[base + i]) if int(tags[base + i]) == epoch else 0
            for i in range(size)]


def interval_sums(cur: Mapping[str, Sequence[int]], prev: Mapping[str, Sequence[int]] | None
                  ) -> dict[str, list[int]]:
    """Interval values of the cumulative registers (a cell that went backwards was reset
    by a switch restart: counted from zero, as the counters are)."""
    out = {}
    for name, values in cur.items():
        old = prev.get(name) if prev else None
        if old is None:
            out[name] = [0] * len(values)
            continue
        out[name] = [int(c) - int(p) if int(c) >= int(p) else int(c)
                     for c, p in zip(values, old, strict=False)]
    return out
