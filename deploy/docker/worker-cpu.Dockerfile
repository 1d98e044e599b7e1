# syntax=docker/dockerfile:1
# CPU worker: frontier-worker (the agent) and frontier-trial built against
# Debian 12's LibTorch, plus the Fashion-MNIST files.
#   docker build -f deploy/docker/worker-cpu.Dockerfile -t frontier-worker-cpu .   (from the repository root)
#   docker run frontier-worker-cpu --coordinator HOST:50051 --token-file /run/secrets/worker-token
# Give --threads-per-trial to match the container's CPU limit (the default counts
# the CPUs the process may run on, which a CPU quota does not reduce).
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${DEBIAN_IMAGE} AS build
# libgloo-dev: the gloo headers of c10d's ProcessGroupGloo, without which
# frontier-trial is built without data-parallel trials (docs/distributed.md);
# at run time libgloo0 comes with libtorch1.13.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config zlib1g-dev nlohmann-json3-dev libtorch-dev \
      libgloo-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libpqxx-dev prometheus-cpp-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libsqlite3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY proto proto
COPY os os
COPY search_spaces search_spaces
COPY metrics metrics
COPY server server
COPY proposers proposers
COPY worker worker
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DFRONTIER_WITH_TORCH=ON -DFRONTIER_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" --target frontier-worker frontier-trial frontier_cpu_memory \
 && install -D -m 0755 -s /build/worker/frontier-worker /out/bin/frontier-worker \
 && install -D -m 0755 -s /build/worker/frontier-trial /out/bin/frontier-trial \
 && install -D -m 0644 /build/worker/libfrontier_cpu_memory.so /out/lib/frontier/libfrontier_cpu_memory.so

FROM ${DEBIAN_IMAGE} AS worker
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libtorch1.13 libopenblas0-pthread libgrpc++1.51 libprotobuf32 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libspdlog1.10 zlib1g \
      dataset-fashion-mnist ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 frontier \
 && useradd --system --uid 10001 --gid frontier --home-dir /var/lib/frontier --shell /usr/sbin/nologin frontier \
 && install -d -o frontier -g frontier -m 0750 /var/lib/frontier /var/lib/frontier/work
# frontier-worker finds frontier-trial next to itself, and the Python SDK's
# CPU memory counter in ../lib/frontier/ from it (FRONTIER_CPU_MEMORY_LIB).
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/lib/ /usr/local/lib/
COPY deploy/docker/http-health-check /usr/local/bin/http-health-check
USER 10001:10001
WORKDIR /var/lib/frontier
EXPOSE 9465
# The agent is alive while its /metrics endpoint answers (a hung agent stops answering).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["http-health-check", "127.0.0.1", "9465", "/metrics"]
ENTRYPOINT ["frontier-worker", "--metrics-listen", "0.0.0.0:9465", "--work-dir", "/var/lib/frontier/work"]
CMD ["--help"]
