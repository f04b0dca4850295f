// A small driver of Kafka's own Java clients for kafkalog's tests (tests/kafka/).
//
// Reads one JSON spec on stdin: {"bootstrap": "127.0.0.1:9092", "steps": [...]}, runs the steps in
// order and prints one JSON object per line on stdout.  Bytes travel as base64 (null stays null).
//
// Steps ("op"):
//   create_topics  {"topics": [{"name", "partitions", "configs": {k: v}}]}
//   producer       {"name", "config": {k: v}}   (initTransactions() when transactional.id is set)
//   begin | commit | abort | flush | close   {"producer"}
//   abandon        {"producer"}   left as it is (an open transaction stays open) and never closed
//   send           {"producer", "topic", "partition", "records": [{"key", "value", "timestamp",
//                   "headers": [[key, value]]}], "flush": bool}   -> {"op":"sent", "offsets":[...]}
//                  (a record over 1 KiB is sent in a batch of its own)
//   send_forever   {"producer", "topic", "partitions", "value_size", "records_per_flush"}
//                  sends until the process is killed; prints {"op":"acked", ...} after each flush
//   consume        {"topic", "partitions", "isolation", "group"?: id, "commit"?: bool}
//                  every record from the beginning offset to the end offset the consumer sees
//                  (the last stable offset under read_committed) -> {"op":"record", ...} lines,
//                  then {"op":"consumed", "topic", "isolation", "beginning", "end"}
//   consume_from   {"topic", "partition", "isolation", "starts": [...], "count", "config"?: {k: v}}
//                  for each start offset: seek there, poll the first `count` records below the
//                  end offset -> {"op":"from", "topic", "partition", "isolation", "start",
//                  "offsets": [...], "values": [b64...]}; "config": consumer settings (a short
//                  fetch.max.wait.ms: a seek does not wait for the fetch in flight at the end)
//   offsets        {"topic", "partitions", "isolation", "timestamps": [...]}
//                  -> {"op":"offsets", "topic", "partition", "isolation", "beginning", "end",
//                      "for_times": [[target, offset|null, timestamp|null], ...]}
//   list_offsets   {"topic", "partitions", "isolation"}   (Admin: earliest, latest, max timestamp)
//   dump_log       {"class", "args": [...]}   runs kafka-dump-log's main in this JVM
//                  -> {"op":"dump_log", "stdout": b64, "stderr": b64, "error": message|null}
//                  (both streams captured as UTF-8, whatever the platform's default charset)
//   sleep          {"ms"}
//   alter_topic    {"topic", "configs": {k: v}}   sets the topic's configs (Admin
//                  incrementalAlterConfigs) -> {"op":"altered", "topic"}
//   await_stable   {"topic", "partition", "timeout_ms"?}   waits until the last stable offset reaches
//                  the high watermark (every transaction marker written) -> {"op":"stable", "end"}
//   producers      {"topic", "partition", "abort_open"?: bool}   the partition's producer state as the
//                  broker holds it (Admin describeProducers) -> {"op":"producers", "topic", "partition",
//                  "producers": [{"producerId", "producerEpoch", "lastSequence", "lastTimestamp",
//                  "coordinatorEpoch", "txnStartOffset"}]} (-1: none); "abort_open": then each open
//                  transaction is aborted by the broker (Admin abortTransaction writes the ABORT
//                  marker) -> {"op":"aborted_txn", "producerId", "txnStartOffset"} per transaction
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaTool {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Base64.Encoder B64 = Base64.getEncoder();
    static final Base64.Decoder UNB64 = Base64.getDecoder();
    static String bootstrap;
    static final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
    static final List<KafkaProducer<byte[], byte[]>> abandoned = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        JsonNode spec = JSON.readTree(System.in);
        bootstrap = spec.get("bootstrap").asText();
        for (JsonNode step : spec.get("steps")) {
            run(step);
        }
        for (KafkaProducer<byte[], byte[]> p : producers.values()) {
            p.close(Duration.ofSeconds(30));
        }
        System.out.flush();
        System.exit(0);  // abandoned producers are never closed
    }

    static void emit(ObjectNode line) {
        System.out.println(line.toString());
        System.out.flush();
    }

    static byte[] bytes(JsonNode n) {
        return n == null || n.isNull() ? null : UNB64.decode(n.asText());
    }

    static String b64(byte[] b) {
        return b == null ? null : B64.encodeToString(b);
    }

    static Properties props(JsonNode config) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        if (config != null) {
            Iterator<Map.Entry<String, JsonNode>> it = config.fields();
            while (it.hasNext()) {
                Map.Entry<String, JsonNode> e = it.next();
                p.put(e.getKey(), e.getValue().asText());
            }
        }
        return p;
    }

    static List<Integer> partitions(JsonNode step) {
        List<Integer> out = new ArrayList<>();
        for (JsonNode n : step.get("partitions")) out.add(n.asInt());
        return out;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String isolation, String group) {
        return consumer(isolation, group, null);
    }

    // the consumer above with a step's "config" (consumer settings) on top
    static KafkaConsumer<byte[], byte[]> consumer(String isolation, String group, JsonNode config) {
        Properties p = props(null);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("max.partition.fetch.bytes", String.valueOf(4 << 20));
        if (group != null) p.put("group.id", group);
        if (config != null) p.putAll(props(config));
        return new KafkaConsumer<>(p);
    }

    static void run(JsonNode step) throws Exception {
        String op = step.get("op").asText();
        switch (op) {
            case "create_topics": {
                try (Admin admin = Admin.create(props(null))) {
                    List<NewTopic> topics = new ArrayList<>();
                    for (JsonNode t : step.get("topics")) {
                        Map<String, String> configs = new HashMap<>();
                        JsonNode c = t.get("configs");
                        if (c != null) {
                            Iterator<Map.Entry<String, JsonNode>> it = c.fields();
                            while (it.hasNext()) {
                                Map.Entry<String, JsonNode> e = it.next();
                                configs.put(e.getKey(), e.getValue().asText());
                            }
                        }
                        int n = t.has("partitions") ? t.get("partitions").asInt() : 1;
                        topics.add(new NewTopic(t.get("name").asText(), n, (short) 1).configs(configs));
                    }
                    admin.createTopics(topics).all().get();
                }
                ObjectNode out = JSON.createObjectNode();
                out.put("op", "created");
                emit(out);
                break;
            }
            case "producer": {
                Properties p = props(step.get("config"));
                p.put("key.serializer", ByteArraySerializer.class.getName());
                p.put("value.serializer", ByteArraySerializer.class.getName());
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
                if (p.containsKey("transactional.id")) producer.initTransactions();
                producers.put(step.get("name").asText(), producer);
                break;
            }
            case "begin":
                producers.get(step.get("producer").asText()).beginTransaction();
                break;
            case "commit":
                producers.get(step.get("producer").asText()).commitTransaction();
                break;
            case "abort":
                producers.get(step.get("producer").asText()).abortTransaction();
                break;
            case "flush":
                producers.get(step.get("producer").asText()).flush();
                break;
            case "abandon":
                abandoned.add(producers.remove(step.get("producer").asText()));
                break;
            case "close":
                producers.remove(step.get("producer").asText()).close(Duration.ofSeconds(30));
                break;
            case "send": {
                KafkaProducer<byte[], byte[]> producer = producers.get(step.get("producer").asText());
                String topic = step.get("topic").asText();
                Integer partition = step.has("partition") ? step.get("partition").asInt() : null;
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (JsonNode r : step.get("records")) {
                    List<Header> headers = new ArrayList<>();
                    if (r.has("headers")) {
                        for (JsonNode h : r.get("headers")) {
                            headers.add(new RecordHeader(h.get(0).asText(), bytes(h.get(1))));
                        }
                    }
                    JsonNode ts = r.get("timestamp");
                    Long timestamp = ts == null || ts.isNull() ? null : ts.asLong();
                    byte[] key = bytes(r.get("key"));
                    byte[] value = bytes(r.get("value"));
                    // a large record goes in a batch of its own: the producer sizes compressed
                    // batches by the compression ratio it has seen, so an incompressible record
                    // among compressible ones could make a batch larger than a small segment
                    boolean alone = (key == null ? 0 : key.length) + (value == null ? 0 : value.length) > 1024;
                    if (alone) producer.flush();
                    sent.add(producer.send(new ProducerRecord<>(topic, partition, timestamp, key, value,
                            headers)));
                    if (alone) producer.flush();
                }
                if (step.has("flush") && step.get("flush").asBoolean()) {
                    producer.flush();
                    ObjectNode out = JSON.createObjectNode();
                    out.put("op", "sent");
                    ArrayNode offsets = out.putArray("offsets");
                    for (Future<RecordMetadata> f : sent) offsets.add(f.get().offset());
                    emit(out);
                }
                break;
            }
            case "send_forever": {
                KafkaProducer<byte[], byte[]> producer = producers.get(step.get("producer").asText());
                String topic = step.get("topic").asText();
                List<Integer> parts = partitions(step);
                int size = step.get("value_size").asInt();
                int perFlush = step.get("records_per_flush").asInt();
                Random random = new Random(7);
                long n = 0;
                while (true) {
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = 0; i < perFlush; i++, n++) {
                        byte[] value = new byte[size];
                        random.nextBytes(value);
                        byte[] key = ("k" + n).getBytes(StandardCharsets.UTF_8);
                        sent.add(producer.send(new ProducerRecord<>(topic, parts.get((int) (n % parts.size())),
                                key, value)));
                    }
                    producer.flush();
                    for (Future<RecordMetadata> f : sent) f.get();
                    ObjectNode out = JSON.createObjectNode();
                    out.put("op", "acked");
                    out.put("count", n);
                    emit(out);
                }
            }
            case "consume": {
                String topic = step.get("topic").asText();
                String isolation = step.get("isolation").asText();
                String group = step.has("group") ? step.get("group").asText() : null;
                List<TopicPartition> tps = new ArrayList<>();
                for (int p : partitions(step)) tps.add(new TopicPartition(topic, p));
                try (KafkaConsumer<byte[], byte[]> c = consumer(isolation, group)) {
                    c.assign(tps);
                    Map<TopicPartition, Long> beginning = c.beginningOffsets(tps);
                    Map<TopicPartition, Long> end = c.endOffsets(tps);
                    c.seekToBeginning(tps);
                    long deadline = System.currentTimeMillis() + 120_000;
                    while (true) {
                        boolean done = true;
                        for (TopicPartition tp : tps) {
                            if (c.position(tp) < end.get(tp)) done = false;
                        }
                        if (done) break;
                        if (System.currentTimeMillis() > deadline) {
                            throw new IllegalStateException("consuming " + topic + " timed out");
                        }
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                            if (r.offset() >= end.get(new TopicPartition(r.topic(), r.partition()))) continue;
                            ObjectNode out = JSON.createObjectNode();
                            out.put("op", "record");
                            out.put("isolation", isolation);
                            out.put("topic", r.topic());
                            out.put("partition", r.partition());
                            out.put("offset", r.offset());
                            out.put("key", b64(r.key()));
                            out.put("value", b64(r.value()));
                            ArrayNode hs = out.putArray("headers");
                            for (Header h : r.headers()) {
                                ArrayNode pair = hs.addArray();
                                pair.add(h.key());
                                pair.add(b64(h.value()));
                            }
                            out.put("timestamp", r.timestamp());
                            out.put("timestampType", r.timestampType().id);
                            out.put("leaderEpoch", r.leaderEpoch().orElse(-1));
                            emit(out);
                        }
                    }
                    if (group != null && step.has("commit") && step.get("commit").asBoolean()) {
                        c.commitSync();
                    }
                    ObjectNode out = JSON.createObjectNode();
                    out.put("op", "consumed");
                    out.put("topic", topic);
                    out.put("isolation", isolation);
                    ObjectNode b = out.putObject("beginning");
                    ObjectNode e = out.putObject("end");
                    for (TopicPartition tp : tps) {
                        b.put(String.valueOf(tp.partition()), beginning.get(tp));
                        e.put(String.valueOf(tp.partition()), end.get(tp));
                    }
                    emit(out);
                }
                break;
            }
            case "consume_from": {
                String topic = step.get("topic").asText();
                String isolation = step.get("isolation").asText();
                TopicPartition tp = new TopicPartition(topic, step.get("partition").asInt());
                int count = step.get("count").asInt();
                try (KafkaConsumer<byte[], byte[]> c = consumer(isolation, null, step.get("config"))) {
                    c.assign(List.of(tp));
                    long end = c.endOffsets(List.of(tp)).get(tp);
                    for (JsonNode s : step.get("starts")) {
                        c.seek(tp, s.asLong());
                        ObjectNode out = JSON.createObjectNode();
                        out.put("op", "from");
                        out.put("topic", topic);
                        out.put("partition", tp.partition());
                        out.put("isolation", isolation);
                        out.put("start", s.asLong());
                        ArrayNode offsets = out.putArray("offsets");
                        ArrayNode values = out.putArray("values");
                        long deadline = System.currentTimeMillis() + 60_000;
                        while (offsets.size() < count && c.position(tp) < end) {
                            if (System.currentTimeMillis() > deadline) {
                                throw new IllegalStateException("consuming " + tp + " timed out");
                            }
                            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                                if (r.offset() >= end || offsets.size() >= count) continue;
                                offsets.add(r.offset());
                                values.add(b64(r.value()));
                            }
                        }
                        emit(out);
                    }
                }
                break;
            }
            case "offsets": {
                String topic = step.get("topic").asText();
                String isolation = step.get("isolation").asText();
                List<TopicPartition> tps = new ArrayList<>();
                for (int p : partitions(step)) tps.add(new TopicPartition(topic, p));
                try (KafkaConsumer<byte[], byte[]> c = consumer(isolation, null)) {
                    Map<TopicPartition, Long> beginning = c.beginningOffsets(tps);
                    Map<TopicPartition, Long> end = c.endOffsets(tps);
                    Map<TopicPartition, ArrayNode> forTimes = new HashMap<>();
                    for (TopicPartition tp : tps) forTimes.put(tp, JSON.createArrayNode());
                    for (JsonNode t : step.get("timestamps")) {
                        Map<TopicPartition, Long> query = new HashMap<>();
                        for (TopicPartition tp : tps) query.put(tp, t.asLong());
                        Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(query);
                        for (TopicPartition tp : tps) {
                            OffsetAndTimestamp o = found.get(tp);
                            ArrayNode row = forTimes.get(tp).addArray();
                            row.add(t.asLong());
                            if (o == null) {
                                row.addNull();
                                row.addNull();
                            } else {
                                row.add(o.offset());
                                row.add(o.timestamp());
                            }
                        }
                    }
                    for (TopicPartition tp : tps) {
                        ObjectNode out = JSON.createObjectNode();
                        out.put("op", "offsets");
                        out.put("topic", topic);
                        out.put("partition", tp.partition());
                        out.put("isolation", isolation);
                        out.put("beginning", beginning.get(tp));
                        out.put("end", end.get(tp));
                        out.set("for_times", forTimes.get(tp));
                        emit(out);
                    }
                }
                break;
            }
            case "list_offsets": {
                String topic = step.get("topic").asText();
                IsolationLevel isolation = step.get("isolation").asText().equals("read_committed")
                        ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED;
                try (Admin admin = Admin.create(props(null))) {
                    for (int p : partitions(step)) {
                        TopicPartition tp = new TopicPartition(topic, p);
                        ObjectNode out = JSON.createObjectNode();
                        out.put("op", "list_offsets");
                        out.put("topic", topic);
                        out.put("partition", p);
                        out.put("isolation", step.get("isolation").asText());
                        Map<String, OffsetSpec> specs = Map.of(
                                "earliest", OffsetSpec.earliest(),
                                "latest", OffsetSpec.latest(),
                                "max_timestamp", OffsetSpec.maxTimestamp(),
                                "earliest_local", OffsetSpec.earliestLocal());
                        for (Map.Entry<String, OffsetSpec> s : specs.entrySet()) {
                            ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(
                                    Map.of(tp, s.getValue()), new ListOffsetsOptions(isolation))
                                    .partitionResult(tp).get();
                            ObjectNode o = out.putObject(s.getKey());
                            o.put("offset", info.offset());
                            o.put("timestamp", info.timestamp());
                            o.put("leaderEpoch", info.leaderEpoch().orElse(-1));
                        }
                        emit(out);
                    }
                }
                break;
            }
            case "dump_log": {
                List<String> argv = new ArrayList<>();
                for (JsonNode a : step.get("args")) argv.add(a.asText());
                java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
                java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
                java.io.PrintStream stdout = System.out;
                java.io.PrintStream stderr = System.err;
                String error = null;
                System.setOut(new java.io.PrintStream(out, true, StandardCharsets.UTF_8));
                System.setErr(new java.io.PrintStream(err, true, StandardCharsets.UTF_8));
                try {
                    Class.forName(step.get("class").asText())
                            .getMethod("main", String[].class)
                            .invoke(null, (Object) argv.toArray(new String[0]));
                } catch (java.lang.reflect.InvocationTargetException e) {
                    error = String.valueOf(e.getCause());
                } finally {
                    System.out.flush();
                    System.err.flush();
                    System.setOut(stdout);
                    System.setErr(stderr);
                }
                ObjectNode line = JSON.createObjectNode();
                line.put("op", "dump_log");
                line.put("stdout", b64(out.toByteArray()));
                line.put("stderr", b64(err.toByteArray()));
                line.put("error", error);
                emit(line);
                break;
            }
            case "sleep":
                Thread.sleep(step.get("ms").asLong());
                break;
            case "alter_topic": {
                String topic = step.get("topic").asText();
                List<AlterConfigOp> ops = new ArrayList<>();
                Iterator<Map.Entry<String, JsonNode>> it = step.get("configs").fields();
                while (it.hasNext()) {
                    Map.Entry<String, JsonNode> e = it.next();
                    ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()),
                            AlterConfigOp.OpType.SET));
                }
                try (Admin admin = Admin.create(props(null))) {
                    admin.incrementalAlterConfigs(Map.of(
                            new ConfigResource(ConfigResource.Type.TOPIC, topic), ops)).all().get();
                }
                ObjectNode out = JSON.createObjectNode();
                out.put("op", "altered");
                out.put("topic", topic);
                emit(out);
                break;
            }
            case "await_stable": {
                TopicPartition tp = new TopicPartition(step.get("topic").asText(), step.get("partition").asInt());
                long timeout = step.has("timeout_ms") ? step.get("timeout_ms").asLong() : 60_000;
                long deadline = System.currentTimeMillis() + timeout;
                try (Admin admin = Admin.create(props(null))) {
                    while (true) {
                        long hw = admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                                new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).partitionResult(tp).get().offset();
                        long lso = admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(tp).get().offset();
                        if (lso == hw) {
                            ObjectNode out = JSON.createObjectNode();
                            out.put("op", "stable");
                            out.put("end", hw);
                            emit(out);
                            break;
                        }
                        if (System.currentTimeMillis() > deadline) {
                            throw new IllegalStateException(tp + ": last stable offset " + lso
                                    + " did not reach the high watermark " + hw);
                        }
                        Thread.sleep(100);
                    }
                }
                break;
            }
            case "producers": {
                TopicPartition tp = new TopicPartition(step.get("topic").asText(), step.get("partition").asInt());
                boolean abortOpen = step.has("abort_open") && step.get("abort_open").asBoolean();
                try (Admin admin = Admin.create(props(null))) {
                    List<org.apache.kafka.clients.admin.ProducerState> states =
                            admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
                    ObjectNode out = JSON.createObjectNode();
                    out.put("op", "producers");
                    out.put("topic", tp.topic());
                    out.put("partition", tp.partition());
                    ArrayNode list = out.putArray("producers");
                    for (org.apache.kafka.clients.admin.ProducerState s : states) {
                        ObjectNode o = list.addObject();
                        o.put("producerId", s.producerId());
                        o.put("producerEpoch", s.producerEpoch());
                        o.put("lastSequence", s.lastSequence());
                        o.put("lastTimestamp", s.lastTimestamp());
                        o.put("coordinatorEpoch", s.coordinatorEpoch().orElse(-1));
                        o.put("txnStartOffset", s.currentTransactionStartOffset().orElse(-1L));
                    }
                    emit(out);
                    if (abortOpen) {
                        for (org.apache.kafka.clients.admin.ProducerState s : states) {
                            if (s.currentTransactionStartOffset().isEmpty()) continue;
                            admin.abortTransaction(new org.apache.kafka.clients.admin.AbortTransactionSpec(
                                    tp, s.producerId(), (short) s.producerEpoch(),
                                    s.coordinatorEpoch().orElse(0))).all().get();
                            ObjectNode a = JSON.createObjectNode();
                            a.put("op", "aborted_txn");
                            a.put("producerId", s.producerId());
                            a.put("txnStartOffset", s.currentTransactionStartOffset().getAsLong());
                            emit(a);
                        }
                    }
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }
}
