# k3serve container image (multi-stage, Debian 12). scripts/container-test.sh builds and runs it
# with podman from a locally debootstrapped base image.
#   docker build -t k3serve .
#   docker buildx build --platform linux/arm64 -t k3serve:arm64 .   (nothing here is x86-only:
#       the base images and every package exist for arm64, and the kernel set is picked at run
#       time; docs/platforms.md)
#   docker run --rm -p 127.0.0.1:8080:8080 --ulimit memlock=-1:-1 \
#       -v /srv/models/k3:/models/k3:ro k3serve serve /models/k3
#   docker stop -t 60 <container>      (longer than the drain timeout)
# Inside the container the daemon binds 0.0.0.0 (K3SERVE_HOST); publish the port on loopback
# or behind a proxy. The build stage runs the C++ test suites; the runtime image runs as a
# non-root user and has a HEALTHCHECK on /health (503 while the model loads).

FROM debian:12 AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
# Node.js and Chromium are only for the browser/SDK tests and the tokenizer tests' reference
# (tests/reference/kimi_pattern.mjs), which the image build skips; CI runs them, and the fuzz,
# sanitizer and deploy runs (other compilers and tools than the image needs). The image runs
# the C++ suites of the code it ships, named by label so a new label elsewhere stays out.
RUN K3_WITH_NODE=0 bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DK3_BUILD_BENCH=OFF \
 && cmake --build build -j"$(nproc)" \
 && cd build && ctest --output-on-failure -j"$(nproc)" -L '^(weights|kernels|io|store|model|grammar|server)$' -E '^node_'

FROM debian:12-slim AS runtime
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libgomp1 libspdlog1.10 libfmt9 libpcre2-8-0 libsystemd0 libcurl4 libssl3 \
      libpng16-16 libjpeg62-turbo curl ca-certificates libopenmpi3 openmpi-bin \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home /var/lib/k3serve --create-home --shell /usr/sbin/nologin k3serve
COPY --from=build /src/build/k3serve /usr/local/bin/k3serve
COPY config/k3serve.example.json /etc/k3serve/k3serve.example.json
COPY README.md /usr/local/share/doc/k3serve/README.md
COPY docs /usr/local/share/doc/k3serve/docs
USER k3serve
WORKDIR /var/lib/k3serve
ENV K3SERVE_HOST=0.0.0.0 K3SERVE_PORT=8080
EXPOSE 8080
STOPSIGNAL SIGTERM
# A long start period: the model load happens after the port is already answering 503.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30m --retries=3 \
  CMD curl -fsS "http://127.0.0.1:${K3SERVE_PORT}/health" || exit 1
ENTRYPOINT ["/usr/local/bin/k3serve"]
CMD ["serve", "/models/k3"]
