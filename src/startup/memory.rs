//! What start-up does to the process's memory: closing it to tools, and handing back what only
//! start-up needed.

/// Tools run as triage's user, and a process may read its own user's `/proc/PID/environ` and
/// `/proc/PID/mem`: triage's API keys would be one `cat` away. Not dumpable, triage's
/// `/proc` files belong to root; its children get the flag back when they exec.
pub(super) fn protect_process_memory() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) changes a flag of this process and nothing else.
    unsafe {
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            tracing::warn!("could not mark the process non-dumpable: tools may read its memory");
        }
    }
}

/// Hands back what start-up alone needed: the heap pages freed after building the encodings
/// and the prompts (glibc keeps them until told), and the binary's code and constant pages
/// mapped during start-up. The binary is large (27 MB of code and constants); start-up runs
/// code from all over it and reads the embedded vocabularies once, and the kernel maps up to
/// 16 neighbouring pages on each fault. Without this, an idle server counts about 25 MiB of
/// its own binary as resident, most of which serving never runs.
pub(super) fn release_start_up_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it touches no live data.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    release_start_up_code();
}

/// Unmaps the pages of the binary's read-only mappings (code, constants) that hold nothing
/// but the file's own bytes, and stops the kernel from mapping neighbours on later faults.
/// The pages stay in the page cache; a page serving needs is mapped again on its first use.
#[cfg(target_os = "linux")]
fn release_start_up_code() {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    for mapping in file_only_mappings(&smaps, &exe.to_string_lossy()) {
        // SAFETY: the range is one whole mapping of the executable, readable and never
        // writable, with no anonymous (copied-on-write or relocated) page: every page in it
        // is the file's content, so dropping it loses nothing and the next access maps the
        // same bytes again. MADV_RANDOM only changes how much a fault maps.
        unsafe {
            let start = mapping.start as *mut libc::c_void;
            libc::madvise(start, mapping.len, libc::MADV_RANDOM);
            libc::madvise(start, mapping.len, libc::MADV_DONTNEED);
        }
    }
}

#[derive(Debug, PartialEq)]
struct Mapping {
    start: usize,
    len: usize,
}

/// The executable's private read-only or read-execute mappings whose resident pages are all
/// file pages (`Anonymous: 0 kB`). The RELRO mapping (relocated at load, then made read-only)
/// has anonymous pages and is left alone.
fn file_only_mappings(smaps: &str, exe: &str) -> Vec<Mapping> {
    let mut found = Vec::new();
    let mut current: Option<Mapping> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            let perms = fields.next().unwrap_or_default();
            // The rest of the line, so that a replaced binary's `… (deleted)` matches only
            // `/proc/self/exe`'s own `… (deleted)`.
            let path = fields.skip(3).collect::<Vec<_>>().join(" ");
            current = (matches!(perms, "r--p" | "r-xp") && path == exe && end > start).then_some(
                Mapping {
                    start,
                    len: end - start,
                },
            );
        } else if first == "Anonymous:"
            && let Some(mapping) = current.take()
            && fields.next() == Some("0")
        {
            found.push(mapping);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55f73d513000-55f73e873000 r--p 00000000 fe:00 10013740                   /usr/bin/triage
Rss:                5888 kB
Anonymous:             0 kB
VmFlags: rd mr mw me sd
55f73e873000-55f740106000 r-xp 0135f000 fe:00 10013740                   /usr/bin/triage
Rss:               19376 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me sd
55f740106000-55f74021c000 r--p 02bf1000 fe:00 10013740                   /usr/bin/triage
Rss:                1112 kB
Anonymous:          1112 kB
VmFlags: rd mr mw me ac sd
55f74021c000-55f740227000 rw-p 02d06000 fe:00 10013740                   /usr/bin/triage
Anonymous:            44 kB
7f656ebab000-7f656ebb3000 r--p 00000000 fe:00 10018934                   /usr/lib/libc.so.6
Anonymous:             0 kB
7f656ec00000-7f656ec10000 r--p 00000000 fe:00 10018935                   /usr/bin/triage (deleted)
Anonymous:             0 kB
";

    #[test]
    fn only_the_executables_file_only_read_only_mappings_are_released() {
        assert_eq!(
            file_only_mappings(SMAPS, "/usr/bin/triage"),
            vec![
                Mapping {
                    start: 0x55f73d513000,
                    len: 0x55f73e873000 - 0x55f73d513000
                },
                Mapping {
                    start: 0x55f73e873000,
                    len: 0x55f740106000 - 0x55f73e873000
                },
            ]
        );
    }

    /// Resident KiB of the executable's mappings that `file_only_mappings` selects.
    fn resident_code_kib() -> u64 {
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let selected = file_only_mappings(&smaps, &exe.to_string_lossy());
        let mut total = 0;
        let mut counting = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or_default();
            if let Some((start, _)) = first.split_once('-')
                && let Ok(start) = usize::from_str_radix(start, 16)
            {
                counting = selected.iter().any(|m| m.start == start);
            } else if counting && let Some(kib) = line.strip_prefix("Rss:") {
                total += kib
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0);
            }
        }
        total
    }

    #[test]
    fn releasing_start_up_code_unmaps_it_and_the_process_runs_on() {
        let before = resident_code_kib();
        release_start_up_memory();
        let after = resident_code_kib();
        assert!(after < before, "resident code {before} KiB → {after} KiB");
        // Code that was unmapped is mapped again when it runs.
        assert_eq!(file_only_mappings(SMAPS, "/usr/bin/triage").len(), 2);
    }
}
