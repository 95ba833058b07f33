# Scheduler-Agent-Supervisor on AWS serverless, in Go.
SHELL := /bin/bash
FUNCTIONS := submission scheduler agent supervisor
DEMO_FLAGS ?=

.PHONY: run test build clean help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

run: ## run the pipeline locally (embedded moto_server unless AWS_ENDPOINT_URL is set) on a demo batch
	go run ./cmd/sasctl demo $(DEMO_FLAGS)

test: ## everything: gofmt, vet, arm64 builds, unit, conformance and integration tests
	.ci/test

build: $(FUNCTIONS:%=build/%/bootstrap) ## the Lambda assets (provided.al2023, arm64)

build/%/bootstrap: FORCE
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -trimpath -tags lambda.norpc -ldflags='-s -w' -o $@ ./functions/$*

clean: ## remove build outputs, caches and run logs
	rm -rf build .run .cache

FORCE:
