import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

/**
 * One JSON object per line on stdout: the Java client programs' results, which the Python tests
 * parse ({@code tests/interop/test_java_client.py}). Only what those programs print: strings,
 * numbers, booleans, null, lists and string-keyed maps.
 */
final class Json {
  private Json() {}

  /** Print {@code {"k1": v1, "k2": v2, ...}} on one line (keys and values alternate). */
  static void line(Object... keysAndValues) {
    System.out.println(obj(keysAndValues));
    System.out.flush();
  }

  static String obj(Object... keysAndValues) {
    if (keysAndValues.length % 2 != 0) {
      throw new IllegalArgumentException("keys and values must alternate: " + keysAndValues.length + " items");
    }
    StringBuilder sb = new StringBuilder("{");
    for (int i = 0; i < keysAndValues.length; i += 2) {
      if (i > 0) sb.append(", ");
      sb.append(value(String.valueOf(keysAndValues[i]))).append(": ").append(value(keysAndValues[i + 1]));
    }
    return sb.append('}').toString();
  }

  /** A value already rendered as JSON (an {@link #obj} result), kept as it is inside another value. */
  record Raw(String json) {}

  static Raw raw(String json) {
    return new Raw(json);
  }

  static String value(Object v) {
    if (v == null) return "null";
    if (v instanceof Raw r) return r.json();
    if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short) return v.toString();
    if (v instanceof Map<?, ?> m) {
      List<Object> kv = new ArrayList<>();
      m.forEach((k, x) -> {
        kv.add(String.valueOf(k));
        kv.add(x);
      });
      return obj(kv.toArray());
    }
    if (v instanceof Collection<?> c) {
      StringBuilder sb = new StringBuilder("[");
      for (Object x : c) {
        if (sb.length() > 1) sb.append(", ");
        sb.append(value(x));
      }
      return sb.append(']').toString();
    }
    String s = v.toString();
    StringBuilder sb = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        default -> {
          if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
          else sb.append(c);
        }
      }
    }
    return sb.append('"').toString();
  }

  /** The exception and its causes, "Class: message; caused by Class: message". */
  static String describe(Throwable t) {
    StringBuilder sb = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (sb.length() > 0) sb.append("; caused by ");
      sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
    }
    return sb.toString();
  }
}
