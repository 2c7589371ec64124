# The plain entry points. `make test` is the README's test command and what CI runs.
SWIFT ?= swift
APT_PACKAGES := libvips-dev libvips-tools libcurl4-openssl-dev liblmdb-dev

.PHONY: deps test build clean

# Installs the system libraries the plugins link, if any is missing (Debian/Ubuntu).
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) test

clean:
	rm -rf .build
