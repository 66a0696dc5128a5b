# syntax=docker/dockerfile:1
# One image for every condense role (manager, proxy, pruner): the subcommand picks the role, so
# the operator and the data plane it deploys can never be of different versions.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# The build command below is also run outside Docker by test/packaging (keep it on one RUN line).
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X github.com/condense-dev/condense/internal/buildinfo.Version=${VERSION} -X github.com/condense-dev/condense/internal/buildinfo.Commit=${COMMIT}" -o /out/condense ./cmd/condense

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/condense /condense
USER 65532:65532
ENTRYPOINT ["/condense"]
CMD ["manager"]
