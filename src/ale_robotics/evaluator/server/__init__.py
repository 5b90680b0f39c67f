"""The evaluator on the wire: its gRPC listeners and the servicer they serve.

* :mod:`.listeners`: one :class:`~ale_robotics.evaluator.core.Evaluator` behind two
  listeners (agent and harness), each with its own token;
* :mod:`.servicer`: the ``AleEnv`` servicer, a thin translation between protobuf and the
  evaluator's services;
* :mod:`.auth`: the bearer-token rules, checked before any servicer code;
* :mod:`.status`: the one place where an evaluator error becomes a gRPC status;
* :mod:`.messages`: the wire form of job states, steps, capabilities and tensor specs;
* :mod:`.guard`: INVALID_ARGUMENT, not INTERNAL, for requests that are not protobuf.
"""
