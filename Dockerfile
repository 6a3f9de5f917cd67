# Sluice's container image: the static release binary on a distroless base,
# as a non-root user, the data directory a volume. docs/deploy.md
# (Containers) says how to build and run it; no container engine runs in
# Sluice's CI, so the image itself is untested there, but its build stage
# runs the same scripts/release.sh that CI's reproducibility test runs.
#
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) -t sluice:v1.2.3 .
#   docker run -p 9324:9324 -v sluice-data:/var/lib/sluice \
#     -e SLUICE_KEYS_FILE=/etc/sluice/keys.json -v $PWD/keys.json:/etc/sluice/keys.json:ro sluice:v1.2.3

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-unknown
ARG COMMIT=unknown
# Set by BuildKit from --platform (the image's OS and architecture);
# linux/amd64 for a builder that sets neither.
ARG TARGETOS
ARG TARGETARCH
RUN os=${TARGETOS:-linux} arch=${TARGETARCH:-amd64} && \
    PLATFORMS="$os/$arch" DIST=/out COMMIT="$COMMIT" scripts/release.sh "$VERSION" && \
    mv "/out/sluice-$VERSION-$os-$arch" /out/sluice && \
    mkdir -p /out/data

# distroless static: no shell, no libc, CA certificates and tzdata (the
# schedules' time zones) included; user nonroot is 65532:65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY --from=build --chown=65532:65532 /out/data /var/lib/sluice
COPY LICENSE /usr/share/doc/sluice/LICENSE
USER 65532:65532
# Every flag of `sluice serve` has a variable; these are the container's
# defaults. A non-loopback address needs authentication: set
# SLUICE_KEYS_FILE (a keys file, docs/security.md), or SLUICE_INSECURE_NO_AUTH=1
# on a network only trusted clients reach; without either, serve refuses to
# start and says so. Clients that reach the broker by a name (a service's, a
# proxy's) need it in SLUICE_ALLOWED_HOSTS.
ENV SLUICE_ADDR=0.0.0.0:9324 \
    SLUICE_DATA=/var/lib/sluice \
    SLUICE_LOG_FORMAT=json
VOLUME ["/var/lib/sluice"]
EXPOSE 9324
# SIGTERM: stop accepting, answer waiting receives at once, finish requests
# in flight within --shutdown-timeout (10 s), sync and close the store.
# Give the container longer than that to stop (docker stop -t 30; Kubernetes'
# terminationGracePeriodSeconds is 30 by default).
STOPSIGNAL SIGTERM
# No HEALTHCHECK: the image has no shell or HTTP client to run one. Probe
# GET /healthz (alive) and GET /readyz (the store answers) from outside:
# Kubernetes' httpGet probes (deploy/kubernetes/), or a load balancer's.
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]
