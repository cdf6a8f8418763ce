/* p4cc data plane: types, constants, headers and metadata.
 *
 * Every INT and packet_in layout here is mirrored byte for byte by the Scapy layers in
 * p4cc/packets/int.py; docs/architecture.md fixes the names.  Widths are in bits.
 * Nothing after UDP other than INT is parsed: the RoCEv2 BTH of the p4cc transport
 * (p4cc/packets/transport.py) stays payload, see parser.p4.
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

const port_t  CPU_PORT  = 510;             // simple_switch_grpc --cpu-port (architecture.md)
const bit<32> MAX_PORTS = 64;              // entries of every per-port counter/register
const port_t  MAX_PORT_INDEX = 63;         // highest port that owns a counter/register slot
const bit<32> BITMAP_WORDS = 4;            // 4 x 64 = 256 bits per port
const bit<32> BITMAP_ENTRIES = 256;        // MAX_PORTS * BITMAP_WORDS
/* Epoch program (telemetry.p4): a bitmap cell is a 32-bit epoch tag ++ 32 bits of the
 * port's 256-bit bitmap, 8 cells per port, one bank of MAX_PORTS * 8 cells per epoch
 * parity.  The control plane joins cells 2w and 2w+1 into the 64-bit word w. */
const bit<32> TEL_BITMAP_CELLS = 512;      // MAX_PORTS * 8 cells: one bank
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
 * int_source(max_hops) is clamped to it.  P4 has no loops outside the parser, so the
 * per-hop code is unrolled: INT_FOR_EACH_HOP(M) expands M(0) .. M(INT_MAX_HOPS - 1),
 * and IntEgress.save_for_report lists the records by hand: change all three together
 * (Python's p4cc.constants.INT_MAX_HOPS is read from the compiled stack size);
 * tests/test_dataplane_int_hops.py checks that the sources and the compiled JSON agree. */
#define INT_MAX_HOPS 8
#define INT_FOR_EACH_HOP(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
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

/* IPv4 without options (RFC 791); the parser extracts no L4 header when IHL != 5 and
 * ingress drops such packets.  The TOS byte is split into DSCP and ECN (RFC 2474/3168). */
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

/* TCP without options (RFC 793); only the ports are used (ECMP hash, watchlist).
 * The other 16 bytes (seq, ack, data offset, flags, window, checksum, urgent pointer)
 * are one opaque field: every field of every header is a PHV field that BMv2 resets,
 * looks up and copies per packet, so unused fields cost throughput (docs/dataplane.md). */
header tcp_t {
    bit<16>  src_port;
    bit<16>  dst_port;
    bit<128> rest;
}

/* UDP (RFC 768).  The checksum is set to 0 ("none", allowed over IPv4) whenever this
 * switch changes the UDP payload (INT insert/push/strip). */
header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
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
    bit<1>  no_report;      // summary-only watch (int_source_summary): the sink writes the
                            // summary but clones no INT report; 0 on packets built by hosts
    bit<2>  rsvd0;
    bit<8>  hop_count;      // hop records present
    bit<8>  max_hops;       // limit set by the source (<= INT_MAX_HOPS)
    bit<8>  hop_words;      // INT_HOP_WORDS
    bit<16> instructions;   // INT_INSTRUCTIONS (informational: the hop layout is fixed)
    bit<16> rsvd1;
}

/* INT hop record, 24 bytes, newest first (each switch pushes at the front).  ONE
 * 192-bit field in wire order (8 records x 7 fields would be 56 PHV fields that BMv2
 * handles for every packet, INT or not); the fields are the slices below:
 *   switch_id    [191:160]  switch_config.switch_id of the pushing switch
 *   ingress_port [159:144]
 *   egress_port  [143:128]
 *   hop_latency  [127:96]   µs: egress_global_timestamp - ingress_global_timestamp
 *   qdepth       [95:64]    enq_qdepth in packets
 *   egress_ts    [63:32]    µs: low 32 bits of egress_global_timestamp (own clock)
 *   sojourn      [31:0]     µs: deq_timedelta, time spent in the egress queue */
header int_hop_t {
    bit<192> rec;
}
#define INT_HOP_LATENCY(h) ((h).rec[127:96])
#define INT_HOP_QDEPTH(h)  ((h).rec[95:64])

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
}

/* ---------------------------------------------------------------- metadata */

/* What the INT sink saves for its E2E clone (see int.p4): a clone starts with reset
 * metadata and BMv2 copies only VALID headers, so the stripped INT stack is carried in
 * these preserved fields and rebuilt in the clone's egress pass.  Each hop record is
 * kept packed as 192 bits (int_hop_t field order).  Two wide fields instead of 15:
 * BMv2 builds every packet's PHV field by field, so the field count costs throughput
 * on every packet, INT or not (docs/dataplane.md); the parts are the slices below. */
struct int_saved_t {
    bit<87>   info;   // ingress_port 16, egress_port 16, switch_id 32, orig_dscp 6,
                      // hop_count 8, max_hops 8, e 1 (msb first)
    bit<(192 * INT_MAX_HOPS)> hops;   // record i (int_hops[i].rec) at [192*i+191 : 192*i]
}
#define INT_SAVED_INGRESS_PORT (meta.int_saved.info[86:71])
#define INT_SAVED_EGRESS_PORT  (meta.int_saved.info[70:55])
#define INT_SAVED_SWITCH_ID    (meta.int_saved.info[54:23])
#define INT_SAVED_ORIG_DSCP    (meta.int_saved.info[22:17])
#define INT_SAVED_HOP_COUNT    (meta.int_saved.info[16:9])
#define INT_SAVED_MAX_HOPS     (meta.int_saved.info[8:1])
#define INT_SAVED_E            (meta.int_saved.info[0:0])

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
    /* INT source decision (ingress) -> egress; int_watch: switch_config turned the
     * int_watchlist lookup on (forwarding.p4) */
    bit<1>      int_watch;
    bit<1>      int_source;
    bit<8>      int_max_hops;
    bit<1>      int_no_report;   // int_source_summary: copied into int_md.no_report
    /* Index of the egress port in the per-port counters/registers and the key of
     * ecn_config, set once by set_nhop: the port, or the unused index 0 for control
     * packets (DSCP_CONTROL) and ports above MAX_PORT_INDEX.  (Every metadata field is
     * reset for every packet on BMv2, so unused ones cost: no qid copy any more.)  A
     * metadata field, not a local: p4c copy-propagates locals into every use, so each
     * register access would recompute it in an extra primitive. */
    bit<32>     port_idx;
#ifdef P4CC_READ_RESET
    /* Bitmap word indices of the -DP4CC_READ_RESET telemetry build (telemetry.p4);
     * absent from the epoch build, which would reset them for every packet unused. */
    bit<32>     tel_si;
    bit<32>     tel_fi;
#endif
    /* INT parse bookkeeping */
    bit<8>      int_hops_left;
    /* Preserved for the INT report clone. */
    @field_list(INT_REPORT_FL)
    int_saved_t int_saved;
}

#endif  // P4CC_HEADERS_P4
