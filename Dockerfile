# bitflipd, the fault-injection service, and the bitflip CLI, as one image.
#   docker build -t bitflip .
#   docker compose -f deploy/docker-compose.yml up -d      (deploy/README.md)
# Two stages: the builder has compilers and -dev packages; the runtime has only
# the shared libraries the two binaries load, and runs as an unprivileged user.

FROM debian:bookworm AS build
WORKDIR /src
# The dependencies in a layer of their own, rebuilt only when the list changes.
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# .git is not in the build context, so the commit that bitflipd reports
# (--version, bitflip_build_info) is passed in:
#   docker build --build-arg BITFLIP_COMMIT=$(git rev-parse --short HEAD) .
ARG BITFLIP_COMMIT=unknown
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBFD_COMMIT="${BITFLIP_COMMIT}" \
 && cmake --build build -j "$(nproc)" --target bitflipd bitflip

FROM debian:bookworm-slim
# Runtime libraries of bitflipd and bitflip, and curl for the health check.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libmicrohttpd12 libuv1 libjansson4 libprotobuf-c1 libsqlite3-0 libcurl4 libssl3 curl \
 && rm -rf /var/lib/apt/lists/*
# A fixed uid, so that a data volume or a tokens file can be chown'ed to it
# from the host. The data directory is created here, owned by that user, so a
# new named volume starts with that owner.
RUN groupadd --gid 10001 bitflip \
 && useradd --uid 10001 --gid 10001 --home-dir /var/lib/bitflip --no-create-home --shell /usr/sbin/nologin bitflip \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/bitflip \
 && install -d -m 0755 /etc/bitflip \
 && printf '{\n  "log_format": "text"\n}\n' > /etc/bitflip/bitflipd.json
COPY --from=build /src/build/bitflipd /src/build/bitflip /usr/local/bin/

USER 10001:10001
WORKDIR /var/lib/bitflip
VOLUME /var/lib/bitflip
EXPOSE 8080
# Ready, not just live: a draining daemon (503) is unhealthy. The start period
# covers resuming the campaigns of the previous run before the port opens.
# -k: the certificate names the lab host, not 127.0.0.1.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsSk https://127.0.0.1:8080/v2/health/ready || exit 1
# bitflipd refuses to listen on 0.0.0.0 without tokens, and without TLS unless
# told --insecure-http: mount tokens, a certificate and its key as these files
# (deploy/docker-compose.yml does, as secrets; deploy/README.md says how to make them).
CMD ["bitflipd", "--listen", "0.0.0.0:8080", "--data-dir", "/var/lib/bitflip", "--config", "/etc/bitflip/bitflipd.json", \
     "--tokens-file", "/run/secrets/bitflip_tokens", \
     "--tls-cert", "/run/secrets/bitflip_tls_cert", "--tls-key", "/run/secrets/bitflip_tls_key"]
