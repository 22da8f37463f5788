# stave serve in a container (docs/container.md). Debian 12, two stages: the build stage
# compiles with the project's own scripts; the runtime stage holds the installed tree, the
# runtime libraries it links and a non-root user. Not built in CI (no container runtime there).
#
#   CPU:   docker build -t stave .
#          docker run --rm -p 8080:8080 -v /srv/clef-MXFP4:/models/clef:ro stave
#   CUDA:  docker build --build-arg CUDA=12-8 -t stave:cuda .
#          docker run --rm --gpus all -p 8080:8080 -v /srv/clef-MXFP4:/models/clef:ro stave:cuda \
#            --model /models/clef --device cuda
ARG CUDA=""

FROM debian:12-slim AS build
ARG CUDA
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh
# CUDA builds: nvcc and cuBLAS from NVIDIA's Debian 12 repository.
RUN if [ -n "$CUDA" ]; then \
      apt-get install -y -qq --no-install-recommends curl \
      && curl -fsSLo /tmp/keyring.deb https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
      && dpkg -i /tmp/keyring.deb && apt-get update -qq \
      && apt-get install -y -qq --no-install-recommends cuda-nvcc-$CUDA cuda-cudart-dev-$CUDA libcublas-dev-$CUDA; \
    fi && rm -rf /var/lib/apt/lists/*
COPY . .
# Only what serving needs: no tests, benchmarks or Python module.
RUN if [ -n "$CUDA" ]; then export STAVE_CUDA=ON PATH=/usr/local/cuda/bin:$PATH; else export STAVE_CUDA=OFF; fi \
 && bash scripts/build.sh -DSTAVE_TESTS=OFF -DSTAVE_BENCH=OFF -DSTAVE_PYTHON=OFF \
 && cmake --install build --prefix /opt/stave

FROM debian:12-slim AS runtime
ARG CUDA
# The runtime libraries of the -dev packages the build links (docs/architecture.md), curl for
# the health check, and for CUDA builds cuBLAS (the CUDA runtime is linked statically).
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libgomp1 libfmt9 libssl3 libpcre2-8-0 libutf8proc2 libcpp-httplib0.11 \
      libpng16-16 libjpeg62-turbo libwebp7 curl ca-certificates \
 && if [ -n "$CUDA" ]; then \
      curl -fsSLo /tmp/keyring.deb https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
      && dpkg -i /tmp/keyring.deb && rm /tmp/keyring.deb && apt-get update -qq \
      && apt-get install -y -qq --no-install-recommends libcublas-$CUDA; \
    fi \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --uid 10001 stave
COPY --from=build /opt/stave /opt/stave
ENV PATH=/opt/stave/bin:$PATH \
    LD_LIBRARY_PATH=/opt/stave/lib:/usr/local/cuda/lib64 \
    HF_HUB_CACHE=/models/hf/hub
USER stave
EXPOSE 8080
# /health answers 200 once the model is loaded (503 while it loads: start-period covers that).
HEALTHCHECK --interval=15s --timeout=5s --start-period=600s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/health || exit 1
ENTRYPOINT ["stave", "serve", "--host", "0.0.0.0", "--port", "8080"]
CMD ["--model", "/models/clef"]
