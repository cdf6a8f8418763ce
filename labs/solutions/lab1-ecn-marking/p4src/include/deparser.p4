/* p4cc data plane: checksum update and deparser.
 *
 * BMv2 recomputes the IPv4 checksum as part of deparsing (after egress), so every
 * change made in ingress/egress (TTL, ECN, DSCP, total length) is covered.  UDP
 * checksums are not computed: INT changes set them to 0 (see int.p4).
 */
#ifndef P4CC_DEPARSER_P4
#define P4CC_DEPARSER_P4

control P4ccComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

/* Emits valid headers in wire order; packet_in only on INT report clones.  BMv2 appends
 * the bytes the parser did not extract (the UDP/TCP payload, e.g. a RoCEv2 BTH). */
control P4ccDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.int_shim);
        pkt.emit(hdr.int_md);
        pkt.emit(hdr.int_hops);
        pkt.emit(hdr.int_summary);
    }
}

#endif  // P4CC_DEPARSER_P4
