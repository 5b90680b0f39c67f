"""``ale-robotics``: the command line, the top layer.

Nothing else of ours imports it (a contract in .importlinter).
"""
