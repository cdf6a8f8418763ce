/* l3min: the smallest IPv4 router p4cc compares p4cc.p4 against (forwarding cost of
 * the full program vs. plain LPM on the same BMv2 build; docs/benchmarks.md).
 *
 * Same control-plane names as p4cc.p4 for forwarding (ipv4_lpm, set_nhop(port, dmac,
 * smac), default drop) so the same route code programs both; nothing else: no ECMP,
 * ECN, counters, registers or INT.  Sections: headers, parser, ingress, egress, deparser.
 */
#include <core.p4>
#include <v1model.p4>

/* ---- headers */
typedef bit<9>  port_t;     // v1model port number
typedef bit<48> mac_t;
const bit<16> ETHERTYPE_IPV4 = 0x0800;

/* Ethernet II. */
header ethernet_t {
    mac_t   dst_addr;
    mac_t   src_addr;
    bit<16> ether_type;
}

/* IPv4 without options (RFC 791). */
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
    bit<32> src_addr;
    bit<32> dst_addr;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

struct metadata_t { }

/* ---- parser */
parser L3Parser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

/* No checksum verification: the cheapest correct router trusts its hosts. */
control L3VerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* ---- ingress */
control L3Ingress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_nhop(port_t port, mac_t dmac, mac_t smac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_nhop; drop; }
        default_action = drop();
        size = 1024;
    }

    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

/* ---- egress */
control L3Egress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

/* ---- deparser */
control L3ComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control L3Deparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(L3Parser(), L3VerifyChecksum(), L3Ingress(), L3Egress(),
         L3ComputeChecksum(), L3Deparser()) main;
