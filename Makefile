# make demo / make test bootstrap .venv from nothing (idempotent; a stamp file
# skips the install when pyproject.toml and the constraints have not changed).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.ale-installed
SRC_DIRS := src tests benchmarks examples scripts

.PHONY: venv demo test test-slow lint typecheck unit bench proto clean sandbox-deps postgres-deps \
	browser-deps docker-deps images bench-peers engines agent-tools ros-engine

$(STAMP): pyproject.toml constraints/dev.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints/dev.txt -e '.[dev,mjx]'
	@touch $(STAMP)

venv: $(STAMP)

# bubblewrap isolates agents (ale-robotics run --sandbox bwrap). Installed from Debian when
# missing and we are root; otherwise runs fall back to --sandbox none with a warning.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; \
		else echo "bubblewrap missing: install it (apt-get install bubblewrap) to sandbox agents"; fi; }

# PostgreSQL server binaries (initdb, pg_ctl, postgres) for the tests of the PostgreSQL job
# store: they start a throwaway cluster in a temp dir (tests/pg.py), never a system one.
# Installed from Debian when missing and we are root; otherwise those tests are skipped.
postgres-deps:
	@{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
		else echo "PostgreSQL missing: install it (apt-get install postgresql) to test the PostgreSQL job store"; fi; }

# Chromium for the report's browser test (tests/report): Playwright drives Debian's build
# (executable_path), never one it downloads. Installed from Debian when missing and we are
# root; otherwise that test is skipped with the reason.
browser-deps:
	@{ command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; } || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else echo "chromium missing: install it (apt-get install chromium) to run the report's browser test"; fi; }

# Docker for the container path (run --sandbox docker, --evaluator-image, deploy/compose.yaml):
# Debian's docker.io, debootstrap (the base image is made here, there is no registry) and
# docker-compose, installed when missing and we are root; dockerd started when it is not running.
DOCKERD_LOG ?= /var/log/ale-dockerd.log
docker-deps:
	@missing=""; \
	command -v dockerd >/dev/null 2>&1 || missing="$$missing docker.io"; \
	command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else echo "missing:$$missing (apt-get install$$missing) for the container sandbox"; exit 1; fi; \
	fi
	@docker info >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then \
			echo "starting dockerd (log: $(DOCKERD_LOG))"; \
			nohup dockerd >$(DOCKERD_LOG) 2>&1 & \
			for i in $$(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done; \
			docker info >/dev/null 2>&1 || { echo "dockerd did not start: see $(DOCKERD_LOG)"; exit 1; }; \
		else echo "the Docker daemon is not running: start it as root (dockerd)"; exit 1; fi; }

# Agent software for the real-client tests (issue 45; docs/agents.md), installed the way
# its users do: the npm CLIs, pinned, into a prefix that `ale-robotics run --agent-tools`
# shows the agent (~/.cache/ale-robotics/agent-tools, or $AGENT_TOOLS). 833 MB and about 30 s
# from the npm registry; a second run finds them and installs nothing.
AGENT_TOOLS ?= $(HOME)/.cache/ale-robotics/agent-tools
CLAUDE_CODE_VERSION ?= 2.1.337
CODEX_VERSION ?= 0.171.0
agent-tools:
	@{ "$(AGENT_TOOLS)/bin/claude" --version 2>/dev/null | grep -q "^$(CLAUDE_CODE_VERSION) " && \
	   "$(AGENT_TOOLS)/bin/codex" --version 2>/dev/null | grep -q " $(CODEX_VERSION)$$"; } || \
		npm install -g --no-fund --no-audit --prefix "$(AGENT_TOOLS)" \
			@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION)

# The evaluator and agent images (deploy/build-images.sh): a debootstrap'd Debian base imported
# into Docker, a wheelhouse of the pinned dependencies (cached in ~/.cache/ale-robotics/images),
# then two `docker build --network none`. AGENT_EXTRAS="stable-baselines3" adds packages to the
# agent image; IMAGE_ENGINES="mujoco-warp" builds engine environments into the evaluator image.
images: venv docker-deps
	PYTHON=$(BIN)/python AGENT_EXTRAS="$(AGENT_EXTRAS)" ENGINES="$(IMAGE_ENGINES)" \
		deploy/build-images.sh

# Engine environments (docs/engines.md): a rollout kind whose simulator cannot share the project's
# environment (MuJoCo Warp needs mujoco >= 3.13, the project pins 3.3) runs in one of its own,
# built once from the registries by its pins (constraints/engine-*.txt) and cached by them in
# ~/.cache/ale-robotics/engines ($ALE_ENGINES_DIR); a build of the same pins is kept, so a
# second `make engines` takes seconds. ENGINES="mujoco-warp" builds only those named.
ENGINES ?=
engines: venv
	$(BIN)/ale-robotics engines install $(ENGINES)

# The ros engine (docs/ros.md), which `make engines` builds too: Debian's ROS 1 from apt (as
# root: ros-core, python3-rospy, python3-roslaunch, python3-std-msgs, rosout), then a venv of
# Debian's /usr/bin/python3 with the pins of constraints/engine-ros.txt, opened to its
# site-packages; its warm-up runs one graph episode. Its tests: ALE_REQUIRE_ROS=1 .venv/bin/pytest
# tests/rollouts/ros (-m 'slow' for the runs end to end).
ros-engine: venv
	$(BIN)/ale-robotics engines install ros

demo: venv sandbox-deps
	$(BIN)/ale-robotics run td3-inverted-pendulum-v2 \
		--agent "$(BIN)/python examples/agents/submit_checkpoint.py"

lint: venv
	$(BIN)/ruff check $(SRC_DIRS)
	$(BIN)/ruff format --check $(SRC_DIRS)
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_package_cycles.py

typecheck: venv
	$(BIN)/mypy

# Two pytest-xdist workers (one per core here); every test has its own state home, temp
# dirs and sockets. --durations names the slowest tests so that the suite stays fast.
# --dist loadgroup: a module whose tests share a module fixture and read what the earlier
# ones left in it (the protocol fuzzer) marks them xdist_group, and they run on one worker.
PYTEST_WORKERS ?= 2
unit: venv sandbox-deps postgres-deps browser-deps
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=15

# The slow end-to-end tests (marked `slow`, left out of `make test`): CI runs them too, on
# two workers as make test (69 tests: 21 min 0 s on one worker here at load 1, 16 min 7 s on
# two). Each is a real run (training, an audit, a cluster stopped...) that may take minutes on
# a busy host: the hang guard is 30 min, not make test's 5.
test-slow: venv sandbox-deps postgres-deps browser-deps
	$(BIN)/pytest -q -m slow -n $(PYTEST_WORKERS) --dist loadgroup --timeout 1800 --durations=15

test: lint typecheck unit

bench: venv
	$(BIN)/python benchmarks/batch_eval.py

# EnvPool in a venv of its own (.venv-peers, git-ignored) for benchmarks/vs_envpool.py, which
# runs it as a child process beside the evaluator: pinned to the newest release installable for
# the project's Python (1.2.5 for 3.11; it bundles its own MuJoCo, 3.6), with the project's
# constraints so that numpy (the policy's matmuls) is the same version on both sides. Not part
# of make test; BENCH_PEERS_ARGS is passed to the script (e.g. "--quick", "--rounds 5 --json").
PEERS := .venv-peers
ENVPOOL_VERSION ?= 1.2.5
$(PEERS)/.peers-installed: constraints/dev.txt
	@test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --disable-pip-version-check \
		-c constraints/dev.txt envpool==$(ENVPOOL_VERSION) numpy
	@touch $@

bench-peers: venv $(PEERS)/.peers-installed
	$(BIN)/python benchmarks/vs_envpool.py $(BENCH_PEERS_ARGS)

proto: venv
	$(BIN)/python scripts/gen_proto.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
