"""The agent sandboxes: bubblewrap (bwrap/), containers (docker/), and what they share."""
