/* p4cc data plane, egress: per-port queue statistics and PET's flow features.
 *
 * Epoch telemetry (issue 10; the control plane's side is p4cc/controlplane/epoch.py): the
 * control plane never resets the statistics below.  It reads them over Thrift (BMv2 does
 * not implement P4Runtime register access, REFERENCE §1) and writes ONE cell, tel_epoch,
 * once per poll; the poller turns them into p4cc.controlplane.records.PortTelemetry.
 *
 *  - q_enq_sum, q_enq_cnt, q_sojourn_sum are cumulative (the poller takes differences,
 *    as it does for the counters);
 *  - q_enq_max and the PET bitmaps are banked by epoch parity (a packet of epoch e
 *    writes bank e & 1) and every cell carries the epoch that last wrote it in its
 *    upper 32 bits (tag ++ value: one register access, not a second tag register).  A
 *    packet that finds another epoch's tag restarts the cell (max = its depth, bits =
 *    its bit), so cells are restarted by the first packet of an epoch, not by the
 *    control plane.  After writing tel_epoch = e + 1 the poller reads bank e & 1 at
 *    leisure: nothing writes it during epoch e + 1, and a cell whose tag is not e saw no
 *    packet in epoch e (it reads as 0);
 *  - the count-min sketch rows are tagged the same way with the sketch window w, the
 *    upper half of tel_epoch (window ++ epoch, one cell): the poller moves w on once per
 *    sketch window with its epoch write, and the first packet of a window restarts the
 *    flow's cells in both rows.  The control plane resets no register at all.
 *
 * A bitmap cell holds 32 of the port's 256 bits (8 cells per port; 64-bit words would
 * leave no room for the tag, and BMv2's Thrift API carries register values as i64, so
 * wider cells cannot be read); bit b of the bitmap is bit b % 32 of cell b / 32, the
 * same bit positions as the read-and-reset program's 64-bit words, which the poller
 * rebuilds by joining cells 2w and 2w + 1 (epoch.join_cells).
 *
 * Compiled with -DP4CC_READ_RESET the file is the previous read-and-reset program
 * (single bank, no tags, no tel_epoch, 64-bit bitmap words); the live equivalence test
 * (tests/test_epoch_live.py) runs both on the same packets.  The poller picks the
 * protocol from the register names (p4cc.controlplane.epoch.is_epoch_program).
 *
 * Concurrency (BMv2 target quirk): simple_switch runs one ingress thread and 4 egress
 * threads; a packet for port p is handled by egress thread p % 4.  Registers indexed by
 * the egress port (q_*, and the bitmap cells of the port) are therefore written by one
 * thread only and are safe (index 0, shared by all ports above MAX_PORT_INDEX, is
 * protected by the per-action lock described next).  The count-min rows
 * flow_bytes_r0/r1 are indexed by flow hash, so packets of different ports (different
 * threads) can hit the same cell at the same time, and every thread reads tel_epoch.
 * BMv2 locks every register array an action touches for the duration of that action
 * (bm_sim RegisterSync), and a Thrift register write takes the same lock, so each
 * read-add-write below sits in ONE action (update_all): no update is lost, and a packet
 * that read epoch e has written its bank before the control plane's write of e + 1
 * returns.  A packet reads e and w from one cell, so both sketch rows change window
 * for it at once.  (The read-and-reset build resets the rows with two Thrift calls, and
 * the bytes that arrive between them count in the row reset first and are lost from
 * the other for that window: its estimate can be low by them.)
 */
#ifndef P4CC_TELEMETRY_P4
#define P4CC_TELEMETRY_P4

control Telemetry(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

#ifdef P4CC_READ_RESET
/* ---- the read-and-reset program (the control plane resets the registers every poll) */
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

#else
/* ---- the epoch program */
    /* The sketch window's bits of tel_epoch and of a sketch cell, compared and written in
     * place (no shifts: every op of an expression is evaluated on BMv2 per packet). */
    const bit<64> WINDOW_MASK = 0xFFFFFFFF00000000;
    /* The epoch word, written by the control plane once per poll: sketch window w
     * (63:32) ++ epoch e (31:0).  e -> e + 1 at every poll (32 bit: 136 years at one poll
     * per second), bank = e & 1; w -> w + 1 at the first poll after each sketch window
     * (TelemetryPoller.sketch_window_s).  One cell, so a packet sees e and w of the same
     * poll, and one Thrift write moves both. */
    register<bit<64>>(1) tel_epoch;
    /* Cumulative sum of enq_qdepth (packets) over packets sent by the port. */
    register<bit<64>>(MAX_PORTS) q_enq_sum;
    /* Cumulative number of packets summed in q_enq_sum (mean depth = sum / cnt). */
    register<bit<64>>(MAX_PORTS) q_enq_cnt;
    /* Cumulative sum of deq_timedelta (µs in the queue). */
    register<bit<64>>(MAX_PORTS) q_sojourn_sum;
    /* Maximum enq_qdepth (packets) of the epoch: cell bank * MAX_PORTS + port holds
     * tag (63:32) ++ max (31:0). */
    register<bit<64>>(MAX_PORTS * 2) q_enq_max;
    /* PET incast degree: 256-bit bitmap per port of hash(ipv4 src) in 8 cells of tag
     * (63:32) ++ 32 bits, cell bank * TEL_BITMAP_CELLS + port * 8 + bit / 32; the number
     * of set bits estimates the number of senders toward the port. */
    register<bit<64>>(TEL_BITMAP_CELLS * 2) incast_bits;
    /* PET flow count: 256-bit bitmap per port of hash(5-tuple), same layout. */
    register<bit<64>>(TEL_BITMAP_CELLS * 2) flow_bits;
    /* PET elephant count: as flow_bits, only flows whose sketch estimate reached
     * switch_config.elephant_bytes (written with flow_bits, same index and tag). */
    register<bit<64>>(TEL_BITMAP_CELLS * 2) elephant_bits;
    /* Count-min sketch of bytes per flow (2 rows, disjoint bits of one CRC-32): cell
     * window tag w (63:32) ++ bytes (31:0).  A packet that finds another window's tag
     * restarts the cell, so the estimate is the flow's bytes since its sketch window
     * started, without resets from the control plane (an elephant must be able to send
     * elephant_bytes in a window, which is therefore much longer than one poll). */
    register<bit<64>>(SKETCH_ROWS_SIZE) flow_bytes_r0;
    register<bit<64>>(SKETCH_ROWS_SIZE) flow_bytes_r1;

    /* Everything per packet in ONE action, applied to every normal egress packet
     * without a condition (see the read-and-reset version above for why).  The epoch
     * restarts are branch-free ternaries inside the written value: p4c 1.2.4.8 rejects a
     * conditional register access inside an action on BMv2, and a separate condition is
     * a pipeline step.  The cell indices are locals: p4c copy-propagates an index
     * computed in the same action into every register call (one temporary per call)
     * whether it is a local or a metadata field, and a metadata field would add a dead
     * assignment (meta.tel_si/tel_fi, which the read-and-reset version still sets). */
    action update_all() {
        bit<64> ew;         // the epoch word: w (63:32) ++ e (31:0)
        bit<64> v64;
        bit<64> c;          // a tagged cell: tag (63:32) ++ value (31:0)
        bit<64> s0;         // the flow's sketch cells, tagged with their window
        bit<64> s1;
        bit<8>  src_hash;   // bit position of hash(ipv4 src) in the 256-bit bitmap
        bit<32> fh;         // crc32(5-tuple): [11:0] row 0, [23:12] row 1, [31:24] flow bit

        tel_epoch.read(ew, 0);
        bit<32> e = ew[31:0];
        bit<64> wt = ew & WINDOW_MASK;   // the window, in place: a sketch cell's tag bits

        /* queue statistics: cumulative */
        q_enq_sum.read(v64, meta.port_idx);
        q_enq_sum.write(meta.port_idx, v64 + (bit<64>)standard_metadata.enq_qdepth);
        q_enq_cnt.read(v64, meta.port_idx);
        q_enq_cnt.write(meta.port_idx, v64 + 1);
        q_sojourn_sum.read(v64, meta.port_idx);
        q_sojourn_sum.write(meta.port_idx, v64 + (bit<64>)standard_metadata.deq_timedelta);

        /* maximum of the epoch: this packet's depth if the cell is another epoch's */
        bit<32> depth = (bit<32>)standard_metadata.enq_qdepth;
        bit<32> pi = meta.port_idx + ((e & 1) << 6);             // bank * MAX_PORTS
        q_enq_max.read(c, pi);
        q_enq_max.write(pi, e ++ ((c[63:32] != e || c[31:0] < depth) ? depth : c[31:0]));

        /* incast degree: set bit hash(src) of the port's bitmap (cell = bit / 32) */
        hash(src_hash, HashAlgorithm.crc16, (bit<8>)0, { hdr.ipv4.src_addr }, (bit<16>)256);
        bit<32> si = ((e & 1) << 9) + (meta.port_idx << 3) + (bit<32>)src_hash[7:5];
        incast_bits.read(c, si);
        incast_bits.write(si, e ++ (((c[63:32] == e) ? c[31:0] : 0)
                                             | ((bit<32>)1 << src_hash[4:0])));

        /* ONE hash of the 5-tuple serves the flow bitmaps and both sketch rows: three
         * disjoint bit fields of a CRC-32 (each hash call costs a pipeline primitive and
         * a field-list serialisation on BMv2).  Two flows collide in both rows only if
         * their CRCs agree in 24 bits, as for two independent 12-bit hashes. */
        hash(fh, HashAlgorithm.crc32, (bit<32>)0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_sport, meta.l4_dport }, (bit<64>)0x100000000);
        bit<32> fi = ((e & 1) << 9) + (meta.port_idx << 3) + (bit<32>)fh[31:29];
        bit<32> fbit = (bit<32>)1 << fh[28:24];
        flow_bits.read(c, fi);
        flow_bits.write(fi, e ++ (((c[63:32] == e) ? c[31:0] : 0) | fbit));

        /* count-min sketch: two rows, each cell restarted by the first packet of a
         * window (tag != w).  32 bits hold 4 GB per sketch window.  The cell is updated
         * in place (s0 = f(s0)): p4c keeps that one assignment, where a new local would
         * be copied into every later use and evaluated again in each (BMv2 evaluates
         * expressions op by op on arbitrary-precision values: 96 more ops per packet,
         * ~10 % more CPU per packet, in the first version of this code). */
        flow_bytes_r0.read(s0, (bit<32>)fh[11:0]);
        s0 = wt | (bit<64>)((((s0 & WINDOW_MASK) == wt) ? s0[31:0] : 0)
                            + standard_metadata.packet_length);
        flow_bytes_r0.write((bit<32>)fh[11:0], s0);
        flow_bytes_r1.read(s1, (bit<32>)fh[23:12]);
        s1 = wt | (bit<64>)((((s1 & WINDOW_MASK) == wt) ? s1[31:0] : 0)
                            + standard_metadata.packet_length);
        flow_bytes_r1.write((bit<32>)fh[23:12], s1);

        /* elephant: the flow's bit once min(c0, c1) >= elephant_bytes (branch-free) */
        bit<32> est = (s0[31:0] < s1[31:0]) ? s0[31:0] : s1[31:0];
        elephant_bits.read(c, fi);
        elephant_bits.write(fi, e ++ (((c[63:32] == e) ? c[31:0] : 0)
                                               | ((est >= meta.elephant_bytes) ? fbit : 0)));
    }
#endif  // P4CC_READ_RESET

    apply {
        update_all();
    }
}

#endif  // P4CC_TELEMETRY_P4
