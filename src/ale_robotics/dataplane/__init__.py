"""A shared-memory data plane for interactive sessions whose client shares the evaluator's host.

Through gRPC a Step costs two processes' worth of HTTP/2 and protobuf (about 8 µs of
CPU per env step in a 64-env Step, ~0.3 ms of round trip for one env: see
docs/benchmarks.md), more than EnvPool's whole overhead. When the agent reaches the
evaluator through a Unix socket it shares the evaluator's kernel, so Step and Reset
can go through memory both map instead: gRPC stays the control plane (GetSpec,
OpenSession, CloseSession, Render, budgets, errors outside a Step), and
OpenDataPlane hands the client one channel per session.

* :mod:`.layout`: where each field lies in the two regions (request, response);
* :mod:`.regions`: the sealed memfds and eventfds, and why the agent cannot write the
  evaluator's region nor shrink either;
* :mod:`.wake`: spin briefly on the sequence word, then block on the eventfd;
* :mod:`.wire_infos`: a call's infos in the response region, split into columns and
  JSON exactly as the gRPC path splits them;
* :mod:`.client`: the agent's end (the evaluator's is
  ``ale_robotics.evaluator.server.shm_channel``).

Nothing here changes what a session does: the evaluator runs the same Step and
Reset, with the same checks, budgets, eval records and trajectory events, whatever
carried the request.
"""

from __future__ import annotations

from ale_robotics.dataplane.layout import LAYOUT_VERSION, Layout, data_socket_name

__all__ = ["LAYOUT_VERSION", "Layout", "data_socket_name"]
