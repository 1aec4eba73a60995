#!/usr/bin/env bash
# mmdebstrap's customize hook for the image's root file system (deploy/image/build.sh):
#   rootfs-hook.sh ROOT KUBECTL PACKAGE...
# Debian's maintainer scripts need the essential set (sh, sed, grep, …) to install anything, so
# the chroot is built with it; this hook then keeps only PACKAGE... and what they depend on,
# removing every other package's files and its entry in dpkg's database without running any of
# its scripts (the database stays true, so image scanners see exactly what is inside). Then it
# adds kubectl, the user triage runs as and its directories.
set -euo pipefail
# Sorting and the chroot's bash: the image has no locales but C.
export LC_ALL=C
root=$1 kubectl=$2
shift 2
admin=$root/var/lib/dpkg

query() { dpkg-query --admindir="$admin" "$@"; }

# The installed package that is NAME or provides it, if any.
provider() {
  if query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'; then
    echo "$1"
    return
  fi
  query -W -f='${Package} ${Provides}\n' |
    awk -v want="$1" '{ for (i = 2; i <= NF; i++) { p = $i; sub(/,$/, "", p); if (p == want) { print $1; exit } } }'
}

# The closure of PACKAGE... under Pre-Depends and Depends (the first installed alternative).
declare -A keep=()
queue=("$@")
while ((${#queue[@]})); do
  pkg=${queue[0]}
  queue=("${queue[@]:1}")
  [[ -n ${keep[$pkg]:-} ]] && continue
  [[ -n $(provider "$pkg") ]] || {
    echo "rootfs-hook: package $pkg is not installed" >&2
    exit 1
  }
  keep[$pkg]=1
  IFS=',' read -ra groups <<<"$(query -W -f='${Pre-Depends}, ${Depends}' "$pkg")"
  for group in "${groups[@]}"; do
    IFS='|' read -ra alternatives <<<"$group"
    for alternative in "${alternatives[@]}"; do
      name=$(sed -E 's/\(.*\)//; s/:any//; s/[[:space:]]//g' <<<"$alternative")
      [[ -z $name ]] && continue
      found=$(provider "$name")
      if [[ -n $found ]]; then
        queue+=("$found")
        break
      fi
    done
  done
done
mapfile -t drop < <(query -W -f='${Package}\n' | sort | while read -r pkg; do
  [[ -n ${keep[$pkg]:-} ]] || echo "$pkg"
done)
echo "rootfs-hook: keeping ${!keep[*]}" >&2
echo "rootfs-hook: removing ${drop[*]}" >&2

# Files and directories only removed packages own, compared by their /usr paths (/bin, /sbin
# and /lib* are links into /usr, and packages name either). A directory no kept package lists
# holds none of their files (dpkg lists every parent), so it goes with what the removed
# packages' scripts made in it (PAM's and systemd's state, say).
list_of() {
  for pkg in "$@"; do cat "$admin/info/$pkg.list" "$admin/info/$pkg:"*.list 2>/dev/null || true; done |
    sed -E 's#^/(bin|sbin|lib|lib32|lib64|libx32)(/|$)#/usr/\1\2#' | sort -u
}
kept_paths=$(mktemp)
trap 'rm -f "$kept_paths"' EXIT
list_of "${!keep[@]}" >"$kept_paths"
list_of "${drop[@]}" | comm -23 - "$kept_paths" | while read -r path; do
  if [[ $path != /* || $path == /. || -L $root$path && -d $root$path ]]; then
    continue # never through a link to a directory
  elif [[ -d $root$path ]]; then
    rm -rf -- "${root:?}$path"
  else
    rm -f -- "$root$path"
  fi
done

# dpkg's database: only the kept packages.
for pkg in "${drop[@]}"; do
  rm -f -- "$admin/info/$pkg".* "$admin/info/$pkg":*.*
done
awk -v keep=" ${!keep[*]} " 'BEGIN { RS = ""; ORS = "\n\n" }
  { split($0, lines, "\n"); name = lines[1]; sub(/^Package: /, "", name)
    if (index(keep, " " name " ")) print }' "$admin/status" >"$admin/status.new"
mv "$admin/status.new" "$admin/status"
# Diversions (three lines each: path, diverted to, by package) of removed packages.
awk -v keep=" ${!keep[*]} " '{ line[NR % 3] = $0 }
  NR % 3 == 0 { if (index(keep, " " $0 " ")) print line[1] "\n" line[2] "\n" $0 }' \
  "$admin/diversions" >"$admin/diversions.new"
mv "$admin/diversions.new" "$admin/diversions"
rm -f "$admin"/*-old "$admin/available" "$root"/var/cache/debconf/*-old

# Symbolic links left pointing at removed files (alternatives, mostly), judged inside the root:
# their targets are absolute paths of the image, not of the host.
find "$root" -xdev -type l -printf '/%P\n' |
  chroot "$root" /bin/bash -c 'while read -r link; do [[ -e $link ]] || echo "$link"; done' |
  while read -r link; do rm -f -- "$root$link"; done
for alternative in "$admin"/alternatives/*; do
  [[ -e $root/etc/alternatives/${alternative##*/} ]] || rm -f -- "$alternative"
done

# /bin/sh was dash's: bash serves it.
[[ -e $root/bin/sh ]] || ln -s bash "$root/usr/bin/sh"

# kubectl, and the user triage runs as (uid and gid 10001, as the Helm chart expects).
install -m 0755 "$kubectl" "$root/usr/local/bin/kubectl"
printf 'root:x:0:0:root:/root:/bin/bash\ntriage:x:10001:10001:triage:/home/triage:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\ntriage:x:10001:\nnogroup:x:65534:\n' >"$root/etc/group"
rm -f "$root"/etc/shadow* "$root"/etc/gshadow* "$root"/etc/passwd- "$root"/etc/group- "$root"/etc/subuid* "$root"/etc/subgid*
install -d -m 0755 -o 10001 -g 10001 "$root/home/triage"
install -d -m 0700 -o 10001 -g 10001 "$root/var/lib/triage"
# The runtime bind-mounts its own; empty files keep the host's out of the image.
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"
