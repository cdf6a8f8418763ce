"""Epoch telemetry: interval statistics without register resets from the control plane.

The read-and-reset program (p4src/include/telemetry.p4 compiled with -DP4CC_READ_RESET)
keeps per-interval registers that the poller reads and then resets with 7 Thrift calls
per poll; the packets between a read and its reset are lost to both intervals, and under
load one poll's reads and resets were hundreds of ms apart.  The epoch program (the
default build of the same file) changes what the data plane keeps:

* ``q_enq_sum``, ``q_enq_cnt``, ``q_sojourn_sum`` are **cumulative** (never reset, 64
  bit, like the counters): the poller takes differences, so reading them late shifts
  packets between adjacent intervals but loses none;
* ``q_enq_max`` and the bitmaps ``incast_bits``, ``flow_bits``, ``elephant_bits`` are
  **banked by epoch parity** (2x their cells: bank ``epoch & 1``) and every cell is
  ``tag (bits 63:32) ++ value (bits 31:0)``, the tag being the epoch that last wrote it:
  a packet that finds another epoch's tag restarts the cell (max = its depth, bits = its
  bit).  The tag shares the cell so that the data plane pays one register read and one
  write per statistic, as before (BMv2's Thrift API carries values as i64, so a 64-bit
  bitmap word plus a tag cannot share a cell: a bitmap cell holds 32 bits, 8 per port,
  and :func:`join_cells` rebuilds the 64-bit words of the read-and-reset layout);
* the control plane writes the one-cell register ``tel_epoch`` = e + 1 at each poll
  (one Thrift call instead of 7 resets), then reads bank ``e & 1`` at leisure: nothing
  writes it during epoch e + 1, and a cell whose tag is not e saw no packet in epoch e
  (it reads as 0);
* the count-min sketch rows ``flow_bytes_r0/_r1`` (bytes per flow since the sketch
  window started; PET's elephants) are tagged the same way with the **sketch window**
  w, which shares ``tel_epoch`` with the epoch (:func:`epoch_word`: ``w (63:32) ++ e
  (31:0)``): the poller moves w on with its epoch write at the first poll after each
  ``sketch_window_s``, and the first packet of a window restarts the flow's cell in both
  rows at once.  Before, the poller reset the two rows with two Thrift calls per window,
  and bytes that arrived between the calls were lost from one row.  The control plane
  now resets no register.

``is_epoch_program`` detects the program by its register names, so the poller
(p4cc.controlplane.telemetry) works with both programs; ``closed_bank`` extracts the
closed epoch's values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

EPOCH_REGISTER = "tel_epoch"
#: the epoch e is the lower 32 bits of tel_epoch; it wraps (after 136 years at one poll
#: per second), as does the sketch window w in the upper 32 bits
EPOCH_MOD = 1 << 32
CUMULATIVE = ("q_enq_sum", "q_enq_cnt", "q_sojourn_sum")
#: registers banked by epoch parity, cells ``tag ++ value`` (32 + 32 bits)
TAGGED = ("q_enq_max", "incast_bits", "flow_bits", "elephant_bits")
#: the tagged registers that are bitmaps (32-bit cells, joined in pairs into 64-bit words)
BITMAPS = ("incast_bits", "flow_bits", "elephant_bits")
VALUE_BITS = 32
VALUE_MASK = (1 << VALUE_BITS) - 1


def is_epoch_program(register_names: Iterable[str]) -> bool:
    """True if the program has the epoch register (names may carry a control prefix,
    e.g. ``MyEgress.telemetry.tel_epoch``)."""
    return any(n == EPOCH_REGISTER or n.endswith("." + EPOCH_REGISTER)
               for n in register_names)


def epoch_word(epoch: int, window: int) -> int:
    """The value of ``tel_epoch``: sketch window (bits 63:32) ++ epoch (bits 31:0), the
    layout of a tagged cell (:func:`cell`) with the window as its tag."""
    return cell(window, epoch)


def split_word(word: int) -> tuple[int, int]:
    """(epoch, sketch window) of a ``tel_epoch`` value (Thrift reads it as a signed i64)."""
    word %= 1 << 64
    return word & VALUE_MASK, word >> VALUE_BITS


def cell(epoch: int, value: int) -> int:
    """A tagged cell as the data plane writes it."""
    return (epoch % EPOCH_MOD) << VALUE_BITS | (value & VALUE_MASK)


def closed_bank(cells: Sequence[int], epoch: int) -> list[int]:
    """The values of bank ``epoch & 1`` whose tag is ``epoch`` (other cells read 0)."""
    size = len(cells) // 2
    base = (epoch & 1) * size
    lo = (epoch % EPOCH_MOD) << VALUE_BITS  # the cells of this epoch are lo .. lo + mask
    hi = lo + VALUE_MASK
    return [c - lo if lo <= c <= hi else 0 for c in cells[base:base + size]]


def join_cells(values: Sequence[int]) -> list[int]:
    """64-bit bitmap words from 32-bit cells: word w = cell 2w (low) | cell 2w+1 (high),
    so bit b of a port's bitmap is bit b % 64 of word b / 64, as in the read-and-reset
    layout."""
    return [lo | hi << VALUE_BITS for lo, hi in zip(values[0::2], values[1::2], strict=True)]


def interval_sums(cur: Mapping[str, Sequence[int]], prev: Mapping[str, Sequence[int]] | None
                  ) -> dict[str, list[int]]:
    """Interval values of the cumulative registers (a cell that went backwards was reset
    by a switch restart: counted from zero, as the counters are).  Without ``prev`` (the
    first poll) the interval is everything since the switch started, as the
    read-and-reset program's registers hold before their first reset."""
    out = {}
    for name, values in cur.items():
        old = prev.get(name) if prev else None
        if old is None:
            out[name] = [int(c) for c in values]
            continue
        out[name] = [int(c) - int(p) if int(c) >= int(p) else int(c)
                     for c, p in zip(values, old, strict=False)]
    return out


def closed_interval(read_all: Mapping[str, Sequence[int]], epoch: int) -> dict[str, list[int]]:
    """The banked registers' values of the closed ``epoch`` in the read-and-reset layout
    (``read_all``: each tagged register's whole array)."""
    out = {}
    for name in TAGGED:
        values = closed_bank(read_all[name], epoch)
        out[name] = join_cells(values) if name in BITMAPS else values
    return out
