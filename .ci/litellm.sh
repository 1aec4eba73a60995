#!/usr/bin/env bash
# Installs the LiteLLM proxy (PyPI `litellm[proxy]`, pinned) into target/litellm-venv for
# tests/e2e/litellm_proxy.rs, which starts it on loopback in front of the fake LLM (no
# telemetry, the local cost map, no database). Kept between runs; reinstalled when the pin
# changes. A failed install fails CI: the test refuses to skip under CI.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=1.106.12
venv=target/litellm-venv
if ! "$venv/bin/litellm" --version 2>/dev/null | grep -qF "$VERSION"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "litellm[proxy]==$VERSION"
fi
