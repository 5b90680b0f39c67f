# The trusted evaluator: ale-robotics with the pinned simulators (MuJoCo, Gymnasium, dm_control,
# Metaworld, PyBullet, OMPL), the CPU build of torch and the job store drivers. Built by
# `make images` (deploy/build-images.sh) from a local wheelhouse: no registry, no network.
# Runs `ale-robotics evaluator serve`; see deploy/compose.yaml and the README's deployment part.
ARG BASE=ale-robotics/base:bookworm
FROM ${BASE} AS deps
LABEL ale-robotics.build=1
COPY deps/ /wheels/
# Every dependency wheel the resolver picked for the project (the cached, slow layer).
RUN python3 -m venv /opt/ale \
 && /opt/ale/bin/pip install --no-cache-dir --no-index --find-links /wheels \
        --disable-pip-version-check --quiet /wheels/*.whl

FROM ${BASE}
LABEL ale-robotics.build=1
COPY --from=deps /opt/ale /opt/ale
COPY project/ /tmp/project/
RUN /opt/ale/bin/pip install --no-cache-dir --no-index --no-deps --disable-pip-version-check \
        --quiet /tmp/project/*.whl \
 && rm -rf /tmp/project \
 && mkdir -p /var/lib/ale/state /submission \
 && chmod 0700 /var/lib/ale/state
# Engine environments (docs/engines.md): ENGINES="mujoco-warp" builds those engines into the
# image, offline, from the wheels build-images.sh put in engines/ (their pins: engines/
# constraints, kept in the image for the evaluator to find the builds by), warm-up (Warp's
# kernel compiles) included; none by default. An engine of another Python than the image's
# (3.11) cannot be built here: the build fails saying so.
ARG ENGINES=""
COPY engines/ /tmp/engines/
ENV ALE_ENGINES_DIR=/opt/ale-engines \
    ALE_ENGINE_CONSTRAINTS=/opt/ale/constraints
RUN mkdir -p /opt/ale/constraints /opt/ale-engines \
 && cp /tmp/engines/constraints/engine-*.txt /opt/ale/constraints/ 2>/dev/null || true; \
    if [ -n "$ENGINES" ]; then \
        HOME=/tmp MUJOCO_GL=disable /opt/ale/bin/ale-robotics engines install $ENGINES \
            --pip-arg=--no-index --pip-arg=--find-links=/tmp/engines/wheels \
        || exit 1; \
    fi; \
    rm -rf /tmp/engines
ENV PATH=/opt/ale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    HOME=/tmp \
    XDG_STATE_HOME=/var/lib/ale \
    OPENBLAS_NUM_THREADS=1 \
    MUJOCO_GL=disable
LABEL org.opencontainers.image.title="ale-robotics evaluator" \
      ale-robotics.role="evaluator-image"
WORKDIR /tmp
CMD ["ale-robotics", "evaluator", "serve", "--state-dir", "/var/lib/ale/state", \
     "--submission-dir", "/submission"]
