"""The cross-site mirror service: links that keep a target site's mirror topics in step with a source site.

See docs/mirror.md. ``load_links`` reads the link file; ``LinkRunner(link).run()`` runs one link;
``MirrorService`` runs the links of a file with the admin API (docs/mirror-service.md).
"""

from ._admin import AdminApiError as AdminApiError
from ._admin import MirrorAdminClient as MirrorAdminClient
from ._config import ConfigError as ConfigError
from ._config import LinkConfig as LinkConfig
from ._config import MirrorError as MirrorError
from ._config import NameFilter as NameFilter
from ._config import SaslConfig as SaslConfig
from ._config import SiteRef as SiteRef
from ._config import TlsConfig as TlsConfig
from ._config import load_links as load_links
from ._config import parse_link as parse_link
from ._config import parse_links as parse_links
from ._config import parse_sasl as parse_sasl
from ._config import parse_tls as parse_tls
from ._copier import LATENCY_BUCKETS as LATENCY_BUCKETS
from ._copier import LatencyHistogram as LatencyHistogram
from ._copier import PartitionProgress as PartitionProgress
from ._dr import DrStatusSource as DrStatusSource
from ._groups import GroupState as GroupState
from ._groups import GroupSync as GroupSync
from ._link import LINK_KEY as LINK_KEY
from ._link import LinkRunner as LinkRunner
from ._link import Membership as Membership
from ._link import SoleMember as SoleMember
from ._members import ZkMembership as ZkMembership
from ._service import MirrorService as MirrorService
from ._service import ServiceReady as ServiceReady
