"""The bubblewrap sandbox."""
