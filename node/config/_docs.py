"""The generated reference sections of docs/configuration.md, rendered from the key tables.

The page is hand-written prose around sections between ``<!-- BEGIN GENERATED name ... -->``
and ``<!-- END GENERATED name -->``; :func:`update_docs` rewrites only those. Regenerate the
page with ``python -m node.config docs/configuration.md``; a unit test fails when it drifts.
"""

from __future__ import annotations

import re

from ._broker import BROKER_KEY_INDEX, BROKER_KEYS
from ._listener_security import MECHANISM_KEYS, SASL_KEYS, TLS_KEYS
from ._topic import TOPIC_KEYS

__all__ = ["render_broker_reference", "render_listener_reference", "render_topic_reference", "update_docs"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_broker_reference() -> str:
    """The Markdown reference of every broker key, derived from :data:`BROKER_KEYS` (for docs/configuration.md)."""
    lines: list[str] = []
    groups = list(dict.fromkeys(k.group for k in BROKER_KEYS if k.effect))
    header = ["| Key | Type | Default | Valid values | Topic key | Meaning |", "|---|---|---|---|---|---|"]
    for group in groups:
        lines += [f"### {group}", "", *header]
        for key in (k for k in BROKER_KEYS if k.effect and k.group == group):
            default = "*(required)*" if key.required else "*(none)*" if key.default is None else f"`{key.default}`"
            topic = f"`{key.topic_key}`" if key.topic_key else ""
            lines.append(
                f"| `{key.name}` | {key.type.name.lower()} | {default} | {_cell(key.describe_valid())} "
                f"| {topic} | {_cell(key.doc)} |"
            )
        lines.append("")
    lines += ["### Accepted, no effect", "", "| Key | Type | Default | Valid values |", "|---|---|---|---|"]
    for key in (k for k in BROKER_KEYS if not k.effect):
        lines.append(f"| `{key.name}` | {key.type.name.lower()} | `{key.default}` | {key.describe_valid()} |")
    return "\n".join(lines) + "\n"


def render_listener_reference() -> str:
    """The Markdown table of the keys a listener may override (``listener.name.<listener>.<key>``),
    derived from ``_listener_security``'s key lists (for docs/configuration.md)."""
    lines = [
        "| After `listener.name.<listener>.` | Type | On listeners | When not set |",
        "|---|---|---|---|",
    ]
    for name in TLS_KEYS:
        fallback = "`none` on SASL_SSL; `ssl.client.auth` on SSL" if name == "ssl.client.auth" else f"`{name}`"
        lines.append(f"| `{name}` | {BROKER_KEY_INDEX[name].type.name.lower()} | SSL, SASL_SSL | {fallback} |")
    for name in SASL_KEYS:
        lines.append(f"| `{name}` | {BROKER_KEY_INDEX[name].type.name.lower()} | SASL_PLAINTEXT, SASL_SSL | `{name}` |")
    for name in MECHANISM_KEYS:
        fallback = f"`listener.name.<listener>.{name}`, then `{name}`" if name in SASL_KEYS else f"`{name}`"
        lines.append(
            f"| `<mechanism>.{name}` | {BROKER_KEY_INDEX[name].type.name.lower()} "
            f"| SASL_PLAINTEXT, SASL_SSL, for a mechanism the listener enables | {fallback} |"
        )
    return "\n".join(lines) + "\n"


def render_topic_reference() -> str:
    """The Markdown reference of every topic key, derived from :data:`TOPIC_KEYS` (for docs/configuration.md)."""
    lines = [
        "| Topic key | Type | Defaults from (in precedence order) | Valid values | Meaning |",
        "|---|---|---|---|---|",
    ]
    for key in (k for k in TOPIC_KEYS if k.effect):
        chain = [f"`{n}`" for n in key.older_names] + [f"`{b.name}`" for b in key.broker_keys] or ["none"]
        lines.append(
            f"| `{key.name}` | {key.type.name.lower()} | {', '.join(chain)} | {key.describe_valid()} | {key.doc} |"
        )
    lines += [
        "",
        "Accepted for compatibility with Kafka (tools and clients set them), stored and described, but without "
        "effect in strait:",
        "",
        "| Topic key | Type | Default | Valid values | Why |",
        "|---|---|---|---|---|",
    ]
    for key in (k for k in TOPIC_KEYS if not k.effect):
        lines.append(
            f"| `{key.name}` | {key.type.name.lower()} | `{key.default}` | {key.describe_valid()} | {key.doc} |"
        )
    return "\n".join(lines) + "\n"


def _replace_section(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN GENERATED {name}\b[^\n]*-->\n)(.*?)(<!-- END GENERATED {name} -->)", re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"docs have no generated section {name!r}")
    return pattern.sub(lambda m: m.group(1) + "\n" + body + "\n" + m.group(3), text, count=1)


def update_docs(text: str) -> str:
    """``text`` (docs/configuration.md) with its generated key references rewritten from the tables.

    Raises ValueError when a ``<!-- BEGIN GENERATED name -->`` / ``<!-- END GENERATED name -->`` pair is missing.
    """
    text = _replace_section(text, "broker-keys", render_broker_reference())
    text = _replace_section(text, "listener-keys", render_listener_reference())
    return _replace_section(text, "topic-keys", render_topic_reference())
