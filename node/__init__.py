"""The broker node: Kafka wire protocol, replication, coordination (arrives with issue 3 onwards)."""
