"""Fault injection and verification suite.

- ``chaos.proxy`` -- a toxiproxy-compatible TCP fault proxy (latency, bandwidth, black holes,
  resets, ...) with toxiproxy's HTTP API, an in-process handle for tests and a CLI;
- ``chaos.ledger`` -- the ledger of acknowledged writes and the checker that finds lost, moved,
  duplicated and conflicting records;
- ``chaos.workload`` -- a producer workload that fills the ledger, and the read-back for the check;
- ``chaos.nemesis`` -- the faults, each with ``start`` and ``heal``: kill -9 and pause of a process
  group, network partitions through the proxy;
- ``chaos.transient`` -- the Kafka states that pass on their own, which a wait treats as "not yet";
- ``chaos.errors`` -- ``ChaosError`` and its subclasses.

The package imports nothing on its own, so importing one module does not pull in the others'
dependencies (trio and hypercorn for the proxy, confluent-kafka for the workload).
"""
