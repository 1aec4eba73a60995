#!/usr/bin/env bash
# Schemathesis against a live triage: the server is built and started on loopback with a
# model pointing at examples/fake_openai (an LLM that always answers), then every operation of
# /api/openapi.json is fuzzed with positive and negative cases. Fails on any 5xx and on any
# response (JSON body or SSE event) that does not match the documented schema.
#
# Env: SCHEMATHESIS_MAX_EXAMPLES (default 50), SCHEMATHESIS_SEED (default fixed, for
# reproducible CI runs; set another to explore).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.32.5
venv=target/schemathesis-venv
st="$venv/bin/schemathesis"
if ! "$st" --version 2>/dev/null | grep -qF "$VERSION"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
fi

cargo build --quiet --bin triage --example fake_openai

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Waits up to 30 s for a file to contain a line matching a pattern.
wait_for_line() {
  for _ in $(seq 300); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "schemathesis: timed out waiting for '$2' in $1" >&2
  cat "$1" >&2
  return 1
}

target/debug/examples/fake_openai 127.0.0.1:0 >"$work/fake.out" 2>&1 &
pids+=($!)
wait_for_line "$work/fake.out" '^FAKE_OPENAI_URL='
llm_url=$(sed -n 's/^FAKE_OPENAI_URL=//p' "$work/fake.out")

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/triage.toml" <<EOF
[server]
host = "127.0.0.1"
port = $port
keepalive_interval_secs = 0.0
request_deadline_secs = 60.0
[toolsets.kubernetes]
enabled = false
[toolsets.prometheus]
enabled = false
[approvals]
signing_key = "schemathesis"
[conversations]
database_url = "sqlite://$work/conversations.db"
# The reload routes answer 404 while the admin API is off: on, each example reloads for real
# (about 30 s more on 2 cores).
[admin]
enabled = true
[models.fake]
model = "openai/fake-model"
api_base = "$llm_url"
api_key = "unused"
EOF
# Whatever the machine's environment says, this run uses only that file.
env -u HOLMES_API_KEY -u MODEL -u API_BASE -u API_KEY -u MODEL_LIST_FILE_LOCATION \
  NO_COLOR=1 RUST_LOG=warn target/debug/triage --config "$work/triage.toml" serve >"$work/triage.log" 2>&1 &
pids+=($!)
base="http://127.0.0.1:$port"
python3 - "$base/healthz" <<'EOF'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit("schemathesis: triage did not become healthy")
EOF

# One worker: CPython 3.11.7's ast.parse, which hypothesis calls to describe its filters, races
# across threads ("SystemError: AST constructor recursion depth mismatch", cpython gh-106905).
# The conversation event stream never ends by design (it follows a live log): every example of
# it would run into the request timeout. tests/e2e/conversations_api.rs drives it instead.
# /mcp is documented by reference (its messages are the MCP specification's, not a schema of
# the document): tests/e2e/mcp_server.rs drives it with raw JSON-RPC and the MCP Python SDK.
checks=not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance,response_headers_conformance
status=0
(cd "$work" && timeout 600 "$OLDPWD/$st" run "$base/api/openapi.json" \
  --checks "$checks" \
  --exclude-operation-id streamEvents \
  --exclude-operation-id mcp \
  --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-50}" \
  --seed "${SCHEMATHESIS_SEED:-20240601}" \
  --workers 1 \
  --request-timeout 60 \
  --generation-database none \
  --no-color \
  --report junit --report-junit-path "$work/junit.xml") >"$work/schemathesis.out" 2>&1 || status=$?
cat "$work/schemathesis.out"

# Operations passed and failed, from the JUnit report.
read -r passed failed < <(python3 - "$work/junit.xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
try:
    cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
except Exception:
    print(0, 1)
    sys.exit()
failed = sum(1 for c in cases if c.find("failure") is not None or c.find("error") is not None)
print(len(cases) - failed, failed)
EOF
)
generated=$(grep -A1 '^Test cases:' "$work/schemathesis.out" | tail -n 1 | sed 's/^ *//')
if ((status != 0 && failed == 0)); then failed=1; fi
echo "schemathesis ($checks): ${generated:-no test cases}"
echo "schemathesis: $passed passed, $failed failed"
if ((status != 0)); then
  echo "schemathesis: FAILED (exit $status); triage's log (last 50 lines):" >&2
  tail -n 50 "$work/triage.log" >&2
  exit 1
fi
