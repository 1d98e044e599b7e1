# syntax=docker/dockerfile:1
# frontier-server (the coordinator) and the frontier CLI. No LibTorch.
#   docker build -f deploy/docker/server.Dockerfile -t frontier-server .      (from the repository root)
#   docker run -p 50051:50051 -p 9464:9464 -v frontier-data:/var/lib/frontier frontier-server
# The default command serves gRPC on 0.0.0.0:50051 and /metrics on 0.0.0.0:9464 with
# a SQLite store in /var/lib/frontier; clusters pass --store postgresql:// (libpq
# environment) and token/TLS files (docs/deploy.md).
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config zlib1g-dev nlohmann-json3-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libpqxx-dev prometheus-cpp-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libsqlite3-dev libjemalloc-dev \
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
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DFRONTIER_WITH_TORCH=OFF -DFRONTIER_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" --target frontier-server frontier \
 && install -D -m 0755 -s /build/server/frontier-server /out/bin/frontier-server \
 && install -D -m 0755 -s /build/server/frontier /out/bin/frontier \
 && install -d /out/search_spaces && cp search_spaces/*.yaml /out/search_spaces/

FROM ${DEBIAN_IMAGE} AS server
# Runtime libraries only (the shared objects the two binaries load, checked by
# tests/deploy/dockerfiles_test.sh against a build), python3-grpcio for the health check.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libpqxx-6.4 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
      libyaml-cpp0.7 libspdlog1.10 libsqlite3-0 libjemalloc2 ca-certificates python3-grpcio \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 frontier \
 && useradd --system --uid 10001 --gid frontier --home-dir /var/lib/frontier --shell /usr/sbin/nologin frontier \
 && install -d -o frontier -g frontier -m 0750 /var/lib/frontier
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/search_spaces/ /usr/share/frontier/search_spaces/
COPY deploy/docker/grpc-health-check /usr/local/bin/grpc-health-check
USER 10001:10001
WORKDIR /var/lib/frontier
EXPOSE 50051 9464
# The standard gRPC health service (service ""), plaintext. With --tls-cert, override:
#   --health-cmd 'grpc-health-check --tls-ca /etc/frontier/tls/ca.crt --server-name NAME'
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["grpc-health-check", "--addr", "127.0.0.1:50051", "--timeout", "3"]
ENTRYPOINT ["frontier-server"]
CMD ["--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9464", "--store", "/var/lib/frontier/frontier.db"]
