import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own consumer against strait.
 *
 * <p>{@code ClientConsume read <bootstrap> <topic> <isolation>}: assign every partition, read
 * from the beginning up to the end offsets the consumer sees under {@code isolation}
 * (read_committed: the last stable offset) and print every record {@code {"partition",
 * "offset", "key", "value"}}, then {@code {"end_offsets": {partition: offset}}}.
 *
 * <p>{@code ClientConsume group <bootstrap> <topic> <group>}: a consumer group of two members
 * (read_committed, manual commits) on a topic that already holds records: member A alone reads
 * everything and commits; member B joins and the group rebalances until A and B split the
 * partitions; the program then produces {@code 10 * partitions} more records, each member reads
 * those of its own partitions and commits; {@code committed()} and {@code seek()} are checked;
 * B leaves and A gets every partition back. Every step prints one line with {@code "event"}.
 *
 * <p>Every wait has a deadline; missing it ends the program with an exception naming the state.
 */
public final class ClientConsume {
  static final Duration POLL = Duration.ofMillis(100);
  static final long DEADLINE_MS = 40_000;

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "read" -> read(args[1], args[2], args[3]);
      case "group" -> group(args[1], args[2], args[3]);
      default -> throw new IllegalArgumentException("unknown mode " + args[0]);
    }
  }

  static Properties props(String bootstrap, String isolation) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    return props;
  }

  static KafkaConsumer<String, String> consumer(Properties props) {
    return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
  }

  static void read(String bootstrap, String topic, String isolation) {
    Properties props = props(bootstrap, isolation);
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "strait-java-read");
    try (KafkaConsumer<String, String> c = consumer(props)) {
      List<TopicPartition> tps = c.partitionsFor(topic, Duration.ofSeconds(30)).stream()
          .map(p -> new TopicPartition(topic, p.partition())).collect(Collectors.toList());
      c.assign(tps);
      c.seekToBeginning(tps);
      Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
      long deadline = System.currentTimeMillis() + DEADLINE_MS;
      while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException("did not reach the end offsets " + end + " in " + DEADLINE_MS + " ms");
        }
        for (ConsumerRecord<String, String> r : c.poll(POLL)) {
          Json.line("partition", r.partition(), "offset", r.offset(), "key", r.key(), "value", r.value());
        }
      }
      Map<Integer, Long> byPartition = new TreeMap<>();
      end.forEach((tp, o) -> byPartition.put(tp.partition(), o));
      Json.line("end_offsets", byPartition);
    }
  }

  /** One member of the group: its consumer and what its rebalance listener saw. */
  static final class Member implements ConsumerRebalanceListener {
    final String name;
    final KafkaConsumer<String, String> consumer;
    final Map<TopicPartition, Long> nextOffsets = new HashMap<>();
    int consumed;

    Member(String name, String bootstrap, String group) {
      this.name = name;
      Properties props = props(bootstrap, "read_committed");
      props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
      props.put(ConsumerConfig.CLIENT_ID_CONFIG, "strait-java-" + name);
      props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
      this.consumer = consumer(props);
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      Json.line("event", "revoked", "member", name, "partitions", numbers(partitions));
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      Json.line("event", "assigned", "member", name, "partitions", numbers(partitions));
    }

    void poll() {
      for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
        Json.line("event", "record", "member", name, "partition", r.partition(), "offset", r.offset(),
            "value", r.value());
        nextOffsets.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
        consumed++;
      }
    }

    Set<TopicPartition> assignment() {
      return consumer.assignment();
    }

    void commit() {
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      for (TopicPartition tp : assignment()) {
        offsets.put(tp, new OffsetAndMetadata(consumer.position(tp), "by-" + name));
      }
      consumer.commitSync(offsets, Duration.ofSeconds(30));
      Map<Integer, Long> printable = new TreeMap<>();
      offsets.forEach((tp, o) -> printable.put(tp.partition(), o.offset()));
      Json.line("event", "committed", "member", name, "offsets", printable);
    }
  }

  static List<Integer> numbers(Collection<TopicPartition> partitions) {
    return partitions.stream().map(TopicPartition::partition).sorted().collect(Collectors.toList());
  }

  interface Condition {
    boolean holds();
  }

  static void pollUntil(String what, List<Member> members, Condition done) {
    long deadline = System.currentTimeMillis() + DEADLINE_MS;
    while (!done.holds()) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("timed out after " + DEADLINE_MS + " ms waiting for " + what);
      }
      for (Member m : members) m.poll();
    }
  }

  static void group(String bootstrap, String topic, String group) throws Exception {
    Member a = new Member("A", bootstrap, group);
    Member b = new Member("B", bootstrap, group);
    try (a.consumer; b.consumer) {
      int partitions = a.consumer.partitionsFor(topic, Duration.ofSeconds(30)).size();
      List<TopicPartition> all = new ArrayList<>();
      for (int p = 0; p < partitions; p++) all.add(new TopicPartition(topic, p));
      Map<TopicPartition, Long> end = a.consumer.endOffsets(all, Duration.ofSeconds(30));

      // 1. A alone: every partition, every record there is, then a synchronous commit.
      a.consumer.subscribe(List.of(topic), a);
      pollUntil("A to read every partition to its end", List.of(a),
          () -> a.assignment().size() == partitions
              && all.stream().allMatch(tp -> a.nextOffsets.getOrDefault(tp, 0L) >= end.get(tp)));
      a.commit();

      // 2. B joins: the group rebalances until the two split the partitions.
      b.consumer.subscribe(List.of(topic), b);
      List<Member> both = List.of(a, b);
      pollUntil("A and B to split the partitions", both, () -> {
        Set<TopicPartition> sa = a.assignment();
        Set<TopicPartition> sb = b.assignment();
        return !sa.isEmpty() && !sb.isEmpty() && sa.size() + sb.size() == partitions
            && sa.stream().noneMatch(sb::contains);
      });
      Json.line("event", "split", "A", numbers(a.assignment()), "B", numbers(b.assignment()));

      // 3. New records: each member reads those of its own partitions and commits.
      int more = 10 * partitions;
      Properties pp = new Properties();
      pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      pp.put(ProducerConfig.ACKS_CONFIG, "all");
      try (KafkaProducer<String, String> producer =
          new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
        for (int i = 0; i < more; i++) {
          producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "after-rebalance-" + i)).get();
        }
      }
      Map<TopicPartition, Long> end2 = a.consumer.endOffsets(all, Duration.ofSeconds(30));
      pollUntil("A and B to read the new records", both,
          () -> all.stream().allMatch(tp -> Math.max(a.nextOffsets.getOrDefault(tp, 0L),
              b.nextOffsets.getOrDefault(tp, 0L)) >= end2.get(tp)));
      a.commit();
      b.commit();

      // 4. committed() as the group coordinator stored it.
      Map<TopicPartition, OffsetAndMetadata> committed =
          b.consumer.committed(Set.copyOf(all), Duration.ofSeconds(30));
      Map<Integer, Object> printable = new TreeMap<>();
      committed.forEach((tp, o) -> printable.put(tp.partition(),
          o == null ? null : Map.of("offset", o.offset(), "metadata", o.metadata())));
      Json.line("event", "committed_read", "offsets", printable);

      // 5. seek(): A rereads one of its partitions from offset 3.
      TopicPartition first = a.assignment().stream().min((x, y) -> x.partition() - y.partition()).orElseThrow();
      a.consumer.seek(first, 3);
      List<Long> reread = new ArrayList<>();
      long deadline = System.currentTimeMillis() + DEADLINE_MS;
      while (a.consumer.position(first) < end2.get(first)) {
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("seek: no records");
        for (ConsumerRecord<String, String> r : a.consumer.poll(POLL)) {
          if (r.partition() == first.partition()) reread.add(r.offset());
        }
        b.poll();
      }
      Json.line("event", "seek", "partition", first.partition(), "offsets", reread);

      // 6. B leaves: A gets every partition back.
      b.consumer.close(CloseOptions.timeout(Duration.ofSeconds(30)));
      pollUntil("A to get every partition back", List.of(a), () -> a.assignment().size() == partitions);
      Json.line("event", "alone", "A", numbers(a.assignment()));
    }
  }
}
