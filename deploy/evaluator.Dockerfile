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
