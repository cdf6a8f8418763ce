/* p4cc data plane: types, constants, headers and metadata.
 *
 * Every layout here is mirrored byte for byte by the Scapy layers in
 * p4cc/packets/int.py (INT) and scapy.contrib.roce (BTH); docs/architecture.md fixes
 * the names.  Widths are in bits.
 */
#ifndef P4CC_HEADERS_P4
#define P4CC_HEADERS_P4

/* ---------------------------------------------------------------- typedefs */
typedef bit<9>  port_t;      // v1model port number (standard_metadata ingress/egress port)
typedef bit<19> qdepth_t;    // BMv2 enq_qdepth/deq_qdepth: queue depth in PACKETS, not bytes
typedef bit<48> mac_t;
typedef bit<32> ip4_t;
typedef bit<32> switch_id_t; // control-plane assigned id (switch_config), = BMv2 device_id
typedef bit<48> ts_t;        // BMv2 global timestamps: microseconds since the switch started
typedef bit<16> pmax_t;      // RED Pmax scaled to PMAX_ONE (p4cc/controlplane/ecn.py)
typedef bit<64> bitmap_word_t; // one word of a 256-bit per-port bitmap (4 words per port)

/* --------------------------------------------------------------- constants */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IPPROTO_TCP    = 6;
const bit<8>  IPPROTO_UDP    = 17;
const bit<16> UDP_PORT_ROCEV2 = 4791;      // IANA port of RoCEv2 (BTH follows UDP)

const port_t  CPU_PORT  = 510;             // simple_switch_grpc --cpu-port (architecture.md)
const bit<32> MAX_PORTS = 64;              // entries of every per-port counter/register
const port_t  MAX_PORT_INDEX = 63;         // highest port that owns a counter/register slot
const bit<32> BITMAP_WORDS = 4;            // 4 x 64 = 256 bits per port
const bit<32> BITMAP_ENTRIES = 256;        // MAX_PORTS * BITMAP_WORDS
const bit<32> SKETCH_ROWS_SIZE = 4096;     // cells in each count-min row

/* ECN codepoints (RFC 3168 §5). */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_ECT1    = 1;
const bit<2> ECN_ECT0    = 2;
const bit<2> ECN_CE      = 3;

/* DSCP values that announce INT content after the UDP header (architecture.md). */
const bit<6> DSCP_INT         = 0x17;      // INT shim + metadata + hop records follow UDP
const bit<6> DSCP_INT_SUMMARY = 0x18;      // 8-byte INT summary follows UDP

/* INT sizes.  The header stack holds at most INT_MAX_HOPS records; the control plane's
 * int_source(max_hops) is clamped to it. */
#define INT_MAX_HOPS 8
const bit<8>  INT_MAX_HOPS_B   = INT_MAX_HOPS;
const bit<4>  INT_TYPE_P4CC    = 1;        // shim.int_type
const bit<4>  INT_VERSION      = 1;        // md.version
const bit<8>  INT_HOP_WORDS    = 6;        // a hop record is 24 bytes = 6 words
const bit<16> INT_INSTRUCTIONS = 0xFE00;   // 7 fields per hop (see int_hop_t), fixed
const bit<16> INT_SHIM_MD_BYTES = 12;      // shim (4) + metadata header (8)
const bit<16> INT_HOP_BYTES     = 24;
const bit<16> INT_SUMMARY_BYTES = 8;
const bit<8>  INT_SHIM_MD_WORDS = 3;

/* Clone session (created by the control plane toward CPU_PORT) and the field list the
 * E2E clone preserves; see int.p4 for why the report needs preserved metadata. */
const bit<32> INT_REPORT_SESSION = 100;
const bit<8>  INT_REPORT_FL      = 1;
const bit<8>  PACKET_IN_REASON_INT_REPORT = 1;

/* standard_metadata.instance_type values of simple_switch (BMv2 simple_switch.cpp). */
const bit<32> PKT_INSTANCE_NORMAL       = 0;
const bit<32> PKT_INSTANCE_EGRESS_CLONE = 2;

/* ----------------------------------------------------------------- headers */

/* PacketIn controller header: prepended to frames sent to CPU_PORT.  simple_switch_grpc's
 * P4Runtime server removes it and delivers its fields as PacketIn metadata (ids 1..5 in
 * field order); the PacketIn payload is the frame that follows. */
@controller_header("packet_in")
header packet_in_t {
    bit<16> ingress_port;   // port the reported packet entered the reporting switch
    bit<16> egress_port;    // port it left by (the INT sink port)
    bit<32> switch_id;      // reporting switch (switch_config)
    bit<8>  reason;         // PACKET_IN_REASON_INT_REPORT
    bit<8>  rsvd;           // zero; keeps the header a whole number of bytes
}

/* Ethernet II (IEEE 802.3). */
header ethernet_t {
    mac_t   dst_addr;
    mac_t   src_addr;
    bit<16> ether_type;
}

/* IPv4 without options (RFC 791); packets with IHL != 5 are forwarded but their L4
 * headers are not parsed. The TOS byte is split into DSCP and ECN (RFC 2474/3168). */
header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    ip4_t   src_addr;
    ip4_t   dst_addr;
}

/* TCP without options (RFC 793); only the ports are used (ECMP hash, watchlist). */
header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

/* UDP (RFC 768).  The checksum is set to 0 ("none", allowed over IPv4) whenever this
 * switch changes the UDP payload (INT insert/push/strip). */
header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header, 12 bytes (IBTA spec vol. 1 §9.2; RoCEv2 puts it
 * after UDP port 4791).  Same field widths as scapy.contrib.roce.BTH. */
header bth_t {
    bit<8>  opcode;         // 0x81 = CNP (p4cc/packets/transport.py)
    bit<1>  solicited;
    bit<1>  migreq;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dest_qp;        // p4cc: flow id
    bit<1>  ack_req;
    bit<7>  resv7;
    bit<24> psn;            // p4cc: sequence number
}

/* INT shim, 4 bytes, right after UDP when DSCP == DSCP_INT. */
header int_shim_t {
    bit<4>  int_type;       // INT_TYPE_P4CC
    bit<4>  rsvd0;
    bit<8>  length;         // whole INT stack (shim + md + hops) in 4-byte words
    bit<2>  rsvd1;
    bit<6>  orig_dscp;      // the packet's DSCP before the INT source set DSCP_INT
    bit<8>  rsvd2;
}

/* INT metadata header, 8 bytes, after the shim. */
header int_md_t {
    bit<4>  version;        // INT_VERSION
    bit<1>  e;              // set when a switch could not push (max hops reached)
    bit<3>  rsvd0;
    bit<8>  hop_count;      // hop records present
    bit<8>  max_hops;       // limit set by the source (<= INT_MAX_HOPS)
    bit<8>  hop_words;      // INT_HOP_WORDS
    bit<16> instructions;   // INT_INSTRUCTIONS (informational: the hop layout is fixed)
    bit<16> rsvd1;
}

/* INT hop record, 24 bytes, newest first (each switch pushes at the front). */
header int_hop_t {
    switch_id_t switch_id;  // switch_config.switch_id of the pushing switch
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;    // µs: egress_global_timestamp - ingress_global_timestamp
    bit<32> qdepth;         // enq_qdepth in packets
    bit<32> egress_ts;      // µs: low 32 bits of egress_global_timestamp (switch's own clock)
    bit<32> sojourn;        // µs: deq_timedelta, time spent in the egress queue
}

/* INT summary, 8 bytes, after UDP when DSCP == DSCP_INT_SUMMARY (written by the sink). */
header int_summary_t {
    bit<8>  hop_count;      // hops that pushed a record
    bit<24> max_qdepth;     // max qdepth (packets) over the hops, the sink's own included
    bit<32> path_latency;   // µs: sum of the hop latencies
}

struct headers_t {
    packet_in_t          packet_in;
    ethernet_t           ethernet;
    ipv4_t               ipv4;
    tcp_t                tcp;
    udp_t                udp;
    int_shim_t           int_shim;
    int_md_t             int_md;
    int_hop_t[INT_MAX_HOPS] int_hops;
    int_summary_t        int_summary;
    bth_t                bth;
}

/* ---------------------------------------------------------------- metadata */

/* What the INT sink saves for its E2E clone (see int.p4): a clone starts with reset
 * metadata and BMv2 copies only VALID headers, so the stripped INT stack is carried in
 * these preserved fields and rebuilt in the clone's egress pass.  Each hop record is
 * kept packed as 192 bits (int_hop_t field order). */
struct int_saved_t {
    bit<16>  ingress_port;
    bit<16>  egress_port;
    bit<32>  switch_id;
    bit<6>   orig_dscp;
    bit<8>   hop_count;
    bit<8>   max_hops;
    bit<1>   e;
    bit<192> hop0;
    bit<192> hop1;
    bit<192> hop2;
    bit<192> hop3;
    bit<192> hop4;
    bit<192> hop5;
    bit<192> hop6;
    bit<192> hop7;
}

struct metadata_t {
    /* switch_config (ingress) -> egress */
    switch_id_t switch_id;
    bit<32>     elephant_bytes;
    /* 5-tuple, zero ports for non-TCP/UDP */
    bit<16>     l4_sport;
    bit<16>     l4_dport;
    /* ECMP */
    bit<16>     ecmp_group;
    bit<16>     ecmp_size;
    bit<16>     ecmp_index;
    bit<1>      ecmp_hit;
    /* INT source decision (ingress) -> egress */
    bit<1>      int_source;
    bit<8>      int_max_hops;
    /* Egress queue id, the second key of ecn_config.  v1model's standard_metadata_t
     * has no qid, and p4c (1.2.4) emits @alias only for standard_metadata, so BMv2's
     * queueing_metadata.qid is not reachable.  Egress copies intrinsic_metadata.priority
     * here instead: the priority queue ingress chose; 0 (the only queue) unless BMv2
     * runs with --priority-queues and ingress sets a priority, which p4cc does not. */
    bit<5>      qid;
    /* INT parse bookkeeping */
    bit<8>      int_hops_left;
    /* Preserved for the INT report clone. */
    @field_list(INT_REPORT_FL)
    int_saved_t int_saved;
}

#endif  // P4CC_HEADERS_P4
