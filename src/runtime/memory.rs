//! The process's own memory: closed to tools, and what it no longer uses handed back (after
//! start-up, and when a burst of requests is over).

/// Tools run as triage's user, and a process may read its own user's `/proc/PID/environ` and
/// `/proc/PID/mem`: triage's API keys would be one `cat` away. Not dumpable, triage's
/// `/proc` files belong to root; its children get the flag back when they exec.
pub fn protect_process_memory() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) changes a flag of this process and nothing else.
    unsafe {
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            tracing::warn!("could not mark the process non-dumpable: tools may read its memory");
        }
    }
}

/// Hands back what the process holds but does not use: heap pages freed after a burst or
/// after building the encodings and prompts (the allocator keeps them until told), and the
/// binary's code and constant pages. The binary is large (45 MB of code and constants);
/// start-up and a burst run code from all over it, start-up reads the embedded vocabularies
/// once, and the kernel maps up to 16 neighbouring pages on each fault (fault-around). Without
/// this, an idle server counts 20–25 MiB of its own binary as resident, most of which it does
/// not run.
pub fn release_unused() {
    crate::runtime::allocator::trim_heap();
    #[cfg(target_os = "linux")]
    release_code_pages();
}

/// Unmaps the pages of the binary's read-only mappings (code, constants) that hold nothing
/// but the file's own bytes. The pages stay in the page cache; a page serving needs is mapped
/// again on its first use.
#[cfg(target_os = "linux")]
fn release_code_pages() {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    for mapping in file_only_mappings(&smaps, &exe.to_string_lossy()) {
        // SAFETY: the range is one whole mapping of the executable that was never writable
        // (no `ac` flag, unlike RELRO) and holds no anonymous page, in memory or swapped:
        // every page in it is the file's content, so dropping it loses nothing and the next
        // access maps the same bytes again.
        unsafe {
            libc::madvise(
                mapping.start as *mut libc::c_void,
                mapping.len,
                libc::MADV_DONTNEED,
            );
        }
    }
}

#[derive(Debug, PartialEq)]
struct Mapping {
    start: usize,
    len: usize,
}

/// The executable's private read-only or read-execute mappings whose pages are all file
/// pages: `Anonymous: 0 kB`, `Swap: 0 kB`, and never writable (the RELRO mapping, relocated at
/// load and then made read-only, carries the `ac` flag and is left alone).
fn file_only_mappings(smaps: &str, exe: &str) -> Vec<Mapping> {
    let mut found = Vec::new();
    let mut current: Option<Mapping> = None;
    let mut anonymous_or_swapped = false;
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
            anonymous_or_swapped = false;
        } else if matches!(first, "Anonymous:" | "Swap:") {
            anonymous_or_swapped |= fields.next() != Some("0");
        } else if first == "VmFlags:"
            && let Some(mapping) = current.take()
            && !anonymous_or_swapped
            && !fields.any(|flag| flag == "ac" || flag == "wr")
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
Swap:                  0 kB
VmFlags: rd mr mw me sd
55f73e873000-55f740106000 r-xp 0135f000 fe:00 10013740                   /usr/bin/triage
Rss:               19376 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me sd
55f740106000-55f74021c000 r--p 02bf1000 fe:00 10013740                   /usr/bin/triage
Rss:                1112 kB
Anonymous:          1112 kB
Swap:                  0 kB
VmFlags: rd mr mw me ac sd
55f74021c000-55f740227000 rw-p 02d06000 fe:00 10013740                   /usr/bin/triage
Anonymous:            44 kB
Swap:                  0 kB
VmFlags: rd wr mr mw me ac sd
55f74a000000-55f74a010000 r--p 02e00000 fe:00 10013740                   /usr/bin/triage
Anonymous:             0 kB
Swap:                 64 kB
VmFlags: rd mr mw me sd
55f74b000000-55f74b010000 r--p 02f00000 fe:00 10013740                   /usr/bin/triage
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me ac sd
7f656ebab000-7f656ebb3000 r--p 00000000 fe:00 10018934                   /usr/lib/libc.so.6
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me sd
7f656ec00000-7f656ec10000 r--p 00000000 fe:00 10018935                   /usr/bin/triage (deleted)
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me sd
";

    #[test]
    fn only_the_executables_never_written_file_only_mappings_are_released() {
        // Not RELRO (anonymous pages, `ac`), not a mapping with swapped-out pages, not the
        // data segment, not another file, not a deleted binary of the same name.
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
    fn releasing_code_pages_unmaps_them_and_the_process_runs_on() {
        let before = resident_code_kib();
        release_unused();
        let after = resident_code_kib();
        // Code that was unmapped is mapped again when it runs, as this test goes on to do.
        assert!(after < before, "resident code {before} KiB → {after} KiB");
    }
}
