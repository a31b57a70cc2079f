"""SASL for a node's SASL_PLAINTEXT and SASL_SSL listeners: which mechanisms, whose credentials.

:class:`ServerSasl` is built once per SASL listener from the node's config, with that listener's
``listener.name.<listener>.*`` overrides, else the node-wide keys: the enabled mechanisms
(``sasl.enabled.mechanisms``), the PLAIN users (``user_<name>`` options of the PlainLoginModule
entry for PLAIN, ``listener.name.<listener>.plain.sasl.jaas.config`` or ``sasl.jaas.config``, and
``strait.sasl.plain.users.file``), the SCRAM credentials (a look-up into the site's store,
``node.security.SecurityStore``), and the limits the server applies before and after
authentication (``sasl.server.max.receive.size``, ``connections.max.reauth.ms`` per mechanism).
The server (``node.server``) runs the exchange itself.
"""

from __future__ import annotations

from collections.abc import Callable

from node.config import ConfigError, NodeConfig
from node.security._jaas import parse_jaas_config
from node.security._plain import load_plain_users
from node.security._sasl import SaslServer
from node.security._scram import ScramCredential
from node.security._servers import new_server

__all__ = ["ServerSasl"]

ScramLookup = Callable[[str, str], ScramCredential | None]


class ServerSasl:
    """The SASL side of one listener of the node (see the module docstring)."""

    def __init__(self, config: NodeConfig, listener_name: str, scram_lookup: ScramLookup | None) -> None:
        """Raises ConfigError when the PLAIN users file cannot be read or parsed; KeyError for a
        listener name that is not in ``listeners``."""
        security = config.security_of(listener_name)
        self.listener_name = listener_name
        self.mechanisms: tuple[str, ...] = security.sasl_mechanisms
        plain: dict[str, str] = {}
        jaas = security.jaas_config("PLAIN")
        if jaas is not None:
            plain |= parse_jaas_config(jaas).plain_users()
        if config.sasl_plain_users_file is not None:
            try:
                plain |= load_plain_users(config.sasl_plain_users_file)
            except (ValueError, OSError) as exc:
                raise ConfigError(
                    str(exc), key="strait.sasl.plain.users.file", value=config.sasl_plain_users_file
                ) from None
        self._plain = plain if "PLAIN" in self.mechanisms else None
        self._scram = scram_lookup
        self._reauth_ms = dict(security.reauth_ms)
        self.max_receive_size = security.sasl_server_max_receive_size
        self.failure_delay_s = config.connection_failed_authentication_delay_ms / 1000

    def reauth_ms(self, mechanism: str) -> int:
        """How long a session authenticated with ``mechanism`` lasts (connections.max.reauth.ms; 0: no expiry)."""
        return self._reauth_ms.get(mechanism, 0)

    def exchange(self, mechanism: str) -> SaslServer | None:
        """A new server for one exchange, or None when ``mechanism`` is not enabled here."""
        if mechanism not in self.mechanisms:
            return None
        scram = self._scram if mechanism.startswith("SCRAM-") else None
        if mechanism.startswith("SCRAM-") and scram is None:
            return None
        return new_server(mechanism, plain_users=self._plain, scram_lookup=scram)
