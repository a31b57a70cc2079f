"""Per-listener security: Kafka's ``listener.name.<listener>.<key>`` overrides, and what each listener uses.

The SSL and SASL keys are node-wide; a listener may override them as in Kafka (KIP-103), with
its name in lower case after ``listener.name.``::

    listener.name.internal.ssl.keystore.location=/etc/kafka/internal.pem
    listener.name.internal.ssl.client.auth=required
    listener.name.clients.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
    listener.name.clients.plain.sasl.jaas.config=org.apache...PlainLoginModule required user_alice="...";

What may be overridden (Kafka's channel settings that strait has):

- the ``ssl.*`` keys (:data:`TLS_KEYS`), on SSL and SASL_SSL listeners;
- ``sasl.enabled.mechanisms``, ``sasl.server.max.receive.size`` and ``connections.max.reauth.ms``
  (:data:`SASL_KEYS`), on SASL_PLAINTEXT and SASL_SSL listeners;
- per mechanism, with the mechanism's name in lower case: ``<mechanism>.sasl.jaas.config`` and
  ``<mechanism>.connections.max.reauth.ms`` (:data:`MECHANISM_KEYS`), for a mechanism the listener
  enables. A JAAS entry for ``plain`` must use PlainLoginModule (its ``user_<name>`` options are
  the listener's PLAIN users).

Precedence, highest first: the mechanism's override, the listener's override, the node-wide key
(``sasl.jaas.config``: the mechanism's override, else the node-wide key, which Kafka ignores on a
broker and strait keeps for every mechanism). One rule is Kafka's and not a fallback: on a
SASL_SSL listener the node-wide ``ssl.client.auth`` does not apply (the client authenticates
with SASL); only the listener's own ``ssl.client.auth`` asks for client certificates there.

Refused, with a :class:`~node.config.ConfigError` naming the full key (a password's value is
shown as ``[hidden]``): a listener name that is not in ``listeners`` or not in lower case (Kafka
would silently ignore it), a key that cannot be set per listener, ``sasl.jaas.config`` without a
mechanism (Kafka ignores it), a mechanism that is unknown, not in lower case or not enabled on
the listener, a key for a protocol the listener does not speak, and a bad value.

:func:`parse_overrides` reads the keys; :func:`resolve_listener_security` gives one listener's
:class:`ListenerSecurity`. Pure: no files are read here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from node.security._jaas import PLAIN_MODULE, parse_jaas_config
from node.security._sasl import MECHANISMS

from ._errors import ConfigError
from ._keys import HIDDEN, ConfigKey, Value, looks_secret
from ._listeners import Listener

__all__ = [
    "MECHANISM_KEYS",
    "OVERRIDE_PREFIX",
    "SASL_KEYS",
    "TLS_KEYS",
    "ListenerOverride",
    "ListenerSecurity",
    "override_key",
    "parse_overrides",
    "resolve_listener_security",
]

OVERRIDE_PREFIX = "listener.name."
TLS_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules",
)
SASL_KEYS = ("sasl.enabled.mechanisms", "sasl.server.max.receive.size", "connections.max.reauth.ms")
MECHANISM_KEYS = ("sasl.jaas.config", "connections.max.reauth.ms")
_PER_LISTENER = TLS_KEYS + SASL_KEYS
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_REFUSED_MECHANISMS = ("GSSAPI", "OAUTHBEARER")
_WHAT_MAY = (
    "a listener may override the ssl.* keys, sasl.enabled.mechanisms, sasl.server.max.receive.size, "
    "connections.max.reauth.ms and, per mechanism, <mechanism>.sasl.jaas.config and "
    "<mechanism>.connections.max.reauth.ms"
)


def override_key(listener: str, key: str, mechanism: str | None = None) -> str:
    """The full name of ``key`` overridden on ``listener`` (for ``mechanism``), as Kafka spells it:
    ``listener.name.clients.scram-sha-512.sasl.jaas.config``."""
    middle = f"{mechanism.lower()}." if mechanism else ""
    return f"{OVERRIDE_PREFIX}{listener.lower()}.{middle}{key}"


@dataclass(frozen=True)
class ListenerOverride:
    """One ``listener.name.<listener>.[<mechanism>.]<key>`` setting.

    ``listener`` is upper case (as in ``listeners``), ``mechanism`` upper case or None, ``base``
    the key it overrides; ``value`` is typed as the base key's, ``text`` its canonical form.
    Values stay out of the repr (a JAAS entry holds passwords).
    """

    key: str
    listener: str
    mechanism: str | None
    base: str
    value: Value = field(repr=False)
    text: str = field(repr=False)


@dataclass(frozen=True)
class ListenerSecurity:
    """What one listener's TLS and SASL use: its overrides, else the node-wide keys (see the module docstring).

    ``jaas_configs`` and ``reauth_ms`` hold one pair per mechanism the listener enables (a JAAS
    entry only where one is set); ``sources`` names, per (mechanism or None, key), the key the
    value was read from, so that errors name the key to fix (:meth:`key_of`).
    """

    listener: str
    protocol: str
    keystore_location: str | None
    key_password: str | None = field(repr=False)
    truststore_location: str | None
    client_auth: str
    enabled_protocols: tuple[str, ...]
    endpoint_identification_algorithm: str
    principal_mapping_rules: str
    sasl_mechanisms: tuple[str, ...]
    sasl_server_max_receive_size: int
    jaas_configs: tuple[tuple[str, str], ...] = field(repr=False)
    reauth_ms: tuple[tuple[str, int], ...]
    sources: tuple[tuple[str | None, str, str], ...] = field(repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in _TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in _SASL_PROTOCOLS

    def key_of(self, key: str, mechanism: str | None = None) -> str:
        """The key ``key``'s value (for ``mechanism``) was read from: an override's full name, or ``key``."""
        for source_mechanism, base, name in self.sources:
            if base == key and source_mechanism == mechanism:
                return name
        return key

    def jaas_config(self, mechanism: str) -> str | None:
        """The JAAS entry ``mechanism`` uses on this listener (its override, else sasl.jaas.config), or None."""
        return dict(self.jaas_configs).get(mechanism)

    def reauth_ms_for(self, mechanism: str) -> int:
        """connections.max.reauth.ms for a session authenticated with ``mechanism`` (0: no expiry)."""
        return dict(self.reauth_ms).get(mechanism, 0)


def parse_overrides(
    props: Mapping[str, str],
    index: Mapping[str, ConfigKey],
    listeners: Sequence[Listener],
    protocols: Mapping[str, str],
    node_values: Mapping[str, Value],
    *,
    source: str,
) -> tuple[ListenerOverride, ...]:
    """Every ``listener.name.*`` key of ``props``, checked and typed, in file order.

    ``index`` finds a node-wide key by name (its value spec checks the override's value),
    ``listeners`` and ``protocols`` are the node's (already checked), ``node_values`` the parsed
    node-wide values (``sasl.enabled.mechanisms``). Raises ConfigError naming ``source`` and the
    full key, with a password's value hidden, for everything the module docstring lists.
    """
    overrides = tuple(
        _parse_one(key, raw, index, listeners, protocols, source)
        for key, raw in props.items()
        if key.startswith(OVERRIDE_PREFIX)
    )
    for override in overrides:
        if override.mechanism is None:
            continue
        listener_mechanisms = _override_for(override.listener, "sasl.enabled.mechanisms", overrides)
        enabled = node_values["sasl.enabled.mechanisms"] if listener_mechanisms is None else listener_mechanisms.value
        assert isinstance(enabled, tuple)
        if override.mechanism not in enabled:
            where = "sasl.enabled.mechanisms" if listener_mechanisms is None else listener_mechanisms.key
            raise ConfigError(
                f"{override.mechanism} is not enabled on listener {override.listener} ({where}={','.join(enabled)})",
                key=override.key,
                value=HIDDEN if looks_secret(override.key) else override.text,
                source=source,
            )
    return overrides


def _parse_one(
    key: str,
    raw: str,
    index: Mapping[str, ConfigKey],
    listeners: Sequence[Listener],
    protocols: Mapping[str, str],
    source: str,
) -> ListenerOverride:
    shown = HIDDEN if looks_secret(key) else raw

    def refused(reason: str) -> ConfigError:
        return ConfigError(reason, key=key, value=shown, source=source)

    name, dot, setting = key[len(OVERRIDE_PREFIX) :].partition(".")
    if not name or not dot or not setting:
        raise refused(f"is not {OVERRIDE_PREFIX}<listener>.<key>")
    if name != name.lower():
        raise refused(f"the listener name is read in lower case, as Kafka reads it: {OVERRIDE_PREFIX}{name.lower()}.")
    listener = next((x for x in listeners if x.name == name.upper()), None)
    if listener is None:
        names = ", ".join(str(x) for x in listeners)
        raise refused(f"listener name {name.upper()} is not in listeners ({names})")
    try:
        mechanism, base = _split_setting(setting, index)
    except ValueError as exc:
        raise refused(str(exc)) from None
    protocol = protocols[listener.name]
    if base in TLS_KEYS and protocol not in _TLS_PROTOCOLS:
        raise refused(f"listener {listener.name} is {protocol}: ssl.* keys apply to SSL and SASL_SSL")
    if base not in TLS_KEYS and protocol not in _SASL_PROTOCOLS:
        raise refused(f"listener {listener.name} is {protocol}: SASL keys apply to SASL_PLAINTEXT and SASL_SSL")
    spec = index[base]
    try:
        value = spec.parse(raw)
    except ValueError as exc:
        raise refused(str(exc)) from None
    if base == "sasl.jaas.config" and mechanism == "PLAIN" and parse_jaas_config(str(value)).module != PLAIN_MODULE:
        raise refused(f'PLAIN\'s users come from a {PLAIN_MODULE} entry (user_<name>="<password>" options)')
    return ListenerOverride(key, listener.name, mechanism, base, value, spec.render(value))


def _split_setting(setting: str, index: Mapping[str, ConfigKey]) -> tuple[str | None, str]:
    """(mechanism or None, the overridden key) of what follows ``listener.name.<listener>.``;
    ValueError(reason) for a key that cannot be overridden."""
    if setting in _PER_LISTENER:
        return None, setting
    if setting == "sasl.jaas.config":
        raise ValueError(
            "a listener's JAAS entry is per mechanism: <mechanism>.sasl.jaas.config, e.g. "
            "scram-sha-512.sasl.jaas.config (Kafka ignores sasl.jaas.config with only a listener prefix)"
        )
    prefix, dot, rest = setting.partition(".")
    if dot and rest in MECHANISM_KEYS:
        mechanism = prefix.upper()
        if mechanism in _REFUSED_MECHANISMS:
            raise ValueError(f"{mechanism} is not supported; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        if mechanism not in MECHANISMS:
            raise ValueError(f"{prefix!r} is not a SASL mechanism (plain, scram-sha-256, scram-sha-512)")
        if prefix != prefix.lower():
            raise ValueError(f"the mechanism is read in lower case, as Kafka reads it: {prefix.lower()}.{rest}")
        return mechanism, rest
    if setting in index:
        raise ValueError(f"{setting} cannot be set per listener; {_WHAT_MAY}")
    choices = [*_PER_LISTENER, *(f"plain.{k}" for k in MECHANISM_KEYS)]
    close = difflib.get_close_matches(setting, choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown key {setting!r}{hint}; {_WHAT_MAY}")


def _override_for(
    listener: str, key: str, overrides: Sequence[ListenerOverride], mechanism: str | None = None
) -> ListenerOverride | None:
    """The override that sets ``key`` on ``listener``: the mechanism's, else the listener's; None without one."""
    for wanted in (mechanism, None) if mechanism else (None,):
        for override in overrides:
            if override.listener == listener and override.base == key and override.mechanism == wanted:
                return override
    return None


def resolve_listener_security(
    listener: Listener, protocol: str, node_values: Mapping[str, Value], overrides: Sequence[ListenerOverride]
) -> ListenerSecurity:
    """The settings ``listener`` (whose security protocol is ``protocol``) uses: its ``overrides``
    (from :func:`parse_overrides`), else ``node_values`` (the parsed node-wide keys, defaults included)."""
    name = listener.name
    sources: list[tuple[str | None, str, str]] = []

    def pick(key: str, mechanism: str | None = None) -> Value | None:
        override = _override_for(name, key, overrides, mechanism)
        if override is None:
            return node_values.get(key)
        sources.append((mechanism, key, override.key))
        return override.value

    client_auth = pick("ssl.client.auth")
    if protocol == "SASL_SSL" and _override_for(name, "ssl.client.auth", overrides) is None:
        client_auth = "none"  # Kafka: only a listener's own ssl.client.auth applies to SASL_SSL
    mechanisms = pick("sasl.enabled.mechanisms")
    assert isinstance(mechanisms, tuple)
    jaas: list[tuple[str, str]] = []
    reauth: list[tuple[str, int]] = []
    for mechanism in mechanisms:
        entry = pick("sasl.jaas.config", mechanism)
        if entry is not None:
            jaas.append((mechanism, str(entry)))
        ms = pick("connections.max.reauth.ms", mechanism)
        assert isinstance(ms, int)
        reauth.append((mechanism, ms))
    keystore, password, truststore = (pick(k) for k in ("ssl.keystore.location", "ssl.key.password",
                                                        "ssl.truststore.location"))  # fmt: skip
    receive, protocols = pick("sasl.server.max.receive.size"), pick("ssl.enabled.protocols")
    assert isinstance(receive, int) and isinstance(protocols, tuple)
    return ListenerSecurity(
        listener=name,
        protocol=protocol,
        keystore_location=None if keystore is None else str(keystore),
        key_password=None if password is None else str(password),
        truststore_location=None if truststore is None else str(truststore),
        client_auth=str(client_auth),
        enabled_protocols=protocols,
        endpoint_identification_algorithm=str(pick("ssl.endpoint.identification.algorithm")),
        principal_mapping_rules=str(pick("ssl.principal.mapping.rules")),
        sasl_mechanisms=mechanisms,
        sasl_server_max_receive_size=receive,
        jaas_configs=tuple(jaas),
        reauth_ms=tuple(reauth),
        sources=tuple(dict.fromkeys(sources)),
    )
