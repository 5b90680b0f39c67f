"""A run against an evaluator that the run did not start (``--evaluator``, an evaluator
container): the checks before anything starts (:mod:`.checks`), the relay that gives the
sandboxed agent a socket of its own to it (:mod:`.relay`), and the run's use of it
(:mod:`.evaluator`). Nothing is imported here.
"""
