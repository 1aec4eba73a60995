#!/usr/bin/env bash
# Builds triage's OCI image from Debian packages, no base image pulled:
#   deploy/image/build.sh [TRIAGE_BINARY [OUTPUT]]
# TRIAGE_BINARY defaults to target/release/triage, OUTPUT to target/image/triage-oci.tar (an
# OCI archive: `podman load -i OUTPUT`, or `skopeo copy oci-archive:OUTPUT ...`).
#
# Two layers. The base (bash, coreutils, jq, CA certificates, glibc and kubectl) comes from
# ./base.sh: built by mmdebstrap once, then cached outside the clone keyed by its inputs. The
# top layer is the triage binary alone, so a new binary costs seconds. Both are reproducible:
# every time stamp is fixed (SOURCE_DATE_EPOCH for the top layer and the image's dates, default
# the last commit's time), archive entries are sorted and owned by numeric ids only.
#
# Needs mmdebstrap, umoci, dpkg-query, objcopy (binutils), python3 with venv and GNU tar;
# root, or user namespaces for mmdebstrap's unshare mode.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

binary=${1:-$repo/target/release/triage}
output=${2:-$repo/target/image/triage-oci.tar}
for tool in umoci objcopy tar sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "build.sh: $tool is missing (Debian: apt-get install umoci binutils tar coreutils)" >&2
    exit 1
  }
done
[[ -f $binary && -x $binary ]] || {
  echo "build.sh: no triage binary at $binary (cargo build --release, or pass its path)" >&2
  exit 1
}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 1735689600)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
base=$(bash "$here/base.sh")

# The top layer: /usr/local/bin/triage, without debug sections (a debug build's are most of its
# size; symbols stay, for backtraces).
work=$(mktemp -d "${TMPDIR:-/tmp}/triage-image-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/layer/usr/local/bin"
objcopy --strip-debug "$binary" "$work/layer/usr/local/bin/triage"
chmod 0755 "$work/layer/usr/local/bin/triage"
tar --create --file "$work/triage.tar" --directory "$work/layer" --no-recursion \
  --sort=name --format=posix --numeric-owner --owner=0 --group=0 \
  --mtime="@$epoch" --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  ./usr/local/bin/triage

# Which binary went in (tests/e2e/image.rs checks that the image holds the one it tests).
binary_sha256=$(sha256sum <"$binary" | cut -d' ' -f1)
cp -a "$base" "$work/oci"
umoci raw add-layer --image "$work/oci:base" --tag triage --history.created "$created" \
  --history.created_by "/usr/local/bin/triage from $binary_sha256" "$work/triage.tar"
# The data directory is conversations.data_dir (TRIAGE_CONVERSATIONS__DATA_DIR); HOLMES_HOST and
# HOLMES_PORT are where HolmesGPT's chart expects the server.
umoci config --image "$work/oci:triage" --no-history --created "$created" \
  --architecture amd64 --os linux --author "triage" \
  --config.user 10001:10001 --config.workingdir /home/triage \
  --config.entrypoint /usr/bin/tini --config.entrypoint -- \
  --config.entrypoint /usr/local/bin/triage --config.cmd serve \
  --config.exposedports 5050/tcp \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env HOME=/home/triage \
  --config.env HOLMES_HOST=0.0.0.0 --config.env HOLMES_PORT=5050 \
  --config.env TRIAGE_CONVERSATIONS__DATA_DIR=/var/lib/triage \
  --config.label org.opencontainers.image.title=triage \
  --config.label "triage.binary.sha256=$binary_sha256" \
  --config.label "org.opencontainers.image.created=$created"
umoci rm --image "$work/oci:base"
umoci gc --layout "$work/oci"
mkdir -p "$(dirname "$output")"
tar --create --file "$output.tmp" --directory "$work/oci" \
  --sort=name --format=posix --numeric-owner --owner=0 --group=0 \
  --mtime="@$epoch" --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime .
mv "$output.tmp" "$output"
echo "build.sh: $output ($(du -m "$output" | cut -f1) MiB; layers: $(
  find "$work/oci/blobs" -type f -size +100k -printf '%s\n' | sort -n | awk '{ printf "%s%d MiB", sep, $1 / 1048576; sep = " + " }'
) compressed)" >&2
