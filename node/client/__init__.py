"""strait's own trio client for talking Kafka to nodes (admin commands, mirror, failover), and the
small ASGI-on-trio HTTP server every admin API uses (`serve_admin`)."""

from ._admin import AdminClient as AdminClient
from ._admin import TopicDescription as TopicDescription
from ._connection import ClientError as ClientError
from ._connection import NodeConnection as NodeConnection
from ._groups import GroupAdmin as GroupAdmin
from ._groups import GroupDescription as GroupDescription
from ._http import RefuseBodies as RefuseBodies
from ._http import json_error as json_error
from ._http import json_http_error as json_http_error
from ._http import serve_admin as serve_admin
from ._mirror import MirrorAppendResult as MirrorAppendResult
from ._mirror import mirror_append as mirror_append
