/* p4cc data plane, ingress: switch configuration, IPv4 LPM, ECMP, offered-load counter.
 *
 * ipv4_lpm either names a next hop (set_nhop) or an ECMP group (set_ecmp(group, size));
 * for a group, index = hash(5-tuple) mod size selects the member in ecmp_nhop
 * (docs/architecture.md).  All members of a flow take the same path (per-flow ECMP).
 */
#ifndef P4CC_FORWARDING_P4
#define P4CC_FORWARDING_P4

/* Control packets (ACK, NAK, CNP, probe replies) carry DSCP 48 (CS6), the code point
 * RoCE deployments give CNPs (NVIDIA's default CNP DSCP is 48, served in a strict-
 * priority queue); p4cc's hosts set it on every control packet they send.  BMv2
 * (simple_switch --priority-queues 2, p4cc.topo.bmv2) serves a port's priority queues
 * each with its own rate limiter, highest priority first: control packets then neither
 * wait behind a standing data queue nor use the data queue's packets/s, which on a
 * real link they would barely touch (a 64-B CNP is 6 % of a 1000-B slot).
 * Statistics (issue 10): control packets are accounted at the unused index 0 of every
 * per-port counter and register (meta.port_idx below), so a port's tx/offered counters,
 * queue statistics and PET bitmaps describe its data queue only -- the queue the
 * configured packet rate applies to.  Before, a port that carried data one way and the
 * ACKs/CNPs of the other direction reported more packets/s than its rate and a mean
 * packet below the padded size, and the fidelity verdict flagged it (port_rate,
 * byte_rate).  Index 0 holds all control packets of the switch. */
const bit<6> DSCP_CONTROL     = 48;
const bit<3> PRIORITY_CONTROL = 1;   // BMv2 serves the highest priority value first
const bit<3> PRIORITY_DATA    = 0;

control Forwarding(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    /* Packets and bytes offered to each egress port (index = chosen egress port), counted
     * before the queue: offered - port_tx = tail drops + drops in egress. */
    counter(MAX_PORTS, CounterType.packets_and_bytes) port_offered;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* Keyless table: the control plane MODIFYs the default entry (P4Runtime INSERT of
     * an existing entry fails, REFERENCE §1).  elephant_bytes defaults to "never".
     * set_switch_config also turns on the INT source lookup (int_watchlist, in
     * int_source.p4); set_switch_config_no_watch leaves it off.  p4cc's control plane
     * uses the second until it installs the switch's first INT watch: a keyed lookup
     * costs BMv2 with logging macros ~6 us of CPU per packet even when the table is
     * empty (it formats the key before testing the log level; docs/dataplane.md), and
     * most runs watch nothing.  The default keeps the lookup on, as before. */
    action set_switch_config(switch_id_t switch_id, bit<32> elephant_bytes) {
        meta.switch_id = switch_id;
        meta.elephant_bytes = elephant_bytes;
        meta.int_watch = 1;
    }

    action set_switch_config_no_watch(switch_id_t switch_id, bit<32> elephant_bytes) {
        meta.switch_id = switch_id;
        meta.elephant_bytes = elephant_bytes;
    }

    table switch_config {
        key = { }
        actions = { set_switch_config; set_switch_config_no_watch; }
        default_action = set_switch_config(0, 0xFFFFFFFF);
        size = 1;
    }

    /* Next hop: output port, MAC rewrite (dmac = next hop's MAC, smac = this switch's
     * port MAC), TTL decrement (the IPv4 checksum is recomputed in the deparser). */
    /* Also counts port_offered (index meta.port_idx = port; ports above MAX_PORT_INDEX
     * and control packets go to the unused index 0, so no extra condition is needed),
     * and picks the egress priority queue (DSCP_CONTROL above): one action instead of
     * four pipeline steps. */
    action set_nhop(port_t port, mac_t dmac, mac_t smac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        meta.port_idx = (port <= MAX_PORT_INDEX && hdr.ipv4.dscp != DSCP_CONTROL)
                        ? (bit<32>)port : 0;
        port_offered.count(meta.port_idx);
        standard_metadata.priority = (hdr.ipv4.dscp == DSCP_CONTROL) ? PRIORITY_CONTROL
                                                                      : PRIORITY_DATA;
    }

    action set_ecmp(bit<16> group, bit<16> size) {
        meta.ecmp_group = group;
        meta.ecmp_size = size;
        meta.ecmp_hit = 1;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_nhop; set_ecmp; drop; }
        default_action = drop();
        size = 1024;
    }

    table ecmp_nhop {
        key = {
            meta.ecmp_group: exact;
            meta.ecmp_index: exact;
        }
        actions = { set_nhop; drop; }
        default_action = drop();
        size = 1024;
    }

    /* The caller has dropped TTL <= 1 already (no ICMP time-exceeded is generated);
     * meta.l4_sport/l4_dport were set by the parser (0 for non-TCP/UDP). */
    apply {
        switch_config.apply();
        ipv4_lpm.apply();
        if (meta.ecmp_hit == 1) {
            if (meta.ecmp_size == 0) {
                drop();   // a group of size 0 is a control-plane bug; never hash mod 0
            } else {
                /* index = base + (crc16(5-tuple) mod size); v1model hash() accepts a
                 * run-time max (REFERENCE §1). */
                hash(meta.ecmp_index, HashAlgorithm.crc16, (bit<16>)0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                       meta.l4_sport, meta.l4_dport },
                     meta.ecmp_size);
                ecmp_nhop.apply();
            }
        }
        /* port_offered is counted in set_nhop: dropped packets are never counted. */
    }
}

#endif  // P4CC_FORWARDING_P4
