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


with tarfile.open(source) as archive:
    members = {
        plain(m.name): m
        for m in archive.getmembers()
        if not any(plain(m.name) == d or plain(m.name).startswith(d + "/") for d in leave_out)
    }
    # A hard link names the entry holding the data. Sorting can put a link before that entry,
    # so in each group of linked names the first in order holds the data, the others link to it.
    link_to = {}  # name -> the group's first name
    data_of = {}  # a group's first name -> the member holding the data
    groups = {}
    for name, m in members.items():
        if m.islnk():
            groups.setdefault(plain(m.linkname), set()).add(name)
    for holder, links in groups.items():
        first = min(links | {holder})
        data_of[first] = members[holder]
        for name in links | {holder}:
            link_to[name] = first

    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as out:
        for name in sorted(members):
            m = members[name]
            entry = tarfile.TarInfo(name if name == "." else "./" + name)
            if name in link_to:
                m = data_of[link_to[name]]
            for field in ("type", "mode", "uid", "gid", "size", "linkname", "devmajor", "devminor"):
                setattr(entry, field, getattr(m, field))
            if name in link_to and name != link_to[name]:
                entry.type, entry.size = tarfile.LNKTYPE, 0
                entry.linkname = "./" + link_to[name]
            entry.mtime = min(int(m.mtime), epoch)
            entry.uname = entry.gname = ""
            entry.pax_headers = {k: v for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr.")}
            if entry.isreg():
                with archive.extractfile(m) as data:
                    out.addfile(entry, data)
            else:
                out.addfile(entry)
