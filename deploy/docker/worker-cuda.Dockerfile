# syntax=docker/dockerfile:1
# CUDA worker: frontier-trial built against the LibTorch that ships inside an
# official PyTorch CUDA image, and the frontier-worker agent built on Debian 12
# (Debian's gRPC, protobuf, prometheus-cpp), bundled with its libraries.
#   docker build -f deploy/docker/worker-cuda.Dockerfile -t frontier-worker-cuda .   (from the repository root)
#   docker run --gpus '"device=0"' frontier-worker-cuda --coordinator HOST:50051 --token-file /run/secrets/worker-token
#
# ABI choices (docs/deploy.md): frontier-trial is compiled in the -devel image
# of the same PyTorch tag as the runtime base, by that image's compiler, with
# TorchConfig's flags (its _GLIBCXX_USE_CXX11_ABI), and it keeps the build
# RPATH into the image's torch/lib, which is the same path in -runtime. The
# agent never loads LibTorch; it is built on Debian 12 and carried with every
# library it loads except glibc and libstdc++ (bundle-libs.sh), which it takes
# from the runtime image (it needs GLIBC 2.34 and GLIBCXX_3.4.30; Ubuntu 22.04
# has both). The last stage runs both binaries once, so a mismatch fails the
# build instead of the first trial.
ARG PYTORCH_TAG=2.5.1-cuda12.4-cudnn9
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${DEBIAN_IMAGE} AS agent
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config zlib1g-dev nlohmann-json3-dev patchelf binutils \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libpqxx-dev prometheus-cpp-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libsqlite3-dev \
      dataset-fashion-mnist \
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
COPY deploy/docker/bundle-libs.sh /usr/local/bin/bundle-libs.sh
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DFRONTIER_WITH_TORCH=OFF -DFRONTIER_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" --target frontier-worker \
 && strip /build/worker/frontier-worker \
 && bundle-libs.sh /build/worker/frontier-worker /opt/frontier

FROM pytorch/pytorch:${PYTORCH_TAG}-devel AS trial
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake g++ make zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
# The same nlohmann/json headers as every other build (FRONTIER_NLOHMANN_INCLUDE).
COPY --from=agent /usr/include/nlohmann /opt/nlohmann/include/nlohmann
WORKDIR /src
COPY CMakeLists.txt ./
COPY os os
COPY search_spaces search_spaces
COPY worker worker
RUN cmake -S . -B /build -DFRONTIER_RUNNER_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$(python -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
      -DFRONTIER_NLOHMANN_INCLUDE=/opt/nlohmann/include \
 && cmake --build /build -j"$(nproc)" --target frontier-trial frontier_cpu_memory \
 && install -D -m 0755 /build/worker/frontier-trial /opt/frontier/bin/frontier-trial \
 && install -D -m 0644 /build/worker/libfrontier_cpu_memory.so /opt/frontier/lib/frontier/libfrontier_cpu_memory.so

FROM pytorch/pytorch:${PYTORCH_TAG}-runtime AS worker
COPY --from=agent /opt/frontier/ /opt/frontier/
COPY --from=trial /opt/frontier/bin/frontier-trial /opt/frontier/bin/frontier-trial
COPY --from=trial /opt/frontier/lib/frontier/ /opt/frontier/lib/frontier/
COPY --from=agent /usr/share/datasets/fashion-mnist/ /usr/share/datasets/fashion-mnist/
COPY deploy/docker/http-health-check /usr/local/bin/http-health-check
COPY deploy/frontier-trial-on-gpu /opt/frontier/bin/frontier-trial-on-gpu
ENV PATH=/opt/frontier/bin:$PATH
RUN groupadd --system --gid 10001 frontier \
 && useradd --system --uid 10001 --gid frontier --home-dir /var/lib/frontier --shell /usr/sbin/nologin frontier \
 && install -d -o frontier -g frontier -m 0750 /var/lib/frontier /var/lib/frontier/work \
 && if ldd /opt/frontier/bin/frontier-trial | grep "not found"; then \
      echo "frontier-trial: libraries missing in the runtime image (see docs/deploy.md)" >&2; exit 1; fi \
 && frontier-worker --help > /dev/null \
 && frontier-trial --help > /dev/null
USER 10001:10001
WORKDIR /var/lib/frontier
EXPOSE 9465
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["http-health-check", "127.0.0.1", "9465", "/metrics"]
ENTRYPOINT ["frontier-worker", "--device", "cuda", "--metrics-listen", "0.0.0.0:9465", "--work-dir", "/var/lib/frontier/work"]
CMD ["--help"]
