# A static agentsandbox image: `docker build -t agentsandbox .`. It carries
# /sandbox-gate too, which every sandbox pod runs first (the reconciler's
# --egress-gate-image names this image), and the sandbox agent it installs
# into the sandbox, /agentsandbox-agent, and the egress gateway
# (config/gateway), /agentsandbox-gateway.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /agentsandbox ./cmd/agentsandbox && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /sandbox-gate ./cmd/sandbox-gate && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /agentsandbox-agent ./cmd/agentsandbox-agent && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /agentsandbox-gateway ./cmd/agentsandbox-gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /agentsandbox /sandbox-gate /agentsandbox-agent /agentsandbox-gateway /
USER 65532:65532
ENTRYPOINT ["/agentsandbox"]
