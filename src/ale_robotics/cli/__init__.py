"""``ale-robotics``: the command line, the top layer (nothing else imports it; see .importlinter)."""
