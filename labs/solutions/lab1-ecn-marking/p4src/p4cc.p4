/* p4cc: the P4_16 v1model program for simple_switch_grpc (BMv2).
 *
 * IPv4 LPM/ECMP forwarding, RED/ECN marking with run-time thresholds, per-port queue
 * statistics and PET flow features in registers, and p4cc's INT (hop records over UDP,
 * report to the controller, summary to the receiver).  Names and formats shared with
 * the control plane are fixed in docs/architecture.md; design notes and the target
 * quirks that shaped them are in docs/dataplane.md.
 *
 * Build: python -m p4cc.controlplane.p4build  (p4c --target bmv2 --arch v1model).
 * Sections in order: headers, parser, ingress, egress, deparser.
 */
#include <core.p4>
#include <v1model.p4>

/* ---- headers */
#include "include/headers.p4"

/* ---- parser */
#include "include/parser.p4"

/* ---- ingress */
#include "include/forwarding.p4"
#include "include/int_source.p4"

control P4ccIngress(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    Forwarding() fwd;
    IntSource() int_src;

    apply {
        /* Only well-formed IPv4 without options is forwarded (hosts use static ARP,
         * so nothing else is needed); parser errors include INT stacks that are too
         * long for the header stack. */
        /* TTL 0 or 1 cannot be forwarded (no ICMP time-exceeded is generated).  One
         * condition and no `return` (p4c turns a return into a flag and conditions). */
        if (standard_metadata.parser_error != error.NoError || standard_metadata.checksum_error == 1 ||
                !hdr.ipv4.isValid() || hdr.ipv4.ihl != 5 || hdr.ipv4.ttl <= 1) {
            mark_to_drop(standard_metadata);
        } else {
            fwd.apply(hdr, meta, standard_metadata);
            int_src.apply(hdr, meta, standard_metadata);
        }
    }
}

/* ---- egress */
#include "include/ecn.p4"
#include "include/telemetry.p4"
#include "include/int.p4"

control P4ccEgress(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    Ecn() ecn;
    Telemetry() telemetry;
    IntEgress() int_egress;
    IntReport() int_report;

    apply {
        if (standard_metadata.instance_type == PKT_INSTANCE_EGRESS_CLONE) {
            /* INT report on its way to CPU_PORT: no marking, counting or INT push. */
            int_report.apply(hdr, meta, standard_metadata);
        } else {
            /* Mark first so that port_marked counts, and an INT report carries, the final ECN. */
            ecn.apply(hdr, meta, standard_metadata);
            telemetry.apply(hdr, meta, standard_metadata);
            if (meta.int_source == 1 || hdr.int_shim.isValid()) {
                int_egress.apply(hdr, meta, standard_metadata);
            }
        }
    }
}

/* ---- deparser */
#include "include/deparser.p4"

V1Switch(P4ccParser(),
         P4ccVerifyChecksum(),
         P4ccIngress(),
         P4ccEgress(),
         P4ccComputeChecksum(),
         P4ccDeparser()) main;
