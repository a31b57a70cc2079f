import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.connector.policy.AllowlistConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.Herder;
import org.apache.kafka.connect.runtime.Worker;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo;
import org.apache.kafka.connect.runtime.standalone.StandaloneConfig;
import org.apache.kafka.connect.runtime.standalone.StandaloneHerder;
import org.apache.kafka.connect.storage.FileOffsetBackingStore;
import org.apache.kafka.connect.util.FutureCallback;

/**
 * A Kafka Connect worker in standalone mode (Kafka's own {@code Worker} and
 * {@code StandaloneHerder}, file offset store) without its REST server:
 * {@code ConnectWorker <source file> <topic> <sink file> <bootstrap> <work dir>}.
 *
 * <p>{@code ConnectStandalone} cannot start from registry packages: its REST server needs Jetty
 * 12's {@code org.eclipse.jetty.security.SecurityHandler} (jetty-security 12), and the only
 * jetty-security the registries ship is 9.4 (see docs/compatibility.md). The herder and the
 * worker are what runs connectors either way; this program builds them as
 * {@code ConnectStandalone} does and gives them the connectors' configs directly.
 *
 * <p>It runs a FileStreamSource (source file to topic) and a FileStreamSink (topic to sink
 * file), waits until the sink file has as many lines as the source file (deadline 40 s, then it
 * fails), stops the herder and prints {@code {"connector": name, "started": true}} per
 * connector and {@code {"lines": n}} at the end.
 */
public final class ConnectWorker {
  static final long DEADLINE_MS = 40_000;

  public static void main(String[] args) throws Exception {
    Path source = Path.of(args[0]);
    String topic = args[1];
    Path sink = Path.of(args[2]);
    String bootstrap = args[3];
    Path work = Path.of(args[4]);
    Map<String, String> props = new HashMap<>();
    props.put("bootstrap.servers", bootstrap);
    props.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
    props.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
    props.put("offset.storage.file.filename", work.resolve("connect.offsets").toString());
    props.put("offset.flush.interval.ms", "1000");
    props.put("plugin.discovery", "only_scan");
    props.put("client.id", "strait-java-connect");

    Plugins plugins = new Plugins(props);
    StandaloneConfig config = new StandaloneConfig(props);
    String clusterId = config.kafkaClusterId();
    ConnectorClientConfigOverridePolicy policy = new AllowlistConnectorClientConfigOverridePolicy();
    JsonConverter offsetKeys = new JsonConverter(); // as ConnectStandalone: offsets keyed by JSON, no schemas
    offsetKeys.configure(Map.of("schemas.enable", "false"), true);
    FileOffsetBackingStore offsets = new FileOffsetBackingStore(offsetKeys);
    offsets.configure(config);
    Worker worker = new Worker("strait-test-worker", Time.SYSTEM, plugins, config, offsets, policy);
    StandaloneHerder herder = new StandaloneHerder(worker, clusterId, policy);
    herder.start();
    try {
      start(herder, Map.of("name", "file-source", "tasks.max", "1", "topic", topic, "file", source.toString(),
          "connector.class", "org.apache.kafka.connect.file.FileStreamSourceConnector"));
      start(herder, Map.of("name", "file-sink", "tasks.max", "1", "topics", topic, "file", sink.toString(),
          "connector.class", "org.apache.kafka.connect.file.FileStreamSinkConnector"));
      int want = Files.readAllLines(source, StandardCharsets.UTF_8).size();
      long deadline = System.currentTimeMillis() + DEADLINE_MS;
      while (lines(sink).size() < want) {
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException("the sink file has " + lines(sink).size() + " of " + want
              + " lines after " + DEADLINE_MS + " ms");
        }
        Thread.sleep(100);
      }
    } finally {
      herder.stop();
    }
    Json.line("lines", lines(sink).size());
  }

  static void start(StandaloneHerder herder, Map<String, String> connector) throws Exception {
    FutureCallback<Herder.Created<ConnectorInfo>> done = new FutureCallback<>();
    herder.putConnectorConfig(connector.get("name"), connector, false, done);
    Herder.Created<ConnectorInfo> created = done.get(30, TimeUnit.SECONDS);
    Json.line("connector", created.result().name(), "started", created.created());
  }

  static List<String> lines(Path file) throws Exception {
    return Files.exists(file) ? Files.readAllLines(file, StandardCharsets.UTF_8) : List.of();
  }
}
