#!/usr/bin/env bash
# `make images`: the evaluator and agent images, built on this host without a registry.
#
#   1. the base image (deploy/build-rootfs.sh: debootstrap + docker import), once;
#   2. a wheelhouse of every dependency (pip wheel with this host's pip configuration: its
#      index and the CPU build of torch), cached in ALE_IMAGES_CACHE (default
#      ~/.cache/ale-robotics/images, shared by every clone) until pyproject.toml or
#      constraints/dev.txt change, and a wheel of the project itself, rebuilt every time;
#   3. `docker build --network none` of deploy/evaluator.Dockerfile and deploy/agent.Dockerfile
#      from that context (the builds install with pip --no-index: no network inside).
#
# Variables: PYTHON (the interpreter whose pip builds the wheelhouse, default .venv/bin/python),
# EVALUATOR_IMAGE, AGENT_IMAGE, BASE_IMAGE (tags), AGENT_EXTRAS (more packages for the agent
# image, e.g. "stable-baselines3"), ENGINES (engine environments built into the evaluator
# image, e.g. "mujoco-warp": their pinned wheels are downloaded here, cached until their
# constraints/engine-*.txt change). Docker's layer cache makes a second run take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
BASE_IMAGE=${BASE_IMAGE:-ale-robotics/base:bookworm}
EVALUATOR_IMAGE=${EVALUATOR_IMAGE:-ale-robotics/evaluator:latest}
AGENT_IMAGE=${AGENT_IMAGE:-ale-robotics/agent:latest}
AGENT_EXTRAS=${AGENT_EXTRAS:-}
ENGINES=${ENGINES:-}
CACHE=${ALE_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ale-robotics/images}
CTX=$CACHE/context
export ALE_IMAGES_CACHE=$CACHE
export DOCKER_BUILDKIT=0  # the classic builder: what Debian's docker.io has without buildx

t0=$(date +%s)
step() { echo "[images +$(($(date +%s) - t0))s] $*"; }

command -v docker >/dev/null || { echo "docker is not installed: run 'make docker-deps'" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "the Docker daemon is not running: run 'make docker-deps' (starts dockerd)" >&2; exit 1; }

step "base image $BASE_IMAGE"
deploy/build-rootfs.sh "$BASE_IMAGE"

mkdir -p "$CTX/deps" "$CTX/project"
inputs=$(cat pyproject.toml constraints/dev.txt deploy/build-images.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$CTX/deps/.inputs" 2>/dev/null || true)" != "$inputs" ]; then
    step "wheelhouse: resolving and downloading the dependencies (cached until pyproject.toml, constraints/dev.txt or this script change)"
    rm -rf "$CTX/deps.new"
    # Every optional extra but the developers' and Inspect's (Inspect runs beside the
    # harness, on the host): the evaluator image gets all of it, the agent image what it names.
    extras=$("$PYTHON" -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))
print(",".join(k for k in d["project"].get("optional-dependencies", {}) if k not in ("dev", "inspect")))')
    "$PYTHON" -m pip wheel --quiet --disable-pip-version-check -c constraints/dev.txt \
        -w "$CTX/deps.new" ".[$extras]"
    rm -f "$CTX"/deps.new/ale_robotics-*.whl
    echo "$inputs" > "$CTX/deps.new/.inputs"
    rm -rf "$CTX/deps"
    mv "$CTX/deps.new" "$CTX/deps"
else
    step "wheelhouse: cached ($(ls "$CTX/deps" | wc -l) wheels)"
fi

step "project wheel (from a clean copy of src/, so no stale build/ output gets in)"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp -r pyproject.toml README.md LICENSE src "$src"/
find "$src" -name __pycache__ -prune -exec rm -rf {} + -o -name '*.egg-info' -prune -exec rm -rf {} +
rm -f "$CTX"/project/*.whl
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    -w "$CTX/project" "$src"
rm -rf "$CTX/examples"
cp -r examples "$CTX/examples"
find "$CTX/examples" -name __pycache__ -prune -exec rm -rf {} +

# Engine environments for the evaluator image (ENGINES): every engine's pins go in the context
# (the image keeps them, to find its builds by), and the wheels of those named are downloaded
# with this host's pip (the image's Python is 3.11, as this one), cached per pins file.
mkdir -p "$CTX/engines/constraints" "$CTX/engines/wheels"
rm -f "$CTX"/engines/constraints/engine-*.txt
cp constraints/engine-*.txt "$CTX/engines/constraints/" 2>/dev/null || true
for engine in $ENGINES; do
    pins=constraints/engine-$engine.txt
    [ -f "$pins" ] || { echo "ENGINES: no $pins (ale-robotics engines list names them)" >&2; exit 1; }
    stamp=$CTX/engines/wheels/.$engine.$(sha256sum "$pins" | cut -c1-16)
    if [ ! -f "$stamp" ]; then
        step "engine $engine: downloading its pinned wheels"
        "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
            -d "$CTX/engines/wheels" -r "$pins"
        touch "$stamp"
    fi
done

# Each image's dependency stage is tagged (:deps) so that it stays in Docker's cache: the
# final stage then only adds the project's wheel (seconds) until the wheelhouse changes.
build() {  # build IMAGE DOCKERFILE [--build-arg ...]
    local image=$1 file=$2
    shift 2
    docker build --network none --build-arg BASE="$BASE_IMAGE" "$@" --target deps \
        -f "$file" -t "${image%:*}:deps" "$CTX"
    docker build --network none --build-arg BASE="$BASE_IMAGE" "$@" -f "$file" -t "$image" "$CTX"
}
step "evaluator image $EVALUATOR_IMAGE"
build "$EVALUATOR_IMAGE" deploy/evaluator.Dockerfile --build-arg ENGINES="$ENGINES"
step "agent image $AGENT_IMAGE"
build "$AGENT_IMAGE" deploy/agent.Dockerfile --build-arg AGENT_EXTRAS="$AGENT_EXTRAS"
# Earlier builds of these images, now untagged (never the cached stages in use).
docker image prune --force --filter label=ale-robotics.build=1 >/dev/null
step "done"
docker image ls --filter label=ale-robotics.build=1 \
    --format '  {{.Repository}}:{{.Tag}}  {{.Size}}'

