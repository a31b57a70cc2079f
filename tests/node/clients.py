"""The four real Kafka clients behind one small interface, for the conformance tests.

Each client produces a list of records (partition, key, value, headers) with a codec, acks and
idempotence setting, and consumes partitions from the beginning with ``assign`` (no consumer
group), returning what it read with offsets. kcat runs as a real subprocess.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Protocol

Headers = tuple[tuple[str, bytes], ...]
DEADLINE_S = 60.0


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes
    headers: Headers = ()


@dataclass(frozen=True)
class Read:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: Headers
    timestamp: int = -1


@dataclass(frozen=True)
class Security:
    """How a client authenticates: Kafka's ``security.protocol`` and what it needs (PEM files for
    TLS; a SASL mechanism with a user and password). Each client spells it its own way."""

    protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ca: str | None = None  # the CA certificates the client trusts (PEM)
    cert: str | None = None  # the client's certificate (PEM), for ssl.client.auth
    key: str | None = None  # its private key (PEM)
    key_password: str | None = None
    mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    username: str | None = None
    password: str | None = None

    def librdkafka(self) -> dict[str, str]:
        """confluent-kafka's and kcat's settings."""
        pairs = {
            "security.protocol": self.protocol.lower(),
            "ssl.ca.location": self.ca,
            "ssl.certificate.location": self.cert,
            "ssl.key.location": self.key,
            "ssl.key.password": self.key_password,
            "sasl.mechanism": self.mechanism,
            "sasl.username": self.username,
            "sasl.password": self.password,
        }
        return {k: v for k, v in pairs.items() if v is not None}

    def kafka_python(self) -> dict[str, object]:
        pairs: dict[str, object] = {
            "security_protocol": self.protocol,
            "ssl_cafile": self.ca,
            "ssl_certfile": self.cert,
            "ssl_keyfile": self.key,
            "ssl_password": self.key_password,
            "sasl_mechanism": self.mechanism,
            "sasl_plain_username": self.username,
            "sasl_plain_password": self.password,
        }
        return {k: v for k, v in pairs.items() if v is not None}

    def aiokafka(self) -> dict[str, object]:
        pairs: dict[str, object] = {
            "security_protocol": self.protocol,
            "sasl_mechanism": self.mechanism,
            "sasl_plain_username": self.username,
            "sasl_plain_password": self.password,
        }
        if "SSL" in self.protocol:
            from aiokafka.helpers import create_ssl_context

            pairs["ssl_context"] = create_ssl_context(
                cafile=self.ca, certfile=self.cert, keyfile=self.key, password=self.key_password
            )
        return {k: v for k, v in pairs.items() if v is not None}


PLAINTEXT = Security()


class Client(Protocol):
    name: str

    def produce(
        self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> list[int]:
        """Offsets each record got (-1 with acks=0)."""
        ...

    def consume(self, bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Read]: ...


def _acks_int(acks: str) -> int:
    return {"all": -1, "-1": -1, "1": 1, "0": 0}[acks]


class ConfluentClient:
    name = "confluent-kafka"

    def __init__(self, security: Security = PLAINTEXT) -> None:
        self.security = security

    def produce(
        self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> list[int]:
        from confluent_kafka import Producer

        conf = {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "acks": acks,
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            **self.security.librdkafka(),
        }
        producer = Producer(conf)
        offsets = [-2] * len(recs)
        errors: list[str] = []

        def report(i: int):  # type: ignore[no-untyped-def]
            def cb(err, msg):  # type: ignore[no-untyped-def]
                if err is not None:
                    errors.append(str(err))
                else:
                    offsets[i] = msg.offset() if msg.offset() is not None else -1

            return cb

        for i, r in enumerate(recs):
            producer.produce(
                topic, r.value, r.key, partition=r.partition, headers=list(r.headers) or None, on_delivery=report(i)
            )
            producer.poll(0)
        left = producer.flush(DEADLINE_S)
        assert left == 0, f"{left} records undelivered"
        assert not errors, errors
        return [o if o is not None and o >= 0 else -1 for o in offsets]

    def consume(self, bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Read]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "strait-test-assign",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                **self.security.librdkafka(),
            }
        )
        out: list[Read] = []
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < count and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                headers = tuple((k, v) for k, v in (msg.headers() or []))
                out.append(Read(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
        finally:
            consumer.close()
        return out


class KafkaPythonClient:
    name = "kafka-python"

    def __init__(self, security: Security = PLAINTEXT) -> None:
        self.security = security

    def produce(
        self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> list[int]:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            acks=_acks_int(acks) if acks != "all" else "all",
            enable_idempotence=idempotent,
            linger_ms=5,
            **self.security.kafka_python(),
        )
        try:
            futures = [
                producer.send(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers))
                for r in recs
            ]
            producer.flush(DEADLINE_S)
            return [f.get(DEADLINE_S).offset for f in futures]
        finally:
            producer.close(DEADLINE_S)

    def consume(self, bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Read]:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **self.security.kafka_python()
        )
        out: list[Read] = []
        try:
            tps = [KTP(topic, p) for p in partitions]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < count and time.monotonic() < deadline:
                for tp, msgs in consumer.poll(timeout_ms=200).items():
                    for m in msgs:
                        headers = tuple((k, v) for k, v in m.headers)
                        out.append(Read(tp.partition, m.offset, m.key, m.value, headers, m.timestamp))
        finally:
            consumer.close()
        return out


class AioKafkaClient:
    name = "aiokafka"

    def __init__(self, security: Security = PLAINTEXT) -> None:
        self.security = security

    def produce(
        self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> list[int]:
        from aiokafka import AIOKafkaProducer

        async def run() -> list[int]:
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                compression_type=None if codec == "none" else codec,
                acks=_acks_int(acks) if acks != "all" else "all",
                enable_idempotence=idempotent,
                linger_ms=5,
                **self.security.aiokafka(),
            )
            await producer.start()
            try:
                futures = [
                    await producer.send(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers))
                    for r in recs
                ]
                results = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE_S)
                return [m.offset if m is not None else -1 for m in results]
            finally:
                await producer.stop()

        return asyncio.run(run())

    def consume(self, bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Read]:
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        async def run() -> list[Read]:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **self.security.aiokafka()
            )
            await consumer.start()
            out: list[Read] = []
            try:
                tps = [ATP(topic, p) for p in partitions]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                deadline = time.monotonic() + DEADLINE_S
                while len(out) < count and time.monotonic() < deadline:
                    batch = await consumer.getmany(timeout_ms=200)
                    for tp, msgs in batch.items():
                        for m in msgs:
                            headers = tuple((k, bytes(v)) for k, v in m.headers)
                            out.append(Read(tp.partition, m.offset, m.key, m.value, headers, m.timestamp))
            finally:
                await consumer.stop()
            return out

        return asyncio.run(run())


class KcatClient:
    """Debian's kcat (librdkafka 2.0.2). Keys and values must not contain tabs or newlines."""

    name = "kcat"

    def __init__(self, security: Security = PLAINTEXT) -> None:
        path = shutil.which("kcat")
        if path is None:
            raise RuntimeError("kcat is not installed: `apt-get install kcat` (make setup does it as root)")
        self.path = path
        self.security = security

    def _security_args(self) -> list[str]:
        return [arg for k, v in self.security.librdkafka().items() for arg in ("-X", f"{k}={v}")]

    def produce(
        self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> list[int]:
        # kcat -H applies headers to every record: group records by partition and headers.
        groups: dict[tuple[int, Headers], list[Rec]] = {}
        for r in recs:
            groups.setdefault((r.partition, r.headers), []).append(r)
        for (partition, headers), group in groups.items():
            args = [self.path, "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-z", codec, "-K", "\t"]
            args += ["-X", f"acks={acks}", "-X", f"enable.idempotence={str(idempotent).lower()}"]
            args += self._security_args()
            for k, v in headers:
                args += ["-H", f"{k}={v.decode()}"]
            lines = "".join(f"{(r.key or b'').decode()}\t{r.value.decode()}\n" for r in group)
            done = subprocess.run(args, input=lines.encode(), capture_output=True, timeout=DEADLINE_S, check=False)
            assert done.returncode == 0, done.stderr.decode()
        return [-1] * len(recs)

    def consume(self, bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Read]:
        out: list[Read] = []
        for p in partitions:
            args = [self.path, "-C", "-b", bootstrap, "-t", topic, "-p", str(p), "-o", "beginning", "-e", "-q"]
            args += ["-f", "%p\t%o\t%k\t%s\t%h\t%T\n", *self._security_args()]
            done = subprocess.run(args, capture_output=True, timeout=DEADLINE_S, check=False)
            assert done.returncode == 0, done.stderr.decode()
            for line in done.stdout.decode().splitlines():
                part, offset, key, value, headers, ts = line.split("\t")
                parsed: Headers = ()
                if headers:
                    parsed = tuple((h.split("=", 1)[0], h.split("=", 1)[1].encode()) for h in headers.split(",") if h)
                out.append(Read(int(part), int(offset), key.encode() or None, value.encode(), parsed, int(ts)))
        return out


CLIENTS: dict[str, type] = {
    "kcat": KcatClient,
    "confluent-kafka": ConfluentClient,
    "kafka-python": KafkaPythonClient,
    "aiokafka": AioKafkaClient,
}
