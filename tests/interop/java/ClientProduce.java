import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own producer (acks=all, idempotent) sends {@code count} records to {@code topic} with
 * one compression codec and prints, per record, where it landed:
 * {@code {"key", "value", "partition", "offset"}}; then {@code {"sent": count}}.
 *
 * <p>Usage: {@code ClientProduce <bootstrap> <topic> <count> <codec>} (codec: none, gzip,
 * snappy, lz4, zstd). Keys are {@code key-<i>}, values {@code value-<i>-<codec>}, every record
 * has the header {@code codec=<codec>}. Any failed send ends the program with its exception.
 */
public final class ClientProduce {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    int count = Integer.parseInt(args[2]);
    String codec = args[3];
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
    props.put(ProducerConfig.LINGER_MS_CONFIG, "20"); // several records per batch, so the codec has work
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "strait-java-produce");
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "45000");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("codec", codec.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        sent.add(producer.send(new ProducerRecord<>(topic, null, "key-" + i, "value-" + i + "-" + codec, headers)));
      }
      producer.flush();
      for (int i = 0; i < count; i++) {
        RecordMetadata md = sent.get(i).get();
        Json.line("key", "key-" + i, "value", "value-" + i + "-" + codec, "partition", md.partition(),
            "offset", md.offset());
      }
    }
    Json.line("sent", count);
  }
}
