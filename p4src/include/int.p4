/* p4cc data plane, egress: INT source insertion, hop records, sink, and report.
 *
 * Source (meta.int_source from int_watchlist): insert shim + metadata after UDP, DSCP
 *   becomes DSCP_INT (the old DSCP goes into shim.orig_dscp).
 * Every switch (the source included): push a 24-byte hop record at the front of the
 *   stack unless md.hop_count has reached md.max_hops (then md.e = 1).
 * Sink (egress port in int_sink): E2E-clone the packet to INT_REPORT_SESSION (the
 *   control plane points it at CPU_PORT) as the INT report -- unless its metadata says
 *   no_report (a summary-only watch, int_source_summary) -- then strip the INT stack
 *   from the original and insert the 8-byte summary; DSCP becomes DSCP_INT_SUMMARY.
 *
 * Target quirk that shapes the sink (BMv2 simple_switch.cpp, egress_thread): an egress
 * clone is copied from the packet's state at the END of the egress pipeline, i.e. after
 * the strip, and PHV::copy_headers copies only VALID headers (a later setValid() zeroes
 * the fields).  So before stripping, the sink saves the INT stack into metadata
 * preserved by clone_preserving_field_list (meta.int_saved, @field_list INT_REPORT_FL);
 * the clone's own egress pass (instance_type PKT_INSTANCE_EGRESS_CLONE) rebuilds the
 * shim, metadata header and hop records from it and prepends the packet_in header.
 * The report is thus the packet as it would have left the sink with INT (DSCP_INT,
 * lengths restored, UDP checksum 0), the sink's own hop record first.
 *
 * Lengths: IPv4 total_len and UDP length follow every insert/strip; UDP checksum is set
 * to 0 (no checksum, RFC 768, allowed over IPv4); the IPv4 checksum is recomputed in
 * the deparser.  The IPv4 ICRC of RoCEv2 is not maintained (p4cc hosts do not check it).
 */
#ifndef P4CC_INT_P4
#define P4CC_INT_P4

/* Per-hop code, expanded for hops 0 .. INT_MAX_HOPS - 1 by INT_FOR_EACH_HOP (headers.p4).
 * A hop record is one 192-bit field in wire order (int_hop_t), saved as is in
 * meta.int_saved.hops (record i at bits [192*i+191 : 192*i]). */
#define INT_RESTORE_HOP(i)                                                  \
    if (INT_SAVED_HOP_COUNT > i) {                                          \
        hdr.int_hops[i].setValid();                                         \
        hdr.int_hops[i].rec = meta.int_saved.hops[192 * i + 191 : 192 * i]; \
    }

/* Sum of latencies and max depth over the valid records. */
#define INT_ACC_HOP(i)                                                      \
    if (hdr.int_hops[i].isValid()) {                                        \
        path_latency = path_latency + INT_HOP_LATENCY(hdr.int_hops[i]);     \
        if (INT_HOP_QDEPTH(hdr.int_hops[i]) > max_qdepth) {                 \
            max_qdepth = INT_HOP_QDEPTH(hdr.int_hops[i]);                   \
        }                                                                   \
    }

control IntEgress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    /* The table's hit decides (no flag to set: one assignment less per packet). */
    action int_sink_port() { }

    /* Ports that lead to a host: the INT stack ends here. */
    table int_sink {
        key = { standard_metadata.egress_port: exact; }
        actions = { int_sink_port; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    action insert_int() {
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_P4CC;
        hdr.int_shim.rsvd0 = 0;
        hdr.int_shim.length = INT_SHIM_MD_WORDS;
        hdr.int_shim.rsvd1 = 0;
        hdr.int_shim.orig_dscp = hdr.ipv4.dscp;
        hdr.int_shim.rsvd2 = 0;
        hdr.int_md.setValid();
        hdr.int_md.version = INT_VERSION;
        hdr.int_md.e = 0;
        hdr.int_md.no_report = meta.int_no_report;
        hdr.int_md.rsvd0 = 0;
        hdr.int_md.hop_count = 0;
        hdr.int_md.max_hops = meta.int_max_hops;
        hdr.int_md.hop_words = INT_HOP_WORDS;
        hdr.int_md.instructions = INT_INSTRUCTIONS;
        hdr.int_md.rsvd1 = 0;
        hdr.ipv4.dscp = DSCP_INT;
        hdr.ipv4.total_len = hdr.ipv4.total_len + INT_SHIM_MD_BYTES;
        hdr.udp.length = hdr.udp.length + INT_SHIM_MD_BYTES;
        hdr.udp.checksum = 0;
    }

    action push_hop() {
        hdr.int_hops.push_front(1);
        hdr.int_hops[0].setValid();
        /* switch_id, ingress_port, egress_port, hop_latency, qdepth, egress_ts, sojourn */
        hdr.int_hops[0].rec = meta.switch_id
            ++ (bit<16>)standard_metadata.ingress_port
            ++ (bit<16>)standard_metadata.egress_port
            ++ (bit<32>)(standard_metadata.egress_global_timestamp -
                         standard_metadata.ingress_global_timestamp)
            ++ (bit<32>)standard_metadata.enq_qdepth
            ++ (bit<32>)standard_metadata.egress_global_timestamp
            ++ standard_metadata.deq_timedelta;
        hdr.int_md.hop_count = hdr.int_md.hop_count + 1;
        hdr.int_shim.length = hdr.int_shim.length + INT_HOP_WORDS;
        hdr.ipv4.total_len = hdr.ipv4.total_len + INT_HOP_BYTES;
        hdr.udp.length = hdr.udp.length + INT_HOP_BYTES;
        hdr.udp.checksum = 0;
    }

    action save_for_report() {
        /* layout: see int_saved_t; one concatenation (one BMv2 primitive) of the
         * INT_MAX_HOPS records, the last first (record i at [192*i+191 : 192*i]). */
        meta.int_saved.info = (bit<16>)standard_metadata.ingress_port
            ++ (bit<16>)standard_metadata.egress_port
            ++ meta.switch_id
            ++ hdr.int_shim.orig_dscp
            ++ hdr.int_md.hop_count
            ++ hdr.int_md.max_hops
            ++ hdr.int_md.e;
        meta.int_saved.hops = hdr.int_hops[7].rec ++ hdr.int_hops[6].rec
            ++ hdr.int_hops[5].rec ++ hdr.int_hops[4].rec
            ++ hdr.int_hops[3].rec ++ hdr.int_hops[2].rec
            ++ hdr.int_hops[1].rec ++ hdr.int_hops[0].rec;
    }

    /* Applied (by P4ccEgress) only to packets with an INT stack or chosen as INT
     * sources: meta.int_source == 1 (set by int_watchlist for UDP packets without INT,
     * max_hops > 0) or hdr.int_shim valid (parsed after UDP); never both.  No `return`
     * statements: p4c turns each into a flag plus conditions, i.e. extra BMv2 steps. */
    apply {
        bool pushed = false;
        if (meta.int_source == 1) {
            insert_int();
        }

        if (hdr.int_md.hop_count < hdr.int_md.max_hops &&
                hdr.int_md.hop_count < INT_MAX_HOPS_B) {
            push_hop();
            pushed = true;
        } else {
            hdr.int_md.e = 1;
        }

        if (int_sink.apply().hit) {

            /* Summary over the stack; the local hop is included even when it could not be
             * pushed (max hops reached). */
            bit<32> path_latency = 0;
            bit<32> max_qdepth = 0;
            INT_FOR_EACH_HOP(INT_ACC_HOP)
            if (!pushed) {
                path_latency = path_latency + (bit<32>)(standard_metadata.egress_global_timestamp -
                                                        standard_metadata.ingress_global_timestamp);
                if ((bit<32>)standard_metadata.enq_qdepth > max_qdepth) {
                    max_qdepth = (bit<32>)standard_metadata.enq_qdepth;
                }
            }

            /* Summary-only packets skip the save and the clone (one condition more
             * for INT packets at the sink; no flag, no `return`). */
            if (hdr.int_md.no_report == 0) {
                save_for_report();
                clone_preserving_field_list(CloneType.E2E, INT_REPORT_SESSION, INT_REPORT_FL);
            }

            /* Strip: shim + metadata + hop_count records out, summary in. */
            bit<16> int_bytes = INT_SHIM_MD_BYTES +
                                (bit<16>)hdr.int_md.hop_count * INT_HOP_BYTES;
            hdr.int_summary.setValid();
            hdr.int_summary.hop_count = hdr.int_md.hop_count;
            hdr.int_summary.max_qdepth = max_qdepth[23:0];   // enq_qdepth is 19 bits
            hdr.int_summary.path_latency = path_latency;
            hdr.int_shim.setInvalid();
            hdr.int_md.setInvalid();
            hdr.int_hops.pop_front(INT_MAX_HOPS);
            hdr.ipv4.dscp = DSCP_INT_SUMMARY;
            hdr.ipv4.total_len = hdr.ipv4.total_len - int_bytes + INT_SUMMARY_BYTES;
            hdr.udp.length = hdr.udp.length - int_bytes + INT_SUMMARY_BYTES;
            hdr.udp.checksum = 0;
        }
    }
}

/* The clone's egress pass at CPU_PORT: rebuild the INT stack from meta.int_saved and
 * prepend the packet_in header (see the quirk above). */
control IntReport(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = INT_SAVED_INGRESS_PORT;
        hdr.packet_in.egress_port = INT_SAVED_EGRESS_PORT;
        hdr.packet_in.switch_id = INT_SAVED_SWITCH_ID;
        hdr.packet_in.reason = PACKET_IN_REASON_INT_REPORT;
        hdr.packet_in.rsvd = 0;
        if (!hdr.int_summary.isValid()) {
            return;   // not a sink clone; nothing to rebuild
        }
        bit<16> int_bytes = INT_SHIM_MD_BYTES +
                            (bit<16>)INT_SAVED_HOP_COUNT * INT_HOP_BYTES;
        hdr.int_summary.setInvalid();
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_P4CC;
        hdr.int_shim.rsvd0 = 0;
        hdr.int_shim.length = (bit<8>)(int_bytes >> 2);
        hdr.int_shim.rsvd1 = 0;
        hdr.int_shim.orig_dscp = INT_SAVED_ORIG_DSCP;
        hdr.int_shim.rsvd2 = 0;
        hdr.int_md.setValid();
        hdr.int_md.version = INT_VERSION;
        hdr.int_md.e = INT_SAVED_E;
        hdr.int_md.no_report = 0;   // only packets without no_report are cloned
        hdr.int_md.rsvd0 = 0;
        hdr.int_md.hop_count = INT_SAVED_HOP_COUNT;
        hdr.int_md.max_hops = INT_SAVED_MAX_HOPS;
        hdr.int_md.hop_words = INT_HOP_WORDS;
        hdr.int_md.instructions = INT_INSTRUCTIONS;
        hdr.int_md.rsvd1 = 0;
        INT_FOR_EACH_HOP(INT_RESTORE_HOP)
        hdr.ipv4.dscp = DSCP_INT;
        hdr.ipv4.total_len = hdr.ipv4.total_len - INT_SUMMARY_BYTES + int_bytes;
        hdr.udp.length = hdr.udp.length - INT_SUMMARY_BYTES + int_bytes;
        hdr.udp.checksum = 0;
    }
}

#endif  // P4CC_INT_P4
