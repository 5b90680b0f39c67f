"""The job store contract suite's fixtures: ``backend`` (one per store kind, :mod:`stores`)
and the session's throwaway PostgreSQL cluster (:mod:`pg`)."""

from pg import pg_cluster
from stores import backend

__all__ = ["backend", "pg_cluster"]
