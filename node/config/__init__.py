"""A node's configuration: ``server.properties`` with Kafka's key names, and topic-level configs.

One declaration per key. :class:`NodeConfig` is the broker's key table: each typed attribute
is declared with the Kafka key(s) it is read from (``_broker.py``); :data:`TOPIC_KEYS` holds the
topic-level keys beside it (``_topic.py``). Validation, DescribeConfigs and the reference in
docs/configuration.md are derived from the two tables.

Modules: ``_properties`` (the Java ``.properties`` reader), ``_listeners`` (``NAME://host:port``
and each listener name's security protocol), ``_listener_security`` (``listener.name.<listener>.*``
overrides and what each listener's TLS and SASL use), ``_keys`` (value types and checks, and
:func:`setting`, which declares an attribute from keys),
``_broker`` (:class:`NodeConfig`, :func:`load_config`), ``_topic`` (topic keys, effective values,
incremental alters), ``_describe`` (DescribeConfigs entries), ``_docs`` (the generated docs;
``python -m node.config docs/configuration.md`` rewrites them). Every error is a
:class:`ConfigError`.
"""

from ._broker import BROKER_KEY_INDEX as BROKER_KEY_INDEX
from ._broker import BROKER_KEYS as BROKER_KEYS
from ._broker import HOUR_MS as HOUR_MS
from ._broker import MINUTE_MS as MINUTE_MS
from ._broker import NO_EFFECT_KEYS as NO_EFFECT_KEYS
from ._broker import NodeConfig as NodeConfig
from ._broker import load_config as load_config
from ._describe import BROKER_SYNONYMS as BROKER_SYNONYMS
from ._describe import ConfigEntry as ConfigEntry
from ._describe import broker_synonyms as broker_synonyms
from ._describe import describe_broker_config as describe_broker_config
from ._describe import describe_topic_config as describe_topic_config
from ._docs import render_broker_reference as render_broker_reference
from ._docs import render_listener_reference as render_listener_reference
from ._docs import render_topic_reference as render_topic_reference
from ._docs import update_docs as update_docs
from ._errors import ConfigError as ConfigError
from ._keys import COMPRESSION_TYPES as COMPRESSION_TYPES
from ._keys import HIDDEN as HIDDEN
from ._keys import INT_MAX as INT_MAX
from ._keys import LONG_MAX as LONG_MAX
from ._keys import SHORT_MAX as SHORT_MAX
from ._keys import ConfigKey as ConfigKey
from ._keys import ConfigType as ConfigType
from ._keys import Setting as Setting
from ._keys import Value as Value
from ._keys import ValueSpec as ValueSpec
from ._keys import check_non_empty_list as check_non_empty_list
from ._keys import check_ratio as check_ratio
from ._keys import setting as setting
from ._listener_security import OVERRIDE_PREFIX as OVERRIDE_PREFIX
from ._listener_security import ListenerOverride as ListenerOverride
from ._listener_security import ListenerSecurity as ListenerSecurity
from ._listener_security import override_key as override_key
from ._listeners import SECURITY_PROTOCOLS as SECURITY_PROTOCOLS
from ._listeners import WILDCARD_HOSTS as WILDCARD_HOSTS
from ._listeners import Listener as Listener
from ._listeners import parse_host_port as parse_host_port
from ._listeners import parse_listeners as parse_listeners
from ._properties import parse_properties as parse_properties
from ._topic import FENCED as FENCED
from ._topic import KAFKA_ONLY_TOPIC_KEYS as KAFKA_ONLY_TOPIC_KEYS
from ._topic import LIST_KEYS as LIST_KEYS
from ._topic import MIRROR_LINK as MIRROR_LINK
from ._topic import OP_APPEND as OP_APPEND
from ._topic import OP_DELETE as OP_DELETE
from ._topic import OP_SET as OP_SET
from ._topic import OP_SUBTRACT as OP_SUBTRACT
from ._topic import TOPIC_KEY_INDEX as TOPIC_KEY_INDEX
from ._topic import TOPIC_KEYS as TOPIC_KEYS
from ._topic import ConfigSource as ConfigSource
from ._topic import Synonym as Synonym
from ._topic import TopicKey as TopicKey
from ._topic import TopicPolicy as TopicPolicy
from ._topic import apply_incremental as apply_incremental
from ._topic import check_fence_text as check_fence_text
from ._topic import check_link_name as check_link_name
from ._topic import effective_log_config as effective_log_config
from ._topic import effective_policy as effective_policy
from ._topic import validate_topic_config as validate_topic_config
