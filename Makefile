# Every target runs inside the uv-managed virtualenv (.venv), created from uv.lock.
# uv comes from PyPI; on a fresh machine without it, it is installed into .tools/.
UV ?= $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
RUN := $(UV) run --frozen
export UV_PYTHON_DOWNLOADS := never

.PHONY: setup up test test-fast lint gen gen-check fmt bench lint-deploy image test-image mutation browser

setup: $(UV)      ## install the locked environment into .venv
	$(UV) sync --frozen

.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/pip install --quiet uv

up: setup         ## daiku's main job on the embedded defaults (local cluster + EC2 emulator)
	$(RUN) daiku up

test: setup gen-check lint lint-deploy browser   ## the whole suite, as CI runs it
	$(RUN) pytest --durations=25

browser:          ## Debian's chromium: draws `daiku report`'s page in its test (installed as root)
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

test-fast: setup  ## the suite without the whole-stack (e2e) tests
	$(RUN) pytest tests -m "not e2e" -q

lint:             ## ruff, mypy (strict) and import-linter
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	$(RUN) lint-imports

fmt:
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

mutation: setup   ## mutation testing of the pure cores and the launcher (slow; not run by CI; TARGETS=requirements ...)
	$(RUN) python -m bench.mutation_run $(TARGETS)

gen:              ## regenerate the gRPC contract from protos/
	$(RUN) python -m grpc_tools.protoc -I protos \
		--python_out=. --grpc_python_out=. --mypy_out=. --mypy_grpc_out=. \
		protos/daiku/actuator/v1/actuator.proto

gen-check: gen    ## fail when the committed generated code is stale
	git diff --exit-code -- daiku/actuator/v1

bench: setup      ## the benchmarks; each prints its figures
	$(RUN) python -m bench.scheduling
	$(RUN) python -m bench.ice_retry
	$(RUN) python -m bench.localcloud_api

# buf from npm (@bufbuild/buf ships its binary in a platform package); .ci/run installs it.
BUF ?= .tools/buf/node_modules/.bin/buf
$(BUF):
	npm install --silent --no-audit --no-fund --prefix .tools/buf @bufbuild/buf@1.75.0

lint-deploy: setup $(BUF) ## validate deploy/ (kustomize + kubernetes-validate --strict), compose file, protos (buf)
	@command -v docker-compose >/dev/null 2>&1 || { apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; }
	@for overlay in deploy/overlays/*/; do \
		echo "kubernetes-validate $$overlay"; \
		kubectl kustomize $$overlay | $(RUN) kubernetes-validate --strict --quiet -k 1.32.0 - || exit 1; \
	done
	$(RUN) kubernetes-validate --strict --quiet -k 1.32.0 deploy/crds/*.yaml
	docker-compose -f docker-compose.yml config -q
	cd protos && ../$(BUF) lint

# The service image, built with buildah (no Docker engine) on a Debian base that debootstrap
# builds here once (deploy/image/bootstrap-base.sh; kept in buildah's storage between runs).
IMAGE ?= localhost/daiku:dev
BASE_IMAGE ?= localhost/daiku-base:bookworm
image:            ## build the service image with buildah (see deploy/README.md)
	deploy/image/bootstrap-base.sh $(BASE_IMAGE)
	buildah bud --isolation chroot --network host --layers --target service \
		--build-arg PYTHON_IMAGE=$(BASE_IMAGE) \
		--build-arg DAIKU_VERSION=$$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml) \
		--label org.opencontainers.image.revision=$$(git rev-parse HEAD) \
		--tag $(IMAGE) .
	@buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' $(IMAGE)

test-image: setup image  ## build the image, then run both services from it against localcloud
	DAIKU_TEST_IMAGE=$(IMAGE) $(RUN) pytest tests/deploy/test_image.py -q --durations=3
