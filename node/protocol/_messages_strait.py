"""Schemas of strait's own APIs, which Kafka does not have. Their keys start at 1000.

Written in the same notation as Kafka's, never flexible (no tagged fields, no compact
encodings), so that a Kafka client library's plain encoders can speak them too.

MirrorAppend (1000): the mirror service hands the target site's partition leader whole record
batches copied from the source site, to be appended at the offsets they carry. The contract
is in docs/node.md ("Mirror topics"); the broker side is ``node.handlers.mirror``.
"""

from __future__ import annotations

from ._schema import INT16, INT32, INT64, RECORDS, STRING, A, ApiKey, ApiSchema, F, S

# fmt: off
MIRROR_APPEND = ApiSchema(
    ApiKey.MIRROR_APPEND, "MirrorAppend", max_version=0, flexible_from=None,
    request=S(
        F("link", STRING),  # the link appending: must equal the topic's strait.mirror.link
        F("timeout_ms", INT32),  # how long to wait for the appended data to be committed
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("index", INT32),
                F("expected_end_offset", INT64),  # append only if the log ends here
                F("start_offset", INT64, default=-1),  # the source's log start when past our end; -1: no jump
                F("records", RECORDS, nullable="0+"),  # whole batches from expected end (or start_offset)
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("log_end_offset", INT64, default=-1),
                F("high_watermark", INT64, default=-1),
                F("log_start_offset", INT64, default=-1),
            ))),
        ))),
    ),
)
# fmt: on

STRAIT_APIS = (MIRROR_APPEND,)
