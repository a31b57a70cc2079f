"""Fault injection and verification suite (docs/chaos.md).

The suite, Jepsen's split (``strait chaos run|check|list``):

- ``chaos.history`` -- the JSON Lines history every workload, fault and failover writes;
- ``chaos.workloads`` -- the producers, the consumer group, the mirror reader and the final reads;
- ``chaos.checkers`` -- the offline checkers: pure functions from a history to named anomalies;
- ``chaos.appliance`` -- the two sites and the mirror a run starts, every link through the proxy;
  ``chaos.existing`` -- sites the operator runs, driven by commands; ``chaos.sites`` -- what
  both give the faults and the runner;
- ``chaos.faults`` -- the catalog of faults a schedule draws from; ``chaos.scenarios`` --
  scenarios, matrices and the seeded schedule; ``chaos.runner`` -- runs them and checks;
- ``chaos.report`` -- report.html from results.json and the histories.

The parts underneath, which tests also use on their own:

- ``chaos.proxy`` -- a toxiproxy-compatible TCP fault proxy (latency, bandwidth, black holes,
  resets, ...) with toxiproxy's HTTP API, an in-process handle for tests and a CLI;
- ``chaos.ledger`` -- the ledger of acknowledged writes and the checker that finds lost, moved,
  duplicated and conflicting records;
- ``chaos.workload`` -- a producer workload that fills the ledger, and the read-back for the check;
- ``chaos.nemesis`` -- the faults, each with ``start`` and ``heal``: kill -9 and pause of a process
  group, network partitions through the proxy, disk faults on loop-mounted XFS images;
- ``chaos.transient`` -- the Kafka states that pass on their own, which a wait treats as "not yet";
- ``chaos.errors`` -- ``ChaosError`` and its subclasses.

The package imports nothing on its own, so importing one module does not pull in the others'
dependencies (trio and hypercorn for the proxy, confluent-kafka for the workload).
"""
