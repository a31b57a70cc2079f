import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;

/**
 * Reads segment files with Apache Kafka's own code and prints what it finds.
 *
 * <p>usage: {@code KafkaSegmentReader [--index-interval N] FILE.log...}
 *
 * <p>Each file is opened with {@link FileRecords}; every batch gets {@code ensureValid()} (size,
 * magic and CRC-32C) and every record {@code ensureValid()} while the batch is iterated, which
 * decompresses it. Control batches are parsed as transaction markers. Prints one JSON line per
 * record (see {@link #recordJson}); with {@code --index-interval} also one line per file with the
 * {@code .index} and {@code .timeindex} entries that Kafka's {@code LogSegment.recover()} would
 * build for it. Exits 1 with {@code INVALID <file> at byte <pos>: <reason>} on stderr at the first
 * invalid batch, 2 on bad usage.
 */
public final class KafkaSegmentReader {
  private KafkaSegmentReader() {}

  public static void main(String[] args) throws Exception {
    int interval = -1;
    List<File> files = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--index-interval") && i + 1 < args.length) {
        interval = Integer.parseInt(args[++i]);
      } else {
        files.add(new File(args[i]));
      }
    }
    if (files.isEmpty()) {
      System.err.println("usage: KafkaSegmentReader [--index-interval N] FILE.log...");
      System.exit(2);
    }
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    for (File f : files) {
      try {
        read(f, out);
        if (interval >= 0) {
          out.println(indexesJson(f, interval));
        }
      } catch (InvalidSegment e) {
        out.flush();
        System.err.println("INVALID " + f + " at byte " + e.position + ": " + e.getMessage());
        System.exit(1);
      }
    }
    out.flush();
  }

  /** A batch that Kafka's code rejects, or a file that is not a well-formed segment. */
  static final class InvalidSegment extends Exception {
    private static final long serialVersionUID = 1L;
    final long position;

    InvalidSegment(long position, String message) {
      super(message);
      this.position = position;
    }
  }

  static long segmentBase(File f) throws InvalidSegment {
    if (!f.getName().matches("\\d{20}\\.log")) {
      throw new InvalidSegment(0, "not a segment file name: " + f.getName());
    }
    return Long.parseLong(f.getName().substring(0, 20));
  }

  static void read(File f, PrintStream out) throws Exception {
    long base = segmentBase(f);
    long next = base;
    int pos = 0;
    try (FileRecords fr = FileRecords.open(f, false)) {
      for (RecordBatch batch : fr.batches()) {
        try {
          batch.ensureValid();
          if (batch.magic() != RecordBatch.MAGIC_VALUE_V2) {
            throw new IllegalStateException("magic " + batch.magic() + " is not 2");
          }
          if (batch.baseOffset() < next || batch.lastOffset() < batch.baseOffset()) {
            throw new IllegalStateException("offsets " + batch.baseOffset() + ".." + batch.lastOffset()
                + " do not follow offset " + (next - 1));
          }
          if (batch.lastOffset() - base > Integer.MAX_VALUE) {
            throw new IllegalStateException("offset " + batch.lastOffset() + " is too far from the segment base");
          }
          String batchJson = batchJson(pos, batch);
          long previous = batch.baseOffset() - 1;
          int count = 0;
          for (Record r : batch) {
            r.ensureValid();
            if (r.offset() <= previous || r.offset() > batch.lastOffset()) {
              throw new IllegalStateException("record offset " + r.offset() + " out of order");
            }
            previous = r.offset();
            count++;
            String marker = null;
            if (batch.isControlBatch()) {
              ControlRecordType type = ControlRecordType.parse(r.key());
              if (type == ControlRecordType.COMMIT || type == ControlRecordType.ABORT) {
                marker = markerJson(EndTransactionMarker.deserialize(r));
              } else {
                marker = "{\"type\":" + str(type.name()) + "}";
              }
            }
            out.println(recordJson(f.getName(), r.offset(), r.timestamp(), bytes(r.key()), bytes(r.value()),
                r.headers(), batchJson, marker));
          }
          if (batch.countOrNull() == null || count != batch.countOrNull()) {
            throw new IllegalStateException("batch declares " + batch.countOrNull() + " records but holds " + count);
          }
          next = batch.lastOffset() + 1;
          pos += batch.sizeInBytes();
        } catch (RuntimeException e) {
          throw new InvalidSegment(pos, e.toString());
        }
      }
      if (pos != fr.sizeInBytes()) {
        // FileRecords stops silently at a batch that runs past the end of the file.
        throw new InvalidSegment(pos, "batches end at byte " + pos + " but the file has " + fr.sizeInBytes());
      }
    } catch (InvalidSegment e) {
      throw e;
    } catch (Exception e) {
      // FileRecords' iterator throws (CorruptRecordException) for a batch header that cannot be parsed.
      throw new InvalidSegment(pos, e.toString());
    }
  }

  /**
   * The {@code .index} ({offset, position}) and {@code .timeindex} ({timestamp, offset}) entries
   * Kafka's {@code LogSegment.recover()} builds for a segment, including the final time index
   * entry that recovery and {@code LogSegment.close()} add for the largest timestamp.
   */
  static List<List<long[]>> kafkaIndexes(File f, int indexIntervalBytes) throws Exception {
    List<long[]> index = new ArrayList<>();
    List<long[]> timeIndex = new ArrayList<>();
    long maxTs = RecordBatch.NO_TIMESTAMP;
    long maxTsOffset = -1;
    int validBytes = 0;
    int lastIndexEntry = 0;
    try (FileRecords fr = FileRecords.open(f, false)) {
      for (RecordBatch batch : fr.batches()) {
        batch.ensureValid();
        if (batch.maxTimestamp() > maxTs) {
          maxTs = batch.maxTimestamp();
          maxTsOffset = batch.lastOffset();
        }
        if (validBytes - lastIndexEntry > indexIntervalBytes) {
          index.add(new long[] {batch.lastOffset(), validBytes});
          timeIndexMaybeAppend(timeIndex, maxTs, maxTsOffset);
          lastIndexEntry = validBytes;
        }
        validBytes += batch.sizeInBytes();
      }
    }
    if (maxTsOffset >= 0) {
      timeIndexMaybeAppend(timeIndex, maxTs, maxTsOffset);
    }
    return List.of(index, timeIndex);
  }

  /** TimeIndex.maybeAppend: only a timestamp larger than the last entry's is added. */
  static void timeIndexMaybeAppend(List<long[]> timeIndex, long ts, long offset) {
    if (timeIndex.isEmpty() || ts > timeIndex.get(timeIndex.size() - 1)[0]) {
      timeIndex.add(new long[] {ts, offset});
    }
  }

  static String indexesJson(File f, int interval) throws Exception {
    List<List<long[]>> both = kafkaIndexes(f, interval);
    return "{\"file\":" + str(f.getName()) + ",\"index\":" + pairs(both.get(0)) + ",\"timeindex\":"
        + pairs(both.get(1)) + "}";
  }

  static String pairs(List<long[]> entries) {
    StringBuilder s = new StringBuilder("[");
    for (long[] e : entries) {
      s.append(s.length() > 1 ? "," : "").append('[').append(e[0]).append(',').append(e[1]).append(']');
    }
    return s.append(']').toString();
  }

  // -- JSON, shared with KafkaSegmentWriter so that both print the same shape -------------------

  static String batchJson(int position, RecordBatch b) {
    return batchJson(position, b.sizeInBytes(), b.baseOffset(), b.lastOffset(), b.countOrNull(),
        b.compressionType().name, b.timestampType().name, b.maxTimestamp(), b.producerId(), b.producerEpoch(),
        b.baseSequence(), b.isTransactional(), b.isControlBatch(), b.partitionLeaderEpoch(), b.checksum());
  }

  static String batchJson(int position, int size, long baseOffset, long lastOffset, int count, String codec,
      String timestampType, long maxTimestamp, long producerId, short producerEpoch, int baseSequence,
      boolean transactional, boolean control, int partitionLeaderEpoch, long crc) {
    return "{\"position\":" + position + ",\"size\":" + size + ",\"base_offset\":" + baseOffset
        + ",\"last_offset\":" + lastOffset + ",\"count\":" + count + ",\"codec\":" + str(codec)
        + ",\"timestamp_type\":" + str(timestampType) + ",\"max_timestamp\":" + maxTimestamp
        + ",\"producer_id\":" + producerId + ",\"producer_epoch\":" + producerEpoch
        + ",\"base_sequence\":" + baseSequence + ",\"transactional\":" + transactional
        + ",\"control\":" + control + ",\"partition_leader_epoch\":" + partitionLeaderEpoch
        + ",\"crc\":" + crc + "}";
  }

  static String markerJson(EndTransactionMarker m) {
    return "{\"type\":" + str(m.controlType().name()) + ",\"coordinator_epoch\":" + m.coordinatorEpoch() + "}";
  }

  /** One record: offset, timestamp, key/value as hex or null, headers as [{key, value hex or null}]. */
  static String recordJson(String file, long offset, long timestamp, byte[] key, byte[] value, Header[] headers,
      String batch, String marker) {
    StringBuilder s = new StringBuilder("{\"file\":").append(str(file))
        .append(",\"offset\":").append(offset)
        .append(",\"timestamp\":").append(timestamp)
        .append(",\"key\":").append(hex(key))
        .append(",\"value\":").append(hex(value))
        .append(",\"headers\":[");
    for (int i = 0; i < headers.length; i++) {
      s.append(i > 0 ? "," : "").append("{\"key\":").append(str(headers[i].key()))
          .append(",\"value\":").append(hex(headers[i].value())).append('}');
    }
    s.append("],\"batch\":").append(batch);
    if (marker != null) {
      s.append(",\"marker\":").append(marker);
    }
    return s.append('}').toString();
  }

  static byte[] bytes(ByteBuffer bb) {
    if (bb == null) {
      return null;
    }
    byte[] a = new byte[bb.remaining()];
    bb.duplicate().get(a);
    return a;
  }

  static String hex(byte[] a) {
    if (a == null) {
      return "null";
    }
    StringBuilder s = new StringBuilder(2 + 2 * a.length).append('"');
    for (byte b : a) {
      s.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
    }
    return s.append('"').toString();
  }

  /** A JSON string; everything outside printable ASCII is escaped as UTF-16 code units. */
  static String str(String v) {
    StringBuilder s = new StringBuilder("\"");
    for (char c : v.toCharArray()) {
      if (c == '"' || c == '\\') {
        s.append('\\').append(c);
      } else if (c < 0x20 || c > 0x7e) {
        s.append(String.format("\\u%04x", (int) c));
      } else {
        s.append(c);
      }
    }
    return s.append('"').toString();
  }
}
