# Scheduler-Agent-Supervisor on AWS serverless, in Go.
SHELL := /bin/bash
# Every folder of functions/ is a Lambda: the four of the pipeline and the Go agents.
FUNCTIONS := $(notdir $(wildcard functions/*))
DEMO_FLAGS ?=
# The workflow files synth/deploy deploy and make run and make dev load
# (comma-separated, relative to this folder). Unless WORKFLOWS is given, make
# run and make dev load the parallel example too, and the demo spreads its
# orders over both.
ifeq ($(origin WORKFLOWS),undefined)
LOCAL_WORKFLOWS := shared/workflow/examples/order.yaml,shared/workflow/examples/parallel.yaml
endif
WORKFLOWS ?= shared/workflow/examples/order.yaml
LOCAL_WORKFLOWS ?= $(WORKFLOWS)
comma := ,
WF_CONTEXT = -c workflows=$(subst $() ,$(comma),$(abspath $(subst $(comma), ,$(WORKFLOWS))))
# CDK context for synth/diff/deploy/destroy, e.g. CONTEXT="-c alarmEmail=ops@example.com -c prefix=shop"
CONTEXT ?=

# The CDK CLI and cdklocal, pinned, installed into .cdk (Go does not walk dot folders).
CDK_PACKAGES := aws-cdk@2.1148.1 aws-cdk-local@3.0.4
CDK := $(CURDIR)/.cdk/node_modules/.bin/cdk
CDKLOCAL := $(CURDIR)/.cdk/node_modules/.bin/cdklocal
export CDK_DISABLE_CLI_TELEMETRY := true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

LOCALSTACK := http://localhost:4566
LOCAL_ENV := AWS_ENDPOINT_URL=$(LOCALSTACK) AWS_ENDPOINT_URL_S3=$(LOCALSTACK) AWS_S3_FORCE_PATH_STYLE=true \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1

.PHONY: help run test build bootstrap synth diff deploy destroy localstack-up localstack-down localstack-deploy itest clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

run: ## run the pipeline locally (embedded moto_server unless AWS_ENDPOINT_URL is set) on a demo batch
	go run ./cmd/sasctl demo --workflows $(LOCAL_WORKFLOWS) $(DEMO_FLAGS)

.PHONY: dev
dev: ## run the pipeline locally until Ctrl-C, with the web console; prints the lines to paste (flags: DEV_FLAGS)
	go build -o build/sasctl ./cmd/sasctl
	build/sasctl dev --workflows $(LOCAL_WORKFLOWS) $(DEV_FLAGS)

test: ## everything: gofmt, vet, arm64 builds, unit, conformance, integration and infra tests
	.ci/test

build: $(FUNCTIONS:%=build/%/bootstrap) ## the Lambda assets (provided.al2023, arm64), the OTLP trace exporter in each (docs/cost.md)

build/%/bootstrap: FORCE
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -trimpath -tags lambda.norpc -ldflags='-s -w' -o $@ ./functions/$*

$(CDK):
	npm install --prefix .cdk --no-audit --no-fund --loglevel=error $(CDK_PACKAGES)

bootstrap: $(CDK) ## once per AWS account and region: the CDK's staging resources
	cd infra && $(CDK) bootstrap $(CONTEXT)

synth: build $(CDK) ## the CloudFormation template, in cdk.out
	cd infra && $(CDK) synth --quiet $(WF_CONTEXT) $(CONTEXT)

diff: build $(CDK) ## what deploy would change in your AWS account
	cd infra && $(CDK) diff $(WF_CONTEXT) $(CONTEXT)

deploy: build $(CDK) ## deploy to the AWS account and region of your credentials
	cd infra && $(CDK) deploy $(WF_CONTEXT) $(CONTEXT)

destroy: $(CDK) ## remove the stack (the tables are retained: they hold orders)
	cd infra && $(CDK) destroy $(CONTEXT)

localstack-up: ## start LocalStack (needs Docker) and wait until it is healthy
	docker compose -f localstack/docker-compose.yml up -d --wait

localstack-down: ## stop LocalStack
	docker compose -f localstack/docker-compose.yml down

localstack-deploy: build $(CDK) ## bootstrap and deploy the stack into LocalStack with cdklocal
	cd infra && $(LOCAL_ENV) $(CDKLOCAL) bootstrap aws://000000000000/us-east-1 $(CONTEXT)
	cd infra && $(LOCAL_ENV) $(CDKLOCAL) deploy --require-approval never $(WF_CONTEXT) $(CONTEXT)

itest: ## the integration suite against whatever AWS_ENDPOINT_URL names (LocalStack by default)
	AWS_ENDPOINT_URL=$${AWS_ENDPOINT_URL:-$(LOCALSTACK)} go test -count=1 ./shared/devkit/localrun/... ./shared/devkit/runner/... ./cmd/sasctl/...

clean: ## remove build outputs, caches and run logs
	rm -rf build .run .cache .cdk cdk.out

FORCE:
