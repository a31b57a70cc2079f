import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartitionReplica;

/**
 * Kafka's Admin client moving replicas between a broker's log dirs on strait (KIP-113), one
 * action per run; each prints JSON lines and then {@code {"done": <action>}}. A replica is
 * written {@code <topic>:<partition>:<broker>}.
 *
 * <ul>
 *   <li>{@code alter <bootstrap> <replica>=<log dir> ...}: one alterReplicaLogDirs call; a line
 *       per replica {@code {"replica": "t-0-1", "error": null or "<exception class>: <message>"}}.
 *   <li>{@code describe <bootstrap> <replica> ...}: describeReplicaLogDirs; a line per replica
 *       {@code {"replica", "current", "current_lag", "future", "future_lag", "error"}}.
 * </ul>
 */
public final class ClientLogDirs {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "strait-java-log-dirs");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    List<String> specs = Arrays.asList(args).subList(2, args.length);
    try (Admin admin = Admin.create(props)) {
      switch (args[0]) {
        case "alter" -> alter(admin, specs);
        case "describe" -> describe(admin, specs);
        default -> throw new IllegalArgumentException("unknown action " + args[0]);
      }
    }
    Json.line("done", args[0]);
  }

  static TopicPartitionReplica replica(String spec) {
    String[] parts = spec.split(":");
    int n = parts.length;
    String topic = String.join(":", Arrays.copyOfRange(parts, 0, n - 2));
    return new TopicPartitionReplica(topic, Integer.parseInt(parts[n - 2]), Integer.parseInt(parts[n - 1]));
  }

  static void alter(Admin admin, List<String> specs) throws InterruptedException {
    Map<TopicPartitionReplica, String> moves = new LinkedHashMap<>();
    for (String spec : specs) {
      String[] replicaAndDir = spec.split("=", 2);
      moves.put(replica(replicaAndDir[0]), replicaAndDir[1]);
    }
    Map<TopicPartitionReplica, KafkaFuture<Void>> results = admin.alterReplicaLogDirs(moves).values();
    for (TopicPartitionReplica r : moves.keySet()) {
      String error = null;
      try {
        results.get(r).get();
      } catch (ExecutionException e) {
        error = Json.describe(e.getCause() != null ? e.getCause() : e);
      }
      Json.line("replica", r.toString(), "error", error);
    }
  }

  static void describe(Admin admin, List<String> specs) throws InterruptedException {
    List<TopicPartitionReplica> replicas = new ArrayList<>();
    for (String spec : specs) {
      replicas.add(replica(spec));
    }
    Map<TopicPartitionReplica, KafkaFuture<ReplicaLogDirInfo>> results =
        admin.describeReplicaLogDirs(replicas).values();
    for (TopicPartitionReplica r : replicas) {
      try {
        ReplicaLogDirInfo info = results.get(r).get();
        Json.line(
            "replica", r.toString(),
            "current", info.getCurrentReplicaLogDir(),
            "current_lag", info.getCurrentReplicaOffsetLag(),
            "future", info.getFutureReplicaLogDir(),
            "future_lag", info.getFutureReplicaOffsetLag(),
            "error", null);
      } catch (ExecutionException e) {
        Json.line("replica", r.toString(), "error", Json.describe(e.getCause() != null ? e.getCause() : e));
      }
    }
  }
}
