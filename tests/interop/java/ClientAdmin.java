import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's own Admin client against strait, one scenario per run:
 * {@code ClientAdmin <scenario> <bootstrap> <args...>}. Every call prints one line
 * {@code {"op": <Admin method>, ...what it returned}}; a call that fails prints
 * {@code {"op", "error": "<exception and causes>"}} and the program goes on, so the test can
 * say which call failed and why; it exits 0 when the scenario ran to its end.
 *
 * <ul>
 *   <li>{@code topics <bootstrap> <topic>}: createTopics (3 partitions, RF 3, a config),
 *       listTopics, describeTopics, describeCluster, createPartitions (to 5), describeTopics,
 *       deleteTopics, listTopics.
 *   <li>{@code configs <bootstrap> <topic>}: describeConfigs of the topic and of broker 1,
 *       incrementalAlterConfigs (SET, then DELETE), describeConfigs after each.
 *   <li>{@code groups <bootstrap> <group> <topic>}: listConsumerGroups, describeConsumerGroups,
 *       listConsumerGroupOffsets, deleteConsumerGroupOffsets (partition 0), listConsumerGroupOffsets.
 *   <li>{@code records <bootstrap> <topic> <before>}: listOffsets (earliest, latest, max
 *       timestamp), deleteRecords (before offset {@code before}), listOffsets earliest again.
 *   <li>{@code logdirs <bootstrap> <topic>}: describeLogDirs of every broker.
 * </ul>
 */
public final class ClientAdmin {
  static final Duration TIMEOUT = Duration.ofSeconds(30);

  interface Call {
    Object[] run() throws Exception;
  }

  /** Run one Admin call and print what it returned, or its failure. */
  static void op(String name, Call call) {
    try {
      Object[] fields = call.run();
      Object[] line = new Object[fields.length + 2];
      line[0] = "op";
      line[1] = name;
      System.arraycopy(fields, 0, line, 2, fields.length);
      Json.line(line);
    } catch (Exception e) {
      Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
      Json.line("op", name, "error", Json.describe(cause));
    }
  }

  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "strait-java-admin");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    try (Admin admin = Admin.create(props)) {
      switch (args[0]) {
        case "topics" -> topics(admin, args[2]);
        case "configs" -> configs(admin, args[2]);
        case "groups" -> groups(admin, args[2], args[3]);
        case "records" -> records(admin, args[2], Long.parseLong(args[3]));
        case "logdirs" -> logDirs(admin, args[2]);
        default -> throw new IllegalArgumentException("unknown scenario " + args[0]);
      }
    }
    Json.line("done", args[0]);
  }

  static Map<String, Object> partitionInfo(TopicPartitionInfo p) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("partition", p.partition());
    m.put("leader", p.leader() == null ? null : p.leader().id());
    m.put("replicas", p.replicas().stream().map(Node::id).collect(Collectors.toList()));
    m.put("isr", p.isr().stream().map(Node::id).collect(Collectors.toList()));
    return m;
  }

  static Object[] describeTopic(Admin admin, String topic) throws Exception {
    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    return new Object[] {"name", d.name(), "internal", d.isInternal(), "topic_id", d.topicId().toString(),
        "partitions", d.partitions().stream().map(ClientAdmin::partitionInfo).collect(Collectors.toList())};
  }

  static void topics(Admin admin, String topic) {
    op("createTopics", () -> {
      NewTopic t = new NewTopic(topic, 3, (short) 3).configs(Map.of("retention.ms", "3600000"));
      admin.createTopics(List.of(t)).all().get();
      return new Object[] {"created", topic};
    });
    op("listTopics", () -> new Object[] {"names", new ArrayList<>(new TreeMap<>(
        admin.listTopics().namesToListings().get()).keySet())});
    op("describeTopics", () -> describeTopic(admin, topic));
    op("describeCluster", () -> {
      DescribeClusterResult r = admin.describeCluster();
      Node controller = r.controller().get();
      return new Object[] {"cluster_id", r.clusterId().get(), "controller", controller == null ? null : controller.id(),
          "nodes", r.nodes().get().stream().map(Node::id).sorted().collect(Collectors.toList())};
    });
    op("createPartitions", () -> {
      admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
      return new Object[] {"total", 5};
    });
    op("describeTopics", () -> describeTopic(admin, topic));
    op("deleteTopics", () -> {
      admin.deleteTopics(List.of(topic)).all().get();
      return new Object[] {"deleted", topic};
    });
    op("listTopics", () -> new Object[] {"names", new ArrayList<>(new TreeMap<>(
        admin.listTopics().namesToListings().get()).keySet())});
  }

  static Map<String, Object> configEntries(Config config, Set<String> keys) {
    Map<String, Object> m = new TreeMap<>();
    for (ConfigEntry e : config.entries()) {
      if (keys.contains(e.name())) {
        m.put(e.name(), Map.of("value", String.valueOf(e.value()), "source", e.source().name()));
      }
    }
    return m;
  }

  static void configs(Admin admin, String topic) {
    ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
    Set<String> topicKeys = Set.of("retention.ms", "cleanup.policy", "max.message.bytes");
    op("describeConfigs", () -> new Object[] {"resource", "topic", "entries", configEntries(
        admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource), topicKeys)});
    op("describeConfigs", () -> new Object[] {"resource", "broker", "entries", configEntries(
        admin.describeConfigs(List.of(broker)).all().get().get(broker),
        Set.of("num.partitions", "default.replication.factor", "log.retention.hours"))});
    op("incrementalAlterConfigs", () -> {
      Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(topicResource, List.of(
          new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
          new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET)));
      admin.incrementalAlterConfigs(ops).all().get();
      return new Object[] {"set", Map.of("retention.ms", "7200000", "max.message.bytes", "200000")};
    });
    op("describeConfigs", () -> new Object[] {"resource", "topic", "entries", describeUntil(admin, topicResource,
        topicKeys, c -> "7200000".equals(value(c, "retention.ms")) && "200000".equals(value(c, "max.message.bytes")))});
    op("incrementalAlterConfigs", () -> {
      Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(topicResource, List.of(
          new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE)));
      admin.incrementalAlterConfigs(ops).all().get();
      return new Object[] {"deleted", List.of("max.message.bytes")};
    });
    op("describeConfigs", () -> new Object[] {"resource", "topic", "entries", describeUntil(admin, topicResource,
        topicKeys, c -> !"200000".equals(value(c, "max.message.bytes")))});
  }

  static String value(Config config, String key) {
    ConfigEntry e = config.get(key);
    return e == null ? null : e.value();
  }

  /**
   * describeConfigs until {@code done} holds (10 s at most, then what it last saw): a change is
   * acknowledged once it is stored, and a node other than the one that made it serves it once
   * its view of the cluster has it (Kafka's KRaft brokers answer from their metadata cache too).
   */
  static Map<String, Object> describeUntil(Admin admin, ConfigResource resource, Set<String> keys,
      java.util.function.Predicate<Config> done) throws Exception {
    long deadline = System.currentTimeMillis() + 10_000;
    while (true) {
      Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
      if (done.test(config) || System.currentTimeMillis() > deadline) return configEntries(config, keys);
      Thread.sleep(100);
    }
  }

  static Map<Integer, Object> offsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
    Map<Integer, Object> m = new TreeMap<>();
    offsets.forEach((tp, o) -> m.put(tp.partition(), o == null ? null : o.offset()));
    return m;
  }

  @SuppressWarnings("removal") // listConsumerGroups: what applications call today (4.x adds listGroups)
  static void groups(Admin admin, String group, String topic) {
    op("listConsumerGroups", () -> {
      Collection<ConsumerGroupListing> all = admin.listConsumerGroups().all().get();
      List<Object> listed = new ArrayList<>();
      for (ConsumerGroupListing g : all) {
        listed.add(Map.of("group_id", g.groupId(), "simple", g.isSimpleConsumerGroup(),
            "state", g.groupState().map(Object::toString).orElse("?")));
      }
      return new Object[] {"groups", listed};
    });
    op("describeConsumerGroups", () -> {
      ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
      List<Object> members = new ArrayList<>();
      for (MemberDescription m : d.members()) {
        members.add(Map.of("client_id", m.clientId(), "partitions",
            m.assignment().topicPartitions().stream().map(TopicPartition::partition).sorted()
                .collect(Collectors.toList())));
      }
      Node coordinator = d.coordinator();
      return new Object[] {"group_id", d.groupId(), "state", d.groupState().toString(),
          "protocol", d.partitionAssignor(), "type", d.type().toString(),
          "coordinator", coordinator == null ? null : coordinator.id(), "members", members};
    });
    op("listConsumerGroupOffsets", () -> new Object[] {"offsets",
        offsets(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get())});
    op("deleteConsumerGroupOffsets", () -> {
      admin.deleteConsumerGroupOffsets(group, Set.of(new TopicPartition(topic, 0))).all().get();
      return new Object[] {"deleted", List.of(0)};
    });
    op("listConsumerGroupOffsets", () -> new Object[] {"offsets",
        offsets(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get())});
  }

  static Map<String, Object> listOffsets(Admin admin, String topic, OffsetSpec spec) throws Exception {
    TopicPartition tp = new TopicPartition(topic, 0);
    ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("offset", info.offset());
    m.put("timestamp", info.timestamp());
    m.put("leader_epoch", info.leaderEpoch().orElse(null));
    return m;
  }

  static void records(Admin admin, String topic, long before) {
    op("listOffsets", () -> new Object[] {"spec", "earliest", "result", listOffsets(admin, topic, OffsetSpec.earliest())});
    op("listOffsets", () -> new Object[] {"spec", "latest", "result", listOffsets(admin, topic, OffsetSpec.latest())});
    op("listOffsets", () -> new Object[] {"spec", "max_timestamp", "result",
        listOffsets(admin, topic, OffsetSpec.maxTimestamp())});
    op("listOffsets", () -> new Object[] {"spec", "for_timestamp_0", "result",
        listOffsets(admin, topic, OffsetSpec.forTimestamp(0))});
    op("deleteRecords", () -> {
      TopicPartition tp = new TopicPartition(topic, 0);
      long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before))).lowWatermarks().get(tp)
          .get().lowWatermark();
      return new Object[] {"low_watermark", low};
    });
    op("listOffsets", () -> new Object[] {"spec", "earliest", "result", listOffsets(admin, topic, OffsetSpec.earliest())});
  }

  static void logDirs(Admin admin, String topic) {
    op("describeLogDirs", () -> {
      List<Integer> brokers = admin.describeCluster().nodes().get().stream().map(Node::id).sorted()
          .collect(Collectors.toList());
      Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(brokers).allDescriptions().get();
      Map<Integer, Object> out = new TreeMap<>();
      for (Map.Entry<Integer, Map<String, LogDirDescription>> broker : all.entrySet()) {
        List<Object> dirs = new ArrayList<>();
        for (Map.Entry<String, LogDirDescription> dir : new TreeMap<>(broker.getValue()).entrySet()) {
          Map<String, Object> replicas = new TreeMap<>();
          for (Map.Entry<TopicPartition, ReplicaInfo> r : dir.getValue().replicaInfos().entrySet()) {
            if (r.getKey().topic().equals(topic)) {
              replicas.put(String.valueOf(r.getKey().partition()), r.getValue().size());
            }
          }
          Map<String, Object> d = new LinkedHashMap<>();
          d.put("path", dir.getKey());
          d.put("error", dir.getValue().error() == null ? null : dir.getValue().error().getClass().getSimpleName());
          d.put("replicas", replicas);
          dirs.add(d);
        }
        out.put(broker.getKey(), dirs);
      }
      return new Object[] {"brokers", out};
    });
  }
}
