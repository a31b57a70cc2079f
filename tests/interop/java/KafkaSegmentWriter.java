import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.RecordBatch;

/**
 * Writes a partition directory with Apache Kafka's own code, and says what it wrote.
 *
 * <p>usage: {@code KafkaSegmentWriter PARENT_DIR TOPIC INDEX_INTERVAL_BYTES EXPECTED_JSONL [BATCHES_PER_SEGMENT]}
 *
 * <p>Creates {@code PARENT_DIR/TOPIC-0/}. Batches are built with {@link MemoryRecordsBuilder} (and
 * {@link MemoryRecords#withEndTransactionMarker} for markers) and appended with {@link FileRecords};
 * a new segment starts every {@code BATCHES_PER_SEGMENT} batches. Each segment's {@code .index} and
 * {@code .timeindex} are the entries Kafka's {@code LogSegment} builds with {@code index.interval.bytes}
 * = {@code INDEX_INTERVAL_BYTES}, as for a closed segment (see {@link KafkaSegmentReader#kafkaIndexes}).
 *
 * <p>{@code EXPECTED_JSONL} gets one JSON line per record, in the shape {@link KafkaSegmentReader}
 * prints, computed from what was given to the builders (offsets, timestamps, bytes, batch fields),
 * not read back from the files.
 */
public final class KafkaSegmentWriter {
  static final long T0 = 1_700_000_000_000L;
  static final Header[] NO_HEADERS = new Header[0];

  private KafkaSegmentWriter() {}

  /** One record as given to the builder. */
  record Rec(long offset, long timestamp, byte[] key, byte[] value, Header[] headers) {}

  /** One batch: the built bytes and the fields it was built with. */
  record Planned(MemoryRecords records, List<Rec> recs, String codec, TimestampType timestampType,
      long logAppendTime, long producerId, short producerEpoch, int baseSequence, boolean transactional,
      boolean control, int leaderEpoch, EndTransactionMarker marker) {}

  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: KafkaSegmentWriter PARENT_DIR TOPIC INDEX_INTERVAL_BYTES EXPECTED_JSONL"
          + " [BATCHES_PER_SEGMENT]");
      System.exit(2);
    }
    File dir = new File(args[0], args[1] + "-0");
    int interval = Integer.parseInt(args[2]);
    File expected = new File(args[3]);
    int perSegment = args.length > 4 ? Integer.parseInt(args[4]) : Integer.MAX_VALUE;
    if (!dir.mkdirs()) {
      throw new IOException(dir + " exists already or cannot be created");
    }
    List<Planned> batches = plan();
    int segments = 0;
    try (PrintStream out = new PrintStream(new FileOutputStream(expected), false, StandardCharsets.UTF_8)) {
      for (int first = 0; first < batches.size(); first += perSegment) {
        List<Planned> part = batches.subList(first, Math.min(batches.size(), first + perSegment));
        writeSegment(dir, part, interval, out);
        segments++;
      }
    }
    Planned last = batches.get(batches.size() - 1);
    System.out.println("wrote " + batches.size() + " batches in " + segments + " segments to " + dir
        + ", next offset " + (last.recs().get(last.recs().size() - 1).offset() + 1));
  }

  static void writeSegment(File dir, List<Planned> part, int interval, PrintStream expected) throws Exception {
    long base = part.get(0).recs().get(0).offset();
    String stem = String.format("%020d", base);
    File log = new File(dir, stem + ".log");
    int position = 0;
    try (FileRecords fr = FileRecords.open(log)) {
      for (Planned p : part) {
        int written = fr.append(p.records());
        if (written != p.records().sizeInBytes()) {
          throw new IOException("short append: " + written + " of " + p.records().sizeInBytes() + " bytes");
        }
        printExpected(expected, log.getName(), position, p);
        position += written;
      }
      fr.flush();
    }
    List<List<long[]>> indexes = KafkaSegmentReader.kafkaIndexes(log, interval);
    ByteBuffer index = ByteBuffer.allocate(8 * indexes.get(0).size());
    for (long[] e : indexes.get(0)) {
      index.putInt((int) (e[0] - base)).putInt((int) e[1]);
    }
    ByteBuffer timeIndex = ByteBuffer.allocate(12 * indexes.get(1).size());
    for (long[] e : indexes.get(1)) {
      timeIndex.putLong(e[0]).putInt((int) (e[1] - base));
    }
    try (OutputStream o = new FileOutputStream(new File(dir, stem + ".index"))) {
      o.write(index.array());
    }
    try (OutputStream o = new FileOutputStream(new File(dir, stem + ".timeindex"))) {
      o.write(timeIndex.array());
    }
  }

  /** The records of one batch as intended; the CRC and size are the only values taken from the build. */
  static void printExpected(PrintStream out, String file, int position, Planned p) {
    RecordBatch built = p.records().batches().iterator().next();
    boolean logAppendTime = p.timestampType() == TimestampType.LOG_APPEND_TIME;
    long maxTs = RecordBatch.NO_TIMESTAMP;
    for (Rec r : p.recs()) {
      maxTs = Math.max(maxTs, r.timestamp());
    }
    if (logAppendTime) {
      maxTs = p.logAppendTime();
    }
    List<Rec> recs = p.recs();
    String batch = KafkaSegmentReader.batchJson(position, p.records().sizeInBytes(), recs.get(0).offset(),
        recs.get(recs.size() - 1).offset(), recs.size(), p.codec(), p.timestampType().name, maxTs, p.producerId(),
        p.producerEpoch(), p.baseSequence(), p.transactional(), p.control(), p.leaderEpoch(), built.checksum());
    String marker = p.marker() == null ? null : KafkaSegmentReader.markerJson(p.marker());
    for (Rec r : recs) {
      out.println(KafkaSegmentReader.recordJson(file, r.offset(), logAppendTime ? maxTs : r.timestamp(), r.key(),
          r.value(), r.headers(), batch, marker));
    }
  }

  // -- what gets written -----------------------------------------------------------------------

  static List<Planned> plan() {
    List<Planned> out = new ArrayList<>();
    long[] off = {0};
    // One batch per codec, each with the awkward cases.
    String[] codecs = {"none", "gzip", "snappy", "lz4", "zstd"};
    for (String codec : codecs) {
      List<Rec> recs = new ArrayList<>();
      recs.add(rec(off, T0 + off[0] * 10, b("key-" + codec), b("value-" + codec), hdrs("h1", "v1", "h2", "v2")));
      recs.add(rec(off, T0 + off[0] * 10 - 25, null, b("null-key-" + codec), NO_HEADERS)); // timestamp goes back
      recs.add(rec(off, T0 + off[0] * 10, b("tomb-" + codec), null, hdrs("nullhdr", null))); // tombstone
      recs.add(rec(off, T0 + off[0] * 10, new byte[0], new byte[0], hdrs("empty", ""))); // empty, not null
      recs.add(rec(off, T0 + off[0] * 10, new byte[] {(byte) 0xff, 0, (byte) 0xfe},
          new byte[] {(byte) 0xc3, 0x28, (byte) 0xa0},
          new Header[] {new RecordHeader("\u043a\u043b\u044e\u0447-\u2713\ud83d\ude00", new byte[] {(byte) 0xff})}));
      recs.add(rec(off, T0 + off[0] * 10, b("big-" + codec), big(codec.hashCode()), NO_HEADERS)); // many blocks
      recs.add(rec(off, T0 + off[0] * 10, b("dup-" + codec), b("x"), hdrs("a", "1", "a", "2", "b", "3")));
      out.add(build(codec, TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP, RecordBatch.NO_PRODUCER_ID,
          RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, 0, recs));
    }
    // Idempotent producer: two batches of one producer, sequences continuing.
    out.add(build("none", TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP, 1000L, (short) 5, 0, false, 7,
        simple(off, 3, "idem", T0 + 500_000L)));
    out.add(build("zstd", TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP, 1000L, (short) 5, 3, false, 7,
        simple(off, 2, "idem2", T0 + 500_100L)));
    // LogAppendTime, compressed and not: every record reads as the batch's append time.
    out.add(build("gzip", TimestampType.LOG_APPEND_TIME, T0 + 999_999L, RecordBatch.NO_PRODUCER_ID,
        RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, 7, simple(off, 2, "lat", T0 + 600_000L)));
    out.add(build("none", TimestampType.LOG_APPEND_TIME, T0 + 1_000_001L, RecordBatch.NO_PRODUCER_ID,
        RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, 7, simple(off, 2, "lat2", T0 + 600_100L)));
    // A compacted-looking batch: offsets inside it skip, then a gap before the next batch.
    List<Rec> sparse = new ArrayList<>();
    for (int delta : new int[] {0, 2, 5}) {
      long o = off[0] + delta;
      sparse.add(new Rec(o, T0 + 700_000L + delta, b("sparse-k" + delta), b("sparse-v" + delta), NO_HEADERS));
    }
    off[0] += 6 + 10;
    out.add(build("none", TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP, RecordBatch.NO_PRODUCER_ID,
        RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, 7, sparse));
    // A committed and an aborted transaction, each closed by its control batch.
    out.add(build("lz4", TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP, 2000L, (short) 1, 0, true, 7,
        simple(off, 2, "txn", T0 + 800_000L)));
    out.add(marker(off, T0 + 800_100L, 7, 2000L, (short) 1, ControlRecordType.COMMIT, 3));
    out.add(build("snappy", TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP, 3000L, (short) 0, 0, true, 8,
        simple(off, 1, "aborted", T0 + 800_200L)));
    out.add(marker(off, T0 + 800_300L, 8, 3000L, (short) 0, ControlRecordType.ABORT, 4));
    // Bulk batches, so that the indexes get entries.
    for (int i = 0; i < 20; i++) {
      List<Rec> recs = new ArrayList<>();
      for (int r = 0; r < 5; r++) {
        recs.add(rec(off, T0 + 2_000_000L + off[0], b("bulk-k" + i + "-" + r),
            b(("bulk-" + i + "-" + r + "-").repeat(4)), hdrs("batch", Integer.toString(i))));
      }
      out.add(build(i % 5 == 4 ? "zstd" : "none", TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP,
          RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, 9, recs));
    }
    return out;
  }

  static Planned build(String codec, TimestampType tt, long logAppendTime, long pid, short epoch, int seq,
      boolean transactional, int leaderEpoch, List<Rec> recs) {
    Compression compression = Compression.of(codec).build();
    MemoryRecordsBuilder m = MemoryRecords.builder(ByteBuffer.allocate(1024), RecordBatch.MAGIC_VALUE_V2,
        compression, tt, recs.get(0).offset(), logAppendTime, pid, epoch, seq, transactional, leaderEpoch);
    for (Rec r : recs) {
      m.appendWithOffset(r.offset(), r.timestamp(), r.key(), r.value(), r.headers());
    }
    return new Planned(m.build(), recs, codec, tt, logAppendTime, pid, epoch, seq, transactional, false,
        leaderEpoch, null);
  }

  /** A transaction marker, with the key and value the control record format prescribes. */
  static Planned marker(long[] off, long ts, int leaderEpoch, long pid, short epoch, ControlRecordType type,
      int coordinatorEpoch) {
    EndTransactionMarker marker = new EndTransactionMarker(type, coordinatorEpoch);
    long offset = off[0]++;
    MemoryRecords records = MemoryRecords.withEndTransactionMarker(offset, ts, leaderEpoch, pid, epoch, marker);
    byte[] key = ByteBuffer.allocate(4).putShort((short) 0).putShort(type == ControlRecordType.COMMIT ? (short) 1
        : (short) 0).array();
    byte[] value = ByteBuffer.allocate(6).putShort((short) 0).putInt(coordinatorEpoch).array();
    Rec r = new Rec(offset, ts, key, value, NO_HEADERS);
    return new Planned(records, List.of(r), "none", TimestampType.CREATE_TIME, RecordBatch.NO_TIMESTAMP, pid, epoch,
        RecordBatch.NO_SEQUENCE, true, true, leaderEpoch, marker);
  }

  static List<Rec> simple(long[] off, int n, String tag, long ts) {
    List<Rec> recs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      recs.add(rec(off, ts + i, b(tag + "-k" + i), b(tag + "-v" + i), NO_HEADERS));
    }
    return recs;
  }

  static Rec rec(long[] off, long ts, byte[] key, byte[] value, Header[] headers) {
    return new Rec(off[0]++, ts, key, value, headers);
  }

  /** 150 KB: random bytes (stored raw by lz4) then text, so every codec writes several blocks. */
  static byte[] big(long seed) {
    byte[] a = new byte[150 * 1024];
    byte[] noise = new byte[70 * 1024];
    new Random(seed).nextBytes(noise);
    System.arraycopy(noise, 0, a, 0, noise.length);
    byte[] text = "the quick brown fox jumps over the lazy dog ".getBytes(StandardCharsets.US_ASCII);
    for (int i = noise.length; i < a.length; i++) {
      a[i] = text[i % text.length];
    }
    return a;
  }

  static byte[] b(String s) {
    return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
  }

  static Header[] hdrs(String... kv) {
    Header[] h = new Header[kv.length / 2];
    for (int i = 0; i < h.length; i++) {
      h[i] = new RecordHeader(kv[2 * i], b(kv[2 * i + 1]));
    }
    return h;
  }
}
