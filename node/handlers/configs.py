"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Topic configs live in ZooKeeper (``/config/topics/<t>``) as overrides of the broker's
defaults. AlterConfigs replaces a topic's whole override set; IncrementalAlterConfigs
applies SET / DELETE / APPEND / SUBTRACT to it. Broker configs can be described but are
static in strait (edit server.properties and restart).

Authorisation (Kafka's): describing a topic's configs needs DESCRIBE_CONFIGS on the topic
(TOPIC_AUTHORIZATION_FAILED), a broker's (or broker logger's) DESCRIBE_CONFIGS on the cluster
(CLUSTER_AUTHORIZATION_FAILED); altering needs ALTER_CONFIGS likewise. The check comes first, so
a refused resource learns nothing about whether it exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.config import (
    ConfigEntry,
    ConfigError,
    NodeConfig,
    apply_incremental,
    describe_broker_config,
    describe_topic_config,
)
from node.errors import BrokerError
from node.protocol import ErrorCode, Struct
from node.request import Request
from node.security._acl import CLUSTER_NAME, AclOperation, ResourceType

from ._services import NO_AUTHORIZER, MetadataView, SecurityServices, TopicAdmin

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


@dataclass(frozen=True, slots=True)
class ConfigServices:
    metadata: MetadataView
    admin: TopicAdmin
    config: NodeConfig
    security: SecurityServices = NO_AUTHORIZER


def _check_access(services: ConfigServices, request: Request, res: Struct, operation: AclOperation) -> None:
    """BrokerError unless the principal may ``operation`` the resource's configs; other resource types pass here."""
    if res.resource_type == TOPIC:
        services.security.check(request, operation, ResourceType.TOPIC, res.resource_name)
    elif res.resource_type in (BROKER, BROKER_LOGGER):
        services.security.check(request, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def _entry(e: ConfigEntry, *, synonyms: bool, documentation: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "read_only": e.read_only,
        "config_source": int(e.source),
        "is_default": e.is_default,
        "is_sensitive": e.is_sensitive,
        "synonyms": [{"name": n, "value": v, "source": int(s)} for n, v, s in e.synonyms] if synonyms else [],
        "config_type": int(e.config_type),
        "documentation": e.documentation if documentation else None,
    }


def _describe(services: ConfigServices, res: Struct) -> list[ConfigEntry]:
    config = services.config
    if res.resource_type == TOPIC:
        topic = services.metadata.topics.get(res.resource_name)
        if topic is None:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name!r} does not exist")
        return describe_topic_config(config, topic.overrides)
    if res.resource_type == BROKER:
        if res.resource_name not in ("", str(config.broker_id)):
            raise BrokerError(
                ErrorCode.INVALID_REQUEST,
                f"broker {res.resource_name!r}: send DescribeConfigs for a broker to that broker "
                f"(this is broker {config.broker_id})",
            )
        return describe_broker_config(config)
    raise BrokerError(ErrorCode.INVALID_REQUEST, f"resource type {res.resource_type} is not supported")


async def handle_describe_configs(services: ConfigServices, request: Request) -> dict[str, Any]:
    req = request.body
    results = []
    synonyms = request.api_version >= 1 and req.include_synonyms
    documentation = request.api_version >= 3 and req.include_documentation
    for res in req.resources:
        result: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "configs": [],
        }
        try:
            _check_access(services, request, res, AclOperation.DESCRIBE_CONFIGS)
            entries = _describe(services, res)
            wanted = None if res.configuration_keys is None else set(res.configuration_keys)
            result["configs"] = [
                _entry(e, synonyms=synonyms, documentation=documentation)
                for e in entries
                if wanted is None or e.name in wanted
            ]
        except BrokerError as exc:
            result["error_code"] = exc.code
            result["error_message"] = exc.message
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def _alter_result(res: Struct, code: int = 0, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": res.resource_type,
        "resource_name": res.resource_name,
    }


def _check_topic_resource(res: Struct) -> None:
    if res.resource_type == BROKER:
        raise BrokerError(
            ErrorCode.INVALID_REQUEST, "broker configs are static in strait: edit server.properties and restart"
        )
    if res.resource_type != TOPIC:
        raise BrokerError(ErrorCode.INVALID_REQUEST, f"resource type {res.resource_type} is not supported")


async def handle_alter_configs(services: ConfigServices, request: Request) -> dict[str, Any]:
    req = request.body
    responses = []
    for res in req.resources:
        try:
            _check_access(services, request, res, AclOperation.ALTER_CONFIGS)
            _check_topic_resource(res)
            overrides = {c.name: c.value for c in res.configs if c.value is not None}
            await services.admin.set_topic_config(res.resource_name, overrides, validate_only=req.validate_only)
            responses.append(_alter_result(res))
        except BrokerError as exc:
            responses.append(_alter_result(res, exc.code, exc.message))
    return {"throttle_time_ms": 0, "responses": responses}


async def handle_incremental_alter_configs(services: ConfigServices, request: Request) -> dict[str, Any]:
    req = request.body
    responses = []
    for res in req.resources:
        try:
            _check_access(services, request, res, AclOperation.ALTER_CONFIGS)
            _check_topic_resource(res)
            topic = services.metadata.topics.get(res.resource_name)
            if topic is None:
                raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name!r} does not exist")
            try:
                updated = apply_incremental(
                    topic.overrides, [(c.name, c.config_operation, c.value) for c in res.configs]
                )
            except (ConfigError, ValueError) as exc:
                raise BrokerError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            await services.admin.set_topic_config(res.resource_name, updated, validate_only=req.validate_only)
            responses.append(_alter_result(res))
        except BrokerError as exc:
            responses.append(_alter_result(res, exc.code, exc.message))
    return {"throttle_time_ms": 0, "responses": responses}
