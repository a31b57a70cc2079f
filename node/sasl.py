"""SASL for a node's SASL_PLAINTEXT and SASL_SSL listeners: which mechanisms, whose credentials.

:class:`ServerSasl` is built once per node from its config: the enabled mechanisms
(``sasl.enabled.mechanisms``), the PLAIN users (``user_<name>`` options of a PlainLoginModule in
``sasl.jaas.config``, and ``strait.sasl.plain.users.file``), the SCRAM credentials (a look-up
into the site's store, ``node.security.SecurityStore``), and the limits the server applies
before and after authentication. The server (``node.server``) runs the exchange itself.
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
    """The SASL side of a node's listeners (see the module docstring)."""

    def __init__(self, config: NodeConfig, scram_lookup: ScramLookup | None) -> None:
        """Raises ConfigError when the PLAIN users file cannot be read or parsed."""
        self.mechanisms: tuple[str, ...] = config.sasl_enabled_mechanisms
        plain: dict[str, str] = {}
        if config.sasl_jaas_config is not None:
            plain |= parse_jaas_config(config.sasl_jaas_config).plain_users()
        if config.sasl_plain_users_file is not None:
            try:
                plain |= load_plain_users(config.sasl_plain_users_file)
            except (ValueError, OSError) as exc:
                raise ConfigError(
                    str(exc), key="strait.sasl.plain.users.file", value=config.sasl_plain_users_file
                ) from None
        self._plain = plain if "PLAIN" in self.mechanisms else None
        self._scram = scram_lookup
        self.max_receive_size = config.sasl_server_max_receive_size
        self.failure_delay_s = config.connection_failed_authentication_delay_ms / 1000
        self.reauth_ms = config.connections_max_reauth_ms

    def exchange(self, mechanism: str) -> SaslServer | None:
        """A new server for one exchange, or None when ``mechanism`` is not enabled here."""
        if mechanism not in self.mechanisms:
            return None
        scram = self._scram if mechanism.startswith("SCRAM-") else None
        if mechanism.startswith("SCRAM-") and scram is None:
            return None
        return new_server(mechanism, plain_users=self._plain, scram_lookup=scram)
