"""Scapy layers for p4cc's host transport (RoCEv2 style, UDP port 4791).

Every p4cc transport datagram is ``IPv4 / UDP(dport or sport 4791) / BTH / <ext> /
ICRC``.  BTH (and its ICRC trailer), AETH and the CNP padding come from
``scapy.contrib.roce``; p4cc adds three small extension headers:

===========  ======================  =============================================
BTH opcode   extension after BTH      meaning
===========  ======================  =============================================
0x04         P4ccData (8 B) + data    RC SEND ONLY: one data packet, PSN = sequence
0x11         AETH (4 B) + P4ccAckInfo RC ACKNOWLEDGE: ACK (syndrome 0x1F) or NAK
             (12 B)                   PSN-sequence-error (syndrome 0x60); BTH PSN =
                                      the receiver's next expected PSN
0x81         CNPPadding (16 B)        CNP (DCQCN congestion notification), BECN = 1
0xC0 / 0xC1  P4ccProbe (24 B)         RTT probe / probe reply (manufacturer range)
===========  ======================  =============================================

BTH dest QP = the flow id (assigned by the sender).  The ICRC is not computed by the
host stack (``p4cc.hostcc.wire`` writes 0; nobody checks it); Scapy computes it when
you leave ``icrc=None``.  When a switch has added an INT summary (IPv4 DSCP 0x18,
docs/architecture.md) its 8 bytes sit between UDP and BTH; the receiver strips it.
Syndrome values: IBTA spec vol. 1 §9.7.5.1 (AETH): ``0b000xxxxx`` ACK with credit
count (``11111`` = no credit information), ``0b01100000`` NAK PSN sequence error.
"""

from __future__ import annotations

from scapy.contrib.roce import AETH, BTH, CNP_OPCODE, CNPPadding, cnp
from scapy.fields import BitField, FlagsField, IntField, LongField, XBitField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

# The opcodes, syndromes and the port are p4cc.constants (shared with p4cc.hostcc.wire).
from p4cc.constants import (
    OP_ACK,
    OP_DATA,
    OP_PROBE,
    OP_PROBE_REPLY,
    QDEPTH_NONE,
    ROCE_PORT,
    SYNDROME_ACK,
    SYNDROME_NAK_SEQ,
)

__all__ = [
    "AETH",
    "BTH",
    "CNP_OPCODE",
    "OP_ACK",
    "OP_DATA",
    "OP_PROBE",
    "OP_PROBE_REPLY",
    "ROCE_PORT",
    "SYNDROME_ACK",
    "SYNDROME_NAK_SEQ",
    "CNPPadding",
    "P4ccAckInfo",
    "P4ccData",
    "P4ccProbe",
    "cnp",
]


class P4ccData(Packet):
    """After BTH on data packets: flags and the total message (flow) length."""

    name = "P4ccData"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        FlagsField("flags", 0, 8, ["LAST", "RETX"]),
        XBitField("reserved", 0, 24),
        IntField("msg_len", 0),  # total bytes of the flow's payload
    ]


class P4ccAckInfo(Packet):
    """After AETH on ACK/NAK: completion flag, INT max queue depth, bytes received."""

    name = "P4ccAckInfo"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        FlagsField("flags", 0, 8, ["COMPLETE", "QDEPTH"]),
        BitField("max_qdepth", QDEPTH_NONE, 24),  # packets, from the INT summary
        LongField("rx_bytes", 0),  # in-order payload bytes received so far
    ]


class P4ccProbe(Packet):
    """RTT probe (0xC0) and reply (0xC1); the reply echoes seq and t_send_ns."""

    name = "P4ccProbe"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        IntField("seq", 0),
        FlagsField("flags", 0, 8, ["QDEPTH"]),
        BitField("max_qdepth", QDEPTH_NONE, 24),
        LongField("t_send_ns", 0),  # sender clock, echoed back
        LongField("t_recv_ns", 0),  # receiver clock when the probe arrived (reply only)
    ]


# scapy.contrib.roce binds UDP dport 4791; replies come *from* 4791.
bind_layers(UDP, BTH, sport=ROCE_PORT)
bind_layers(BTH, P4ccData, opcode=OP_DATA)
bind_layers(AETH, P4ccAckInfo)
bind_layers(BTH, P4ccProbe, opcode=OP_PROBE)
bind_layers(BTH, P4ccProbe, opcode=OP_PROBE_REPLY)
