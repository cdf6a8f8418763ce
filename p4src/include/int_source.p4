/* p4cc data plane, ingress: INT source selection.
 *
 * int_watchlist (ternary on ipv4 src/dst, protocol, L4 destination port; entries carry
 * a priority) marks UDP packets that should carry INT from this switch on.  It is looked
 * up only while switch_config's action is set_switch_config (meta.int_watch; the
 * control plane picks set_switch_config_no_watch while the switch has no watch).  Only packets
 * that are not INT already (DSCP neither DSCP_INT nor DSCP_INT_SUMMARY) are candidates;
 * the shim/metadata headers are inserted in egress (int.p4), where the first hop record
 * is pushed, so that a packet dropped in the queue never carries half an INT stack.
 *
 * Two actions, chosen per entry: int_source (the sink reports the packet to the control
 * plane AND writes the summary for the receiver) and int_source_summary (summary only:
 * the packet's INT metadata says no_report, so the sink clones nothing).  A report costs
 * the sink switch a clone, a second egress pass and a PacketIn, and the controller a
 * decode per packet; the summary is what hosts' CC reads (docs/dataplane.md "INT").
 */
#ifndef P4CC_INT_SOURCE_P4
#define P4CC_INT_SOURCE_P4

control IntSource(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    /* max_hops is clamped to the header-stack size INT_MAX_HOPS; max_hops 0 means no
     * INT (int_source stays 0).  Branch-free: no extra pipeline step. */
    action int_source(bit<8> max_hops) {
        meta.int_source = (max_hops > 0) ? (bit<1>)1 : 0;
        meta.int_max_hops = (max_hops > INT_MAX_HOPS_B) ? INT_MAX_HOPS_B : max_hops;
    }

    /* As int_source, and the sink writes only the summary (no report clone); the flag
     * travels in int_md.no_report, since the sink may be another switch. */
    action int_source_summary(bit<8> max_hops) {
        int_source(max_hops);
        meta.int_no_report = 1;
    }

    table int_watchlist {
        key = {
            hdr.ipv4.src_addr: ternary;
            hdr.ipv4.dst_addr: ternary;
            hdr.ipv4.protocol: ternary;
            meta.l4_dport:     ternary;
        }
        actions = { int_source; int_source_summary; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    apply {
        /* meta.int_watch: set by switch_config's set_switch_config (forwarding.p4). */
        if (meta.int_watch == 1 && hdr.udp.isValid() && !hdr.int_shim.isValid() &&
                !hdr.int_summary.isValid()) {
            int_watchlist.apply();
        }
    }
}

#endif  // P4CC_INT_SOURCE_P4
