# The two commands of the README: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CACHE ?= .cache
KAFKA_JARS := $(CACHE)/kafka-jars
RDKAFKA_PERF := $(CACHE)/rdkafka-perf/rdkafka_performance

.PHONY: setup run test lint bench compat rdkafka-perf clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "strait needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,spark,ops]'
	touch $@

$(KAFKA_JARS)/.ok: .ci/fetch-kafka-jars | $(BIN)/python
	.ci/fetch-kafka-jars $(KAFKA_JARS) $(BIN)/pip

setup: $(VENV)/.installed
	.ci/ensure-java
	.ci/ensure-kcat
	.ci/ensure-chromium
	.ci/ensure-xfsprogs
	.ci/ensure-ansible-hosts

run: setup
	$(BIN)/strait up --dir .strait

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: setup $(KAFKA_JARS)/.ok $(RDKAFKA_PERF) lint
	STRAIT_KAFKA_JARS=$(abspath $(KAFKA_JARS)) $(BIN)/pytest -n 2 --dist loadscope

# docs/compatibility.md: record which API versions each real client sends in the node and interop
# integration tests (docs/client-usage.json), then rewrite the page from it (strait/compat.py).
compat: setup $(KAFKA_JARS)/.ok
	STRAIT_KAFKA_JARS=$(abspath $(KAFKA_JARS)) $(BIN)/pytest tests/node tests/interop -m integration -n 2 \
		--client-usage docs/client-usage.json
	$(BIN)/python -m strait.compat

bench: setup $(RDKAFKA_PERF)
	$(BIN)/python -m bench.storage_bench --out bench/results
	$(BIN)/python -m bench.node_bench --out bench/results
	$(BIN)/python -m bench.replication_bench --out bench/results

# librdkafka's rdkafka_performance for bench/node_bench.py and its test (root on Debian: apt)
$(RDKAFKA_PERF): bench/build_rdkafka_performance.sh
	bench/build_rdkafka_performance.sh $(CACHE)/rdkafka-perf

rdkafka-perf: $(RDKAFKA_PERF)

clean:
	rm -rf $(VENV) $(CACHE) .strait-demo .strait
