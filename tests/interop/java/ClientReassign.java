import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterPartitionReassignmentsOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka's Admin client moving partitions on strait (KIP-455), one action per run; each prints
 * JSON lines and then {@code {"done": <action>}}:
 *
 * <ul>
 *   <li>{@code alter <bootstrap> [--no-rf-change] <topic>:<partition>=<b1,b2,...|cancel> ...}:
 *       one alterPartitionReassignments call (with allowReplicationFactorChange(false) after
 *       {@code --no-rf-change}); a line per partition {@code {"partition": "t-0", "error": null
 *       or "<exception class>: <message>"}}.
 *   <li>{@code list <bootstrap>}: listPartitionReassignments, one line
 *       {@code {"reassignments": {"t-0": {"replicas", "adding", "removing"}}}}.
 *   <li>{@code describe <bootstrap> <topic>}: describeTopics, one line {@code {"replicas":
 *       {"0": [..], ...}}}.
 * </ul>
 */
public final class ClientReassign {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "strait-java-reassign");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    try (Admin admin = Admin.create(props)) {
      switch (args[0]) {
        case "alter" -> alter(admin, Arrays.asList(args).subList(2, args.length));
        case "list" -> list(admin);
        case "describe" -> describe(admin, args[2]);
        default -> throw new IllegalArgumentException("unknown action " + args[0]);
      }
    }
    Json.line("done", args[0]);
  }

  static void alter(Admin admin, List<String> specs) throws InterruptedException {
    AlterPartitionReassignmentsOptions options = new AlterPartitionReassignmentsOptions();
    Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new LinkedHashMap<>();
    for (String spec : specs) {
      if (spec.equals("--no-rf-change")) {
        options.allowReplicationFactorChange(false);
        continue;
      }
      String[] partitionAndTarget = spec.split("=", 2);
      int colon = partitionAndTarget[0].lastIndexOf(':');
      TopicPartition tp = new TopicPartition(
          partitionAndTarget[0].substring(0, colon), Integer.parseInt(partitionAndTarget[0].substring(colon + 1)));
      if (partitionAndTarget[1].equals("cancel")) {
        moves.put(tp, Optional.empty());
      } else {
        List<Integer> replicas = Arrays.stream(partitionAndTarget[1].split(","))
            .map(Integer::valueOf).collect(Collectors.toList());
        moves.put(tp, Optional.of(new NewPartitionReassignment(replicas)));
      }
    }
    Map<TopicPartition, KafkaFuture<Void>> results = admin.alterPartitionReassignments(moves, options).values();
    for (TopicPartition tp : moves.keySet()) {
      String error = null;
      try {
        results.get(tp).get();
      } catch (ExecutionException e) {
        error = Json.describe(e.getCause() != null ? e.getCause() : e);
      }
      Json.line("partition", tp.toString(), "error", error);
    }
  }

  static void list(Admin admin) throws Exception {
    Map<TopicPartition, PartitionReassignment> listed = admin.listPartitionReassignments().reassignments().get();
    Map<String, Object> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, PartitionReassignment> e : listed.entrySet()) {
      Map<String, Object> r = new LinkedHashMap<>();
      r.put("replicas", e.getValue().replicas());
      r.put("adding", e.getValue().addingReplicas());
      r.put("removing", e.getValue().removingReplicas());
      out.put(e.getKey().toString(), r);
    }
    Json.line("reassignments", out);
  }

  static void describe(Admin admin, String topic) throws Exception {
    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    Map<String, Object> replicas = new TreeMap<>();
    d.partitions().forEach(p -> replicas.put(
        String.valueOf(p.partition()), new ArrayList<>(p.replicas().stream().map(Node::id).toList())));
    Json.line("replicas", replicas);
  }
}
