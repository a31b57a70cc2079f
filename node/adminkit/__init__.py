"""The admin HTTP kit every strait service's admin API is built with (the node's, the mirror's).

- ``serve_admin``: serve an ASGI app with hypercorn on trio, binding the socket itself (port 0
  works), with a bounded graceful shutdown;
- ``admin_app``: the Starlette app around a service's routes, with ``/health``, ``/metrics``,
  ``/openapi.json``, JSON errors and request bodies refused unread;
- ``json_error`` and friends: the one error shape ``{"error": <code>, "detail": <message>}``;
- ``openapi_document`` and the ``*_path`` / schema helpers: the shared parts of each API's
  OpenAPI 3.1 document.
"""

from ._app import Exposition as Exposition
from ._app import admin_app as admin_app
from ._app import error_response as error_response
from ._app import error_schema as error_schema
from ._app import health_path as health_path
from ._app import json_content as json_content
from ._app import metrics_path as metrics_path
from ._app import openapi_document as openapi_document
from ._app import openapi_path as openapi_path
from ._app import schema_ref as schema_ref
from ._errors import RefuseBodies as RefuseBodies
from ._errors import json_error as json_error
from ._errors import json_http_error as json_http_error
from ._errors import json_internal_error as json_internal_error
from ._server import AdminTls as AdminTls
from ._server import serve_admin as serve_admin
