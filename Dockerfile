# A static agentsandbox image: `docker build -t agentsandbox .`
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /agentsandbox ./cmd/agentsandbox

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /agentsandbox /agentsandbox
USER 65532:65532
ENTRYPOINT ["/agentsandbox"]
