/* p4cc data plane, egress: RED/ECN marking and the per-port tx/marked counters.
 *
 * Marking rule (docs/architecture.md, RED as in DCQCN/ACC's switch model; REFERENCE §2):
 * an ECT(0)/ECT(1) packet seen at queue depth q (enq_qdepth, PACKETS) is CE-marked
 *     always           if q >= kmax
 *     with probability pmax * (q - kmin) / (kmax - kmin)   if kmin <= q < kmax
 *     never            if q < kmin.
 * BMv2 has no division at run time worth using, so the probabilistic branch draws
 * u uniform in [0, PMAX_ONE) and marks iff
 *     u * (kmax - kmin) < pmax_scaled * (q - kmin),     pmax_scaled = round(pmax*65535).
 * Both products are < 2^16 * 2^19 = 2^35 and are computed in 48 bits, so nothing
 * overflows.  P(mark) = ceil(pmax_scaled*(q-kmin)/(kmax-kmin)) / 65535, which is the RED
 * line to within 1/65535 (plus the Pmax rounding of 1/131070); docs/dataplane.md.
 * Non-ECT packets are never marked (and never dropped here: the queue tail-drops).
 * A packet that finds the queue empty (q = 0) is never marked either: the table is not
 * looked up for it (see apply below; exact for every Kmin >= 1).
 */
#ifndef P4CC_ECN_P4
#define P4CC_ECN_P4

const bit<48> RED_U_MAX = 65534;   // random() bounds are inclusive: u in [0, 65534]

control Ecn(inout headers_t hdr,
            inout metadata_t meta,
            inout standard_metadata_t standard_metadata) {

    /* Packets and bytes sent by each egress port. */
    counter(MAX_PORTS, CounterType.packets_and_bytes) port_tx;
    /* CE packets and bytes sent by each egress port (marked here or upstream). */
    counter(MAX_PORTS, CounterType.packets_and_bytes) port_marked;

    /* Thresholds are action parameters of the per-(port, queue) entry so the control
     * plane retunes them with one P4Runtime MODIFY (REFERENCE §1).  The whole decision
     * is inside the action, branch-free, because every extra condition or action is a
     * BMv2 pipeline step that costs throughput (docs/dataplane.md).  The table is
     * applied to ECT packets that find a queue only, so non-ECT packets are never
     * marked. */
    action set_ecn(qdepth_t kmin, qdepth_t kmax, pmax_t pmax) {
        qdepth_t q = standard_metadata.enq_qdepth;
        bit<48> u;
        /* random() takes run-time bounds on BMv2 (REFERENCE §1); drawn for every ECT
         * packet, used only between the thresholds. */
        random(u, (bit<48>)0, RED_U_MAX);
        bit<48> lhs = u * (bit<48>)(kmax - kmin);
        bit<48> rhs = (bit<48>)pmax * (bit<48>)(q - kmin);
        bool mark = q >= kmax || (q >= kmin && lhs < rhs);
        hdr.ipv4.ecn = mark ? ECN_CE : hdr.ipv4.ecn;
    }

    /* One entry per egress port, keyed by meta.port_idx (set_nhop): the egress port for
     * data packets, the unused index 0 for control packets (their own priority queue,
     * never ECT) and ports above MAX_PORT_INDEX.  So the port's data queue is the only
     * queue an entry applies to, as the (egress_port, qid) key before session 40 said
     * with a second field.  One key field, because BMv2 with logging macros formats
     * the key of every lookup and the key and data of every hit (4 % of the program's
     * instructions per packet for the second field; docs/dataplane.md).  The
     * control-plane name stays standard_metadata.egress_port. */
    table ecn_config {
        key = {
            meta.port_idx: exact @name("standard_metadata.egress_port");
        }
        actions = { set_ecn; NoAction; }
        default_action = NoAction();     // no entry: no marking
        size = MAX_PORTS;
    }

    /* Both counters in one action, no condition (one pipeline step).  Index
     * meta.port_idx (set by ingress set_nhop): the egress port, or the unused index 0 for
     * ports above MAX_PORT_INDEX; port_marked also counts packets that are not CE at
     * index 0. */
    action count_port() {
        port_tx.count(meta.port_idx);
        port_marked.count((hdr.ipv4.ecn == ECN_CE) ? meta.port_idx : 0);
    }

    apply {
        /* meta.port_idx was set by ingress (set_nhop).
         * A packet that finds its queue empty (q = 0) skips the lookup: with Kmin >= 1
         * packet, which is all p4cc's control plane writes (EcnConfig.kmin_pkts), RED
         * never marks it, and on BMv2 with logging macros the lookup of a hit entry is
         * ~13 % of the program's instructions per packet (it formats the key and the
         * entry before testing the log level; docs/dataplane.md "Per-packet cost").
         * Target quirk it creates: an entry with Kmax = 0 (mark everything) marks only
         * packets that find a queue, i.e. Kmin = Kmax = 0 acts as 1. */
        if (standard_metadata.enq_qdepth != 0 &&
                (hdr.ipv4.ecn == ECN_ECT0 || hdr.ipv4.ecn == ECN_ECT1)) {
            ecn_config.apply();
        }
        count_port();
    }
}

#endif  // P4CC_ECN_P4
