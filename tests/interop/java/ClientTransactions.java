import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own transactional producer against strait, as a consume-transform-produce step:
 * {@code ClientTransactions <bootstrap> <input> <output> <group> <transactional.id>}.
 *
 * <ol>
 *   <li>initTransactions;
 *   <li>transaction 1: five records {@code committed-1-<i>} to {@code output},
 *       sendOffsetsToTransaction({@code input}-0 at 5) for {@code group}, commitTransaction;
 *   <li>transaction 2: five records {@code aborted-<i>}, flushed (so they are in the log),
 *       abortTransaction;
 *   <li>transaction 3: five records {@code committed-2-<i>}, sendOffsetsToTransaction(10), commit;
 *   <li>a second producer with the same transactional.id fences the first: the first one's next
 *       send fails with ProducerFencedException.
 * </ol>
 *
 * Every step prints {@code {"step": ...}}; an unexpected exception ends the program with it.
 * The test reads {@code output} back with read_committed and read_uncommitted consumers.
 */
public final class ClientTransactions {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String input = args[1];
    String output = args[2];
    String group = args[3];
    String txnId = args[4];
    Properties cp = new Properties();
    cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    try (KafkaProducer<String, String> producer = producer(bootstrap, txnId);
        KafkaConsumer<String, String> consumer =
            new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
      TopicPartition in0 = new TopicPartition(input, 0);
      producer.initTransactions();
      Json.line("step", "initTransactions");

      transaction(producer, consumer, output, "committed-1-", in0, 5);
      producer.commitTransaction();
      Json.line("step", "commitTransaction", "n", 1);

      producer.beginTransaction();
      for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(output, 0, "a" + i, "aborted-" + i));
      producer.flush();
      producer.abortTransaction();
      Json.line("step", "abortTransaction");

      transaction(producer, consumer, output, "committed-2-", in0, 10);
      producer.commitTransaction();
      Json.line("step", "commitTransaction", "n", 2);

      try (KafkaProducer<String, String> zombieKiller = producer(bootstrap, txnId)) {
        zombieKiller.initTransactions();
        Json.line("step", "initTransactions", "by", "second producer");
        try {
          producer.beginTransaction();
          producer.send(new ProducerRecord<>(output, 0, "z", "zombie")).get();
          producer.commitTransaction();
          Json.line("step", "fenced", "fenced", false);
        } catch (Exception e) {
          Throwable c = e.getCause() != null ? e.getCause() : e;
          boolean fenced = e instanceof ProducerFencedException || c instanceof ProducerFencedException;
          Json.line("step", "fenced", "fenced", fenced, "error", Json.describe(e));
        }
      }
    }
    Json.line("done", true);
  }

  static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    pp.put(ProducerConfig.CLIENT_ID_CONFIG, "strait-java-txn");
    pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
    pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
    pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    return new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer());
  }

  static void transaction(KafkaProducer<String, String> producer, KafkaConsumer<String, String> consumer,
      String output, String prefix, TopicPartition consumed, long consumedTo) throws Exception {
    producer.beginTransaction();
    for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(output, 0, "c" + i, prefix + i));
    producer.sendOffsetsToTransaction(Map.of(consumed, new OffsetAndMetadata(consumedTo)), consumer.groupMetadata());
    Json.line("step", "sendOffsetsToTransaction", "offset", consumedTo);
  }
}
