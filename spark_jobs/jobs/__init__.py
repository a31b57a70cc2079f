"""The audit jobs: each a module with a ``main()`` that spark-submit can run (reconcile, ledger,
replicas, replay) and that ``strait audit ...`` calls."""
