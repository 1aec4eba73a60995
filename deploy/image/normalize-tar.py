"""Rewrites a root file system archive so the same files always give the same bytes:
    normalize-tar.py IN OUT EPOCH [LEAVE_OUT...]
entries sorted by name, no time stamp later than EPOCH, numeric owners only, no access or
change times; the directories LEAVE_OUT (relative paths) and what they hold are left out
(deploy/image/build.sh: the image's base layer)."""

import sys
import tarfile

source, target, epoch = sys.argv[1], sys.argv[2], int(sys.argv[3])
leave_out = tuple(sys.argv[4:])


def plain(name):
    return name.removeprefix("./").rstrip("/") or "."


def kept(name):
    return not any(name == d or name.startswith(d + "/") for d in leave_out)


with tarfile.open(source) as archive:
    members = {plain(m.name): m for m in archive.getmembers() if kept(plain(m.name))}
    # Sorting could put a hard link before the entry holding its data; none of the image's
    # packages ship one, so one appearing is a change to look at, not to paper over.
    links = [name for name, m in members.items() if m.islnk()]
    if links:
        sys.exit(f"normalize-tar.py: hard links are not handled: {links[:5]}")
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as out:
        for name in sorted(members):
            m = members[name]
            entry = tarfile.TarInfo(name if name == "." else "./" + name)
            for field in ("type", "mode", "uid", "gid", "size", "linkname", "devmajor", "devminor"):
                setattr(entry, field, getattr(m, field))
            entry.mtime = min(int(m.mtime), epoch)
            entry.uname = entry.gname = ""
            entry.pax_headers = {k: v for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr.")}
            if entry.isreg():
                with archive.extractfile(m) as data:
                    out.addfile(entry, data)
            else:
                out.addfile(entry)
