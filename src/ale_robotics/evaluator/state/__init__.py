"""What an evaluator keeps across restarts, apart from its job store.

* :mod:`.directory`: the state directory (hidden-seed secret, tokens, signing key,
  snapshots), created 0600 on first start;
* :mod:`.ledger`: every run's signed events, through which everything an auditor later
  checks goes.
"""
