import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The Admin calls whose requests Kafka 4.3's client sends at the newest versions of the group,
 * topic, log-dir and ACL APIs (strait's Issue 20): {@code ClientNewest <bootstrap> <topic> <group>},
 * where {@code group} committed offsets and has no members. Every call prints one line as
 * {@code ClientAdmin} does ({@code {"op", ...}} or {@code {"op", "error"}}), then {@code {"done"}}.
 *
 * <ol>
 *   <li>createTopics: what CreateTopics v5+ answers (partitions, replication factor, a config,
 *       the topic id of v7), and describeTopics' id of the same topic.
 *   <li>listGroups in state Empty, then in state Stable (ListGroups v4's states filter, v5's types).
 *   <li>listConsumerGroupOffsets of two groups in one call (OffsetFetch v8, FindCoordinator v4).
 *   <li>describeConsumerGroups of a group that does not exist (DescribeGroups v6).
 *   <li>describeLogDirs of every broker: total and usable bytes (DescribeLogDirs v4).
 *   <li>describeAcls (DescribeAcls v3; the site runs without an authorizer).
 *   <li>deleteTopics by topic id (DeleteTopics v6), then listTopics.
 *   <li>a consumer with {@code group.protocol=consumer} (KIP-848's ConsumerGroupHeartbeat, not
 *       served) polls: printed as the op {@code consumerGroupProtocol}.
 * </ol>
 */
public final class ClientNewest {
  /** One Admin call, printed as {@code ClientAdmin} prints its calls. */
  static void op(String name, ClientAdmin.Call call) {
    ClientAdmin.op(name, call);
  }

  /**
   * A consumer with {@code group.protocol=consumer} (KIP-848) polls for up to 20 s: strait serves only
   * the classic protocol, so it should fail; what it fails with is printed as the call's error.
   */
  static Object[] consumerGroupProtocol(String bootstrap, String group) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(group + "-topic"));
      long deadline = System.currentTimeMillis() + 20_000;
      while (System.currentTimeMillis() < deadline) {
        consumer.poll(Duration.ofMillis(500));
      }
    }
    return new Object[] {"polled_for_ms", 20_000};
  }

  public static void main(String[] args) throws Exception {
    String topic = args[1];
    String group = args[2];
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "strait-java-newest");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    try (Admin admin = Admin.create(props)) {
      Uuid[] id = new Uuid[1];
      op("createTopics", () -> {
        NewTopic t = new NewTopic(topic, 2, (short) 3).configs(Map.of("retention.ms", "3600000"));
        CreateTopicsResult r = admin.createTopics(List.of(t));
        r.all().get();
        id[0] = r.topicId(topic).get();
        Config config = r.config(topic).get();
        ConfigEntry retention = config.get("retention.ms");
        return new Object[] {"partitions", r.numPartitions(topic).get(), "replication_factor",
            r.replicationFactor(topic).get(), "topic_id", id[0].toString(), "retention_ms", retention.value(),
            "retention_source", retention.source().toString(), "configs", config.entries().size()};
      });
      op("describeTopics", () -> new Object[] {"topic_id",
          admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).topicId().toString()});
      for (GroupState state : List.of(GroupState.EMPTY, GroupState.STABLE)) {
        op("listGroups", () -> {
          List<Object> listed = new ArrayList<>();
          for (GroupListing g : admin.listGroups(ListGroupsOptions.forConsumerGroups().inGroupStates(Set.of(state)))
              .all().get()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("group_id", g.groupId());
            m.put("state", g.groupState().map(Object::toString).orElse(null));
            m.put("type", g.type().map(Object::toString).orElse(null));
            m.put("protocol", g.protocol());
            listed.add(m);
          }
          return new Object[] {"in_state", state.toString(), "groups", listed};
        });
      }
      op("listConsumerGroupOffsets", () -> {
        String other = group + "-never-committed";
        Map<String, ListConsumerGroupOffsetsSpec> specs = new LinkedHashMap<>();
        specs.put(group, new ListConsumerGroupOffsetsSpec());
        specs.put(other, new ListConsumerGroupOffsetsSpec());
        Map<String, Map<TopicPartition, OffsetAndMetadata>> all = admin.listConsumerGroupOffsets(specs).all().get();
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>> g : all.entrySet()) {
          Map<String, Object> offsets = new TreeMap<>();
          for (Map.Entry<TopicPartition, OffsetAndMetadata> e : g.getValue().entrySet()) {
            offsets.put(e.getKey().topic() + "-" + e.getKey().partition(), e.getValue().offset());
          }
          out.put(g.getKey().equals(group) ? "group" : "other", offsets);
        }
        return new Object[] {"groups", out};
      });
      op("describeConsumerGroups", () -> new Object[] {"state",
          admin.describeConsumerGroups(List.of(group + "-missing")).all().get().values().iterator().next()
              .groupState().toString()});
      op("describeLogDirs", () -> {
        List<Integer> brokers = admin.describeCluster().nodes().get().stream().map(Node::id).sorted().toList();
        List<Object> dirs = new ArrayList<>();
        for (Map<String, LogDirDescription> byDir : admin.describeLogDirs(brokers).allDescriptions().get().values()) {
          for (LogDirDescription d : byDir.values()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("total", d.totalBytes().isPresent() ? d.totalBytes().getAsLong() : null);
            m.put("usable", d.usableBytes().isPresent() ? d.usableBytes().getAsLong() : null);
            dirs.add(m);
          }
        }
        return new Object[] {"dirs", dirs};
      });
      op("describeAcls", () -> new Object[] {"acls", admin.describeAcls(AclBindingFilter.ANY).values().get().size()});
      op("deleteTopics", () -> {
        admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id[0]))).all().get();
        return new Object[] {"deleted", id[0].toString()};
      });
      op("listTopics", () -> new Object[] {"has_topic", admin.listTopics().names().get().contains(topic)});
    }
    op("consumerGroupProtocol", () -> consumerGroupProtocol(args[0], group + "-kip848"));
    Json.line("done", "newest");
  }
}
