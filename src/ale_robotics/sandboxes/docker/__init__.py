"""The container sandbox and the evaluator container (the docker CLI)."""
