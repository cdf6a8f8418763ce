/* p4cc data plane, egress: per-port queue statistics and PET's flow features.
 *
 * All registers are read and reset by the control plane over Thrift (BMv2 does not
 * implement P4Runtime register access, REFERENCE §1); the poller turns them into
 * p4cc.controlplane.records.PortTelemetry.
 *
 * Concurrency (BMv2 target quirk): simple_switch runs one ingress thread and 4 egress
 * threads; a packet for port p is handled by egress thread p % 4.  Registers indexed by
 * the egress port (q_*, incast_bits, flow_bits, elephant_bits at port*4+word) are
 * therefore written by one thread only and are safe (index 0, shared by all ports above
 * MAX_PORT_INDEX, is protected by the per-action lock described next).  The count-min
 * rows flow_bytes_r0/r1 are indexed by flow hash, so packets of different ports
 * (different threads) can hit the same cell at the same time.  BMv2 locks every
 * register array an action touches for the duration of that action (bm_sim
 * RegisterSync), so each read-add-write below sits in ONE action (update_all) and no
 * update is lost.  What can still interleave is the control plane's reset of the
 * sketch (two Thrift calls, one per row) with packets: the bytes that arrive between
 * the two calls are counted in the row reset first and lost from the other, so for
 * that sketch window the estimate (the min of the two rows) can be too low by them,
 * which only delays an elephant classification.
 */
#ifndef P4CC_TELEMETRY_P4
#define P4CC_TELEMETRY_P4

control Telemetry(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    /* Sum of enq_qdepth (packets) over packets sent by the port since the last reset. */
    register<bit<64>>(MAX_PORTS) q_enq_sum;
    /* Number of packets summed in q_enq_sum (mean depth = sum / cnt). */
    register<bit<64>>(MAX_PORTS) q_enq_cnt;
    /* Maximum enq_qdepth (packets) since the last reset. */
    register<bit<32>>(MAX_PORTS) q_enq_max;
    /* Sum of deq_timedelta (µs in the queue) since the last reset. */
    register<bit<64>>(MAX_PORTS) q_sojourn_sum;
    /* PET incast degree: 256-bit bitmap per port of hash(ipv4 src), word at port*4+w;
     * the number of set bits estimates the number of senders toward the port. */
    register<bitmap_word_t>(BITMAP_ENTRIES) incast_bits;
    /* PET flow count: 256-bit bitmap per port of hash(5-tuple). */
    register<bitmap_word_t>(BITMAP_ENTRIES) flow_bits;
    /* PET elephant count: as flow_bits, only flows whose sketch estimate reached
     * switch_config.elephant_bytes. */
    register<bitmap_word_t>(BITMAP_ENTRIES) elephant_bits;
    /* Count-min sketch of bytes per flow (2 rows, disjoint bits of one CRC-32), reset
     * by the control plane once per sketch window (TelemetryPoller.sketch_window_s,
     * 1 s by default), not at every poll like the registers above: the estimate is the
     * flow's bytes since the window started. */
    register<bit<32>>(SKETCH_ROWS_SIZE) flow_bytes_r0;
    register<bit<32>>(SKETCH_ROWS_SIZE) flow_bytes_r1;

    /* Everything per packet in ONE action, applied to every normal egress packet
     * without a condition: BMv2 runs each action atomically with respect to the
     * register arrays it touches (see above), and every extra action or condition is a
     * pipeline step that costs BMv2 throughput (docs/dataplane.md).  Ports above
     * MAX_PORT_INDEX (never a p4cc data port) are accounted at the unused index 0
     * (meta.port_idx, computed once in ingress; indices are metadata fields, not
     * locals, so that p4c does not recompute them in a primitive per access). */
    action update_all() {
        bit<64> v64;
        bit<32> v32;
        bitmap_word_t w;
        bit<8>  src_hash;   // bit position of hash(ipv4 src) in the 256-bit bitmap
        bit<32> fh;         // crc32(5-tuple): [11:0] row 0, [23:12] row 1, [31:24] flow bit
        bit<32> c0;
        bit<32> c1;

        /* queue statistics */
        q_enq_sum.read(v64, meta.port_idx);
        q_enq_sum.write(meta.port_idx, v64 + (bit<64>)standard_metadata.enq_qdepth);
        q_enq_cnt.read(v64, meta.port_idx);
        q_enq_cnt.write(meta.port_idx, v64 + 1);
        q_enq_max.read(v32, meta.port_idx);
        q_enq_max.write(meta.port_idx, (v32 > (bit<32>)standard_metadata.enq_qdepth)
                              ? v32 : (bit<32>)standard_metadata.enq_qdepth);
        q_sojourn_sum.read(v64, meta.port_idx);
        q_sojourn_sum.write(meta.port_idx, v64 + (bit<64>)standard_metadata.deq_timedelta);

        /* incast degree: set bit hash(src) of the port's bitmap (word = bit / 64) */
        hash(src_hash, HashAlgorithm.crc16, (bit<8>)0, { hdr.ipv4.src_addr }, (bit<16>)256);
        meta.tel_si = meta.port_idx * BITMAP_WORDS + (bit<32>)(src_hash >> 6);
        incast_bits.read(w, meta.tel_si);
        incast_bits.write(meta.tel_si, w | ((bitmap_word_t)1 << (src_hash & 63)));

        /* ONE hash of the 5-tuple serves the flow bitmaps and both sketch rows: three
         * disjoint bit fields of a CRC-32 (each hash call costs a pipeline primitive and
         * a field-list serialisation on BMv2).  Two flows collide in both rows only if
         * their CRCs agree in 24 bits, as for two independent 12-bit hashes. */
        hash(fh, HashAlgorithm.crc32, (bit<32>)0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_sport, meta.l4_dport }, (bit<64>)0x100000000);
        meta.tel_fi = meta.port_idx * BITMAP_WORDS + (bit<32>)fh[31:30];
        bitmap_word_t fbit = (bitmap_word_t)1 << fh[29:24];
        flow_bits.read(w, meta.tel_fi);
        flow_bits.write(meta.tel_fi, w | fbit);

        /* count-min sketch: two rows.  32 bits hold 4 GB per sketch window. */
        flow_bytes_r0.read(c0, (bit<32>)fh[11:0]);
        c0 = c0 + standard_metadata.packet_length;
        flow_bytes_r0.write((bit<32>)fh[11:0], c0);
        flow_bytes_r1.read(c1, (bit<32>)fh[23:12]);
        c1 = c1 + standard_metadata.packet_length;
        flow_bytes_r1.write((bit<32>)fh[23:12], c1);

        /* elephant: the flow's bit once min(c0, c1) >= elephant_bytes (branch-free) */
        bit<32> est = (c0 < c1) ? c0 : c1;
        elephant_bits.read(w, meta.tel_fi);
        elephant_bits.write(meta.tel_fi, w | ((est >= meta.elephant_bytes) ? fbit : 0));
    }

    apply {
        update_all();
    }
}

#endif  // P4CC_TELEMETRY_P4
