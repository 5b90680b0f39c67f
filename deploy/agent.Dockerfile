# The agent base image: Python 3.11, the ale-robotics SDK (ale_robotics.client) and the agent
# extras below, the reference agents under /workspace/examples, nothing else: no simulator,
# no compiler, no network tools. `ale-robotics run --sandbox docker --agent-image IMAGE` runs
# it with no network, as uid 65534, read-only, with only /submission, /scratch and the agent
# socket mounted. Build your agent FROM it (COPY your code into /workspace); see the README.
ARG BASE=ale-robotics/base:bookworm
FROM ${BASE} AS deps
LABEL ale-robotics.build=1
# The SDK's own imports (gRPC, protobuf, pydantic, numpy, PyYAML) plus the agent extras:
# safetensors (write a contract's tensors), Gymnasium without MuJoCo (RemoteEnv for the
# interactive tasks) and the official openai and anthropic SDKs (an AI agent reaching its
# model through the run's gateway; versions pinned by constraints/dev.txt through the
# wheelhouse). AGENT_EXTRAS adds more from the wheelhouse, e.g.
#   make images AGENT_EXTRAS="stable-baselines3"      (pulls the CPU build of torch)
ARG AGENT_EXTRAS=""
COPY deps/ /wheels/
RUN python3 -m venv /opt/ale \
 && /opt/ale/bin/pip install --no-cache-dir --no-index --find-links /wheels \
        --disable-pip-version-check --quiet \
        grpcio protobuf pydantic numpy pyyaml safetensors gymnasium openai anthropic \
        ${AGENT_EXTRAS}

FROM ${BASE}
LABEL ale-robotics.build=1
COPY --from=deps /opt/ale /opt/ale
COPY project/ /tmp/project/
# The SDK without the evaluator's dependencies (--no-deps): what an agent imports is
# ale_robotics.client, which needs only the packages above.
RUN /opt/ale/bin/pip install --no-cache-dir --no-index --no-deps --disable-pip-version-check \
        --quiet /tmp/project/*.whl \
 && rm -rf /tmp/project \
 && /opt/ale/bin/python -c "import ale_robotics.client, safetensors, gymnasium, openai, anthropic"
COPY examples/ /workspace/examples/
# A login shell (Inspect's bash and python tools run `bash --login`) resets PATH from
# /etc/profile: this puts the SDK's Python back in front.
RUN echo 'PATH=/opt/ale/bin:$PATH' > /etc/profile.d/ale-python.sh
ENV PATH=/opt/ale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    OPENBLAS_NUM_THREADS=1
LABEL org.opencontainers.image.title="ale-robotics agent base" \
      ale-robotics.role="agent-image"
WORKDIR /workspace
USER 65534:65534
CMD ["python", "examples/agents/submit_checkpoint.py"]
