# One image for every `infscale` command (adapter, explain, coldstart, replay, …):
#   docker build -t ghcr.io/infscale/infscale:0.1.0 .
#   docker run --rm ghcr.io/infscale/infscale:0.1.0 --help
# deploy/adapter/kustomization.yaml references this image by that name.

# Build wheels in a throwaway stage, so the final image has no compiler, pip cache or sources.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY infscale ./infscale
COPY autoscaler ./autoscaler
COPY adapter ./adapter
COPY replay ./replay
COPY common ./common
RUN pip wheel --no-cache-dir --wheel-dir /wheels .
# the policy core compiled by mypyc (autoscaler/compiledcore.py), from the sources the wheel holds
RUN apt-get update -q && apt-get install -y -q --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir "mypy>=1.10" "setuptools>=69" "pydantic-settings>=2.3,<3" \
    && python -m autoscaler.compiledcore build --dir /opt/infscale/mypyc

FROM python:3.11-slim
# numeric UID/GID so Kubernetes' runAsNonRoot can verify it without /etc/passwd lookups
RUN groupadd --system --gid 10001 infscale \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin infscale
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY --from=build /opt/infscale/mypyc /opt/infscale/mypyc
# every command runs the compiled core (INFSCALE_COMPILED_CORE=false: the sources); it was built from
# the installed sources, which the start-up checks by their hashes
ENV INFSCALE_COMPILED_CORE=true INFSCALE_COMPILED_CORE_DIR=/opt/infscale/mypyc
# read-only root filesystem in the cluster: no .pyc writes, unbuffered logs
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
EXPOSE 6443
ENTRYPOINT ["infscale"]
CMD ["--help"]
