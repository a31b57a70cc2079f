"""The sans-IO Kafka wire codec: request frames to typed Structs, typed responses to frames.

Nothing here touches sockets or trio. The broker reads a frame, calls ``read_request_header`` and
``decode_request``, and writes the parts of ``encode_response``; the client uses ``encode_request``
and ``decode_response``. Schemas are declared per API up to its highest non-flexible version
(ApiVersions: 0-4), in this package's own notation (``_schema``).
"""

from ._catalog import advertised_ranges as advertised_ranges
from ._catalog import all_schemas as all_schemas
from ._catalog import schema as schema
from ._error_codes import ErrorCode as ErrorCode
from ._error_codes import ErrorInfo as ErrorInfo
from ._error_codes import error_info as error_info
from ._errors import EncodeError as EncodeError
from ._errors import MalformedRequest as MalformedRequest
from ._errors import MalformedResponse as MalformedResponse
from ._errors import ProtocolError as ProtocolError
from ._errors import UnknownApi as UnknownApi
from ._errors import UnsupportedVersion as UnsupportedVersion
from ._frame import EncodedFrame as EncodedFrame
from ._frame import api_versions_fallback as api_versions_fallback
from ._frame import decode_request as decode_request
from ._frame import decode_response as decode_response
from ._frame import encode_request as encode_request
from ._frame import encode_request_parts as encode_request_parts
from ._frame import encode_response as encode_response
from ._frame import read_request_header as read_request_header
from ._frame import request_header as request_header
from ._header import RequestHeader as RequestHeader
from ._schema import ApiKey as ApiKey
from ._schema import ApiSchema as ApiSchema
from ._struct import Region as Region
from ._struct import Struct as Struct
