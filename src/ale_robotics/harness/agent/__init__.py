"""The agent's side of a run: its process launched, confined and supervised (:mod:`.proc`,
:mod:`.supervisor`, :mod:`.context`), its output and disk use (:mod:`.io`), what it is
doing (:mod:`.activity`), the services it reaches through its sandbox (:mod:`.access`; the
model gateway, :mod:`.model_gateway`) and the simulator modules it must not import
(:mod:`.hidden_modules`). Grouped as the evaluator's services are; nothing is imported here,
so that a reader of one module does not pay for the others.
"""
