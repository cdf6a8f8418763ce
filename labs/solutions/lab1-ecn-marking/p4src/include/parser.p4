/* p4cc data plane: parser and checksum verification.
 *
 * Ethernet -> IPv4 -> TCP | UDP (L4 only for IHL 5 and the first fragment).  After UDP:
 *   DSCP == DSCP_INT          -> INT shim, metadata header, md.hop_count hop records
 *   DSCP == DSCP_INT_SUMMARY  -> INT summary
 * and nothing else.  Whatever follows (for p4cc's transport on UDP port 4791, the
 * RoCEv2 BTH) is payload: no table or action reads it, and every parser state and
 * header costs BMv2 work on every packet (docs/dataplane.md).  The deparser emits the
 * parsed headers and BMv2 appends the unparsed bytes unchanged.
 */
#ifndef P4CC_PARSER_P4
#define P4CC_PARSER_P4

parser P4ccParser(packet_in pkt,
                  out headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    state start {
        /* Frames from the CPU port carry no packet_out header: p4cc sends nothing
         * from the controller, so they parse like any other frame. */
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        /* L4 only for IHL 5 and the first fragment. */
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IPPROTO_TCP): parse_tcp;
            (5, 0, IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }

    /* The 5-tuple's ports go to metadata here: a parser assignment is much cheaper on
     * BMv2 than the ingress conditions + actions that did it before (docs/dataplane.md). */
    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.l4_sport = hdr.tcp.src_port;
        meta.l4_dport = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_sport = hdr.udp.src_port;
        meta.l4_dport = hdr.udp.dst_port;
        transition select(hdr.ipv4.dscp) {
            DSCP_INT: parse_int_shim;
            DSCP_INT_SUMMARY: parse_int_summary;
            default: accept;
        }
    }

    state parse_int_shim {
        pkt.extract(hdr.int_shim);
        pkt.extract(hdr.int_md);
        meta.int_hops_left = hdr.int_md.hop_count;
        /* A stack longer than INT_MAX_HOPS cannot come from a p4cc source (max_hops is
         * clamped); extracting it would overflow the header stack.  verify() stops the
         * parser with an error; BMv2 (v1model) still runs ingress, with
         * standard_metadata.parser_error set, and ingress drops the packet. */
        verify(hdr.int_md.hop_count <= INT_MAX_HOPS_B, error.StackOutOfBounds);
        transition select(hdr.int_md.hop_count) {
            0: accept;
            default: parse_int_hop;
        }
    }

    /* Parser loop: one hop record per iteration (hop_count of them). */
    state parse_int_hop {
        pkt.extract(hdr.int_hops.next);
        meta.int_hops_left = meta.int_hops_left - 1;
        transition select(meta.int_hops_left) {
            0: accept;
            default: parse_int_hop;
        }
    }

    state parse_int_summary {
        pkt.extract(hdr.int_summary);
        transition accept;
    }
}

/* Verify the IPv4 header checksum; BMv2 sets standard_metadata.checksum_error, ingress drops. */
control P4ccVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif  // P4CC_PARSER_P4
