import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * Kafka's Admin client's client quota calls against strait: {@code ClientQuotas <bootstrap>}.
 * Every call prints one line {@code {"op": <name>, ...what it returned}}, or
 * {@code {"op", "error": "<exception and causes>"}} when it failed (the program goes on); it
 * exits 0 once the scenario ran to its end, printing {@code {"done": "quotas"}}.
 *
 * <p>The scenario: alterClientQuotas (user alice with client id c1, the default client id, user
 * alice), describeClientQuotas with the filters {@code all}, {@code contains user=alice},
 * {@code containsOnly user=alice}, {@code containsOnly default client-id}; a validateOnly
 * alteration (not applied); an unknown key and a fractional byte rate (refused); a removal, and
 * describe all again.
 */
public final class ClientQuotas {
  /** One Admin call's line, or its failure: {@link ClientAdmin#op}. */
  static void op(String name, ClientAdmin.Call call) {
    ClientAdmin.op(name, call);
  }

  /** An entity of {@code type, name} pairs; a null name is the default entity. */
  static ClientQuotaEntity entity(String... typesAndNames) {
    Map<String, String> entries = new HashMap<>();
    for (int i = 0; i < typesAndNames.length; i += 2) {
      entries.put(typesAndNames[i], typesAndNames[i + 1]);
    }
    return new ClientQuotaEntity(entries);
  }

  static ClientQuotaAlteration set(ClientQuotaEntity entity, String key, Double value) {
    return new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op(key, value)));
  }

  static Object[] alter(Admin admin, boolean validateOnly, ClientQuotaAlteration... alterations) throws Exception {
    admin.alterClientQuotas(List.of(alterations), new AlterClientQuotasOptions().validateOnly(validateOnly))
        .all().get();
    return new Object[] {"altered", alterations.length};
  }

  /** {"entities": [{"entity": {type: name-or-null}, "values": {key: value}}, ...]} sorted by entity. */
  static Object[] describe(Admin admin, ClientQuotaFilter filter) throws Exception {
    Map<ClientQuotaEntity, Map<String, Double>> found = admin.describeClientQuotas(filter).entities().get();
    TreeMap<String, Object> sorted = new TreeMap<>();
    for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
      Map<String, Object> entry = new TreeMap<>();
      entry.put("entity", new TreeMap<>(e.getKey().entries()));
      entry.put("values", new TreeMap<>(e.getValue()));
      sorted.put(e.getKey().entries().toString(), entry);
    }
    return new Object[] {"entities", new ArrayList<>(sorted.values())};
  }

  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "strait-java-quotas");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    ClientQuotaEntity aliceC1 = entity(ClientQuotaEntity.USER, "alice", ClientQuotaEntity.CLIENT_ID, "c1");
    ClientQuotaEntity defaultClient = entity(ClientQuotaEntity.CLIENT_ID, null);
    ClientQuotaEntity alice = entity(ClientQuotaEntity.USER, "alice");
    try (Admin admin = Admin.create(props)) {
      op("alterClientQuotas", () -> alter(admin, false,
          set(aliceC1, "producer_byte_rate", 1024.0),
          set(defaultClient, "consumer_byte_rate", 2048.0),
          set(alice, "request_percentage", 12.5)));
      op("describeAll", () -> describe(admin, ClientQuotaFilter.all()));
      op("describeContainsAlice", () -> describe(admin,
          ClientQuotaFilter.contains(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice")))));
      op("describeOnlyAlice", () -> describe(admin,
          ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice")))));
      op("describeOnlyDefaultClient", () -> describe(admin, ClientQuotaFilter.containsOnly(
          List.of(ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.CLIENT_ID)))));
      op("validateOnly", () -> alter(admin, true, set(entity(ClientQuotaEntity.USER, "dave"), "producer_byte_rate", 5.0)));
      op("unknownKey", () -> alter(admin, false, set(alice, "bytes_per_fortnight", 1.0)));
      op("fractionalByteRate", () -> alter(admin, false, set(alice, "producer_byte_rate", 1.5)));
      op("remove", () -> alter(admin, false, set(aliceC1, "producer_byte_rate", null)));
      op("describeAllAgain", () -> describe(admin, ClientQuotaFilter.all()));
    }
    Json.line("done", "quotas");
  }
}
