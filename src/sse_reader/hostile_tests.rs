//! The reader against a hostile server: a plain reference reading of the standard, every cut
//! and empty piece, the size bound at its edges, and what the decoder keeps alive.

use futures::StreamExt;
use proptest::prelude::*;

use super::tests::{event, events_of};
use super::*;

type Event = (String, String, String);

/// The standard read plainly over the whole body at once, the bound counting each line's bytes
/// as received (a line the body ends in included): what the decoder must give for every cut.
fn reference(body: &[u8], max: usize) -> Result<Vec<(String, String, String)>, usize> {
    let mut lines = Vec::new();
    let mut rest = body;
    while let Some(end) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
        lines.push((&rest[..end], true));
        let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
        rest = &rest[end + if crlf { 2 } else { 1 }..];
    }
    lines.push((rest, false));
    let (mut out, mut data, mut name, mut id) = (Vec::new(), None::<Vec<u8>>, None, None);
    let mut event_bytes = 0;
    for (at, (raw, ended)) in lines.into_iter().enumerate() {
        event_bytes += raw.len();
        if event_bytes > max {
            return Err(max);
        }
        if !ended {
            break;
        }
        let line = match raw.strip_prefix(b"\xEF\xBB\xBF") {
            Some(stripped) if at == 0 => stripped,
            _ => raw,
        };
        if line.is_empty() {
            event_bytes = 0;
            if let Some(data) = data.take() {
                out.push((
                    name.take()
                        .filter(|n: &String| !n.is_empty())
                        .unwrap_or_else(|| "message".to_owned()),
                    String::from_utf8(data).unwrap_or_else(|_| "<bytes>".to_owned()),
                    id.clone().unwrap_or_default(),
                ));
            }
            name = None;
            continue;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(0) => continue,
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let text = || String::from_utf8_lossy(value).into_owned();
        match field {
            b"data" => {
                if let Some(data) = &mut data {
                    data.push(b'\n');
                    data.extend_from_slice(value);
                } else {
                    data = Some(value.to_vec());
                }
            }
            b"event" => name = Some(text()),
            b"id" if !value.contains(&0) => id = Some(text()),
            _ => {}
        }
    }
    Ok(out)
}

#[test]
fn every_pair_of_cuts_with_empty_pieces_agrees_with_the_reference() {
    let body = b"\xEF\xBB\xBFid: 1\r\n: note\rdata: a\r\rdata\n\r\nevent: e\ndata: \xFFb\ndata: c\n\ndata: tail";
    for max in [8, 9, 10, 1 << 20] {
        let want = reference(body, max);
        for a in 0..=body.len() {
            for b in a..=body.len() {
                // Cutting twice at one place feeds an empty piece.
                assert_eq!(
                    events_of(body, &[a, a, b], max),
                    want,
                    "max {max}, cuts {a} {b}"
                );
            }
        }
    }
}

#[test]
fn the_bound_is_exact_whatever_the_cuts_and_counts_a_bom_and_lines_that_store_nothing() {
    // The largest event's lines: "\u{FEFF}: comment" (12 bytes), "x: unknown" (10), "data: 0123456789" (16).
    let body = b"\xEF\xBB\xBF: comment\nx: unknown\ndata: 0123456789\n\ndata: next\n\n";
    let largest = 12 + 10 + 16;
    for cut in 0..=body.len() {
        assert_eq!(
            events_of(body, &[cut], largest).map(|e| e.len()),
            Ok(2),
            "at the bound, cut at {cut}"
        );
        assert_eq!(
            events_of(body, &[cut], largest - 1),
            Err(largest - 1),
            "one byte over, cut at {cut}"
        );
    }
    // The case a cut used to decide: a BOM and one line, exactly at the bound.
    let body = b"\xEF\xBB\xBFdata: 0123456789\n\n";
    for cut in 0..=body.len() {
        assert_eq!(
            events_of(body, &[cut], 19).map(|e| e.len()),
            Ok(1),
            "cut at {cut}"
        );
        assert_eq!(events_of(body, &[cut], 18), Err(18), "cut at {cut}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Hostile streams (BOMs anywhere, NUL, bytes that are not UTF-8, bare CRs, empty pieces, a
    /// bound close to the events' sizes) read the same as the plain reference, whatever the cuts.
    #[test]
    fn hostile_streams_agree_with_the_reference(
        tokens in prop::collection::vec(prop::sample::select(vec![
            &b"data"[..], b"data:", b"data: ", b"event:", b"id: ", b":", b"retry: 1", b"x",
            b" ", b"\xEF\xBB\xBF", b"\xEF\xBB", b"\0", b"\xFF", b"\xC3", b"\xA9", b"{\"a\":1}",
            b"\n", b"\r", b"\r\n", b"\n\n",
        ]), 0..40),
        cuts in prop::collection::vec(0usize..160, 0..6),
        max in 0usize..48,
    ) {
        let body = tokens.concat();
        let mut cuts = cuts;
        cuts.sort_unstable();
        let max = if max == 47 { 1 << 20 } else { max };
        prop_assert_eq!(events_of(&body, &cuts, max), reference(&body, max), "body {:?}", body);
    }
}

/// All the ways to cut `body` (every subset of the cut points, each cut also feeding an empty
/// piece) agree with the reference, for the smallest bounds.
#[test]
fn tiny_bounds_and_every_set_of_cuts_agree_with_the_reference() {
    let bodies: [&[u8]; 8] = [
        b"\xEF\xBB\xBF\r\n\r\n",
        b"\xEF\xBB\xBFd\r\n\n",
        b"\xEF\xBB\xBFdata\r\n\r\n",
        b"data\r\n\r\ndata",
        b"a\r\nb\r\r\n\n",
        b"\r\r\n\xEF\xBB\xBF\n\n",
        b":\r\n:\r\n\r\nid\0\r",
        b"\xEF\xBBdata\n\n\xBF",
    ];
    for body in bodies {
        let points = body.len() - 1;
        for max in 0..=5 {
            let want = reference(body, max);
            for set in 0u32..(1 << points) {
                let cuts: Vec<usize> = (1..=points)
                    .filter(|at| set & (1 << (at - 1)) != 0)
                    .flat_map(|at| [at, at])
                    .collect();
                assert_eq!(
                    events_of(body, &cuts, max),
                    want,
                    "body {body:?} max {max} cuts {cuts:?}"
                );
            }
        }
    }
}

/// The bound at its smallest, pinned by hand (not only against the reference).
#[test]
fn the_smallest_bounds_by_hand() {
    let cases: [(&[u8], usize, Result<usize, usize>); 10] = [
        (b"\n\n\r\n\r", 0, Ok(0)),
        (b"\xEF\xBB\xBF\n", 2, Err(2)),
        (b"\xEF\xBB\xBF\n", 3, Ok(0)),
        (b"\xEF\xBB\xBF\r\n\r\n", 3, Ok(0)),
        (b"data\r\n\r\n", 3, Err(3)),
        (b"data\r\n\r\n", 4, Ok(1)),
        (b"data\r\ndata\r\n\r\n", 7, Err(7)),
        (b"data\r\ndata\r\n\r\n", 8, Ok(1)),
        (b"data\r\n\r\ndata\r\n\r\n", 4, Ok(2)),
        (b":\r:\r:\r\r", 2, Err(2)),
    ];
    for (body, max, want) in cases {
        for a in 0..=body.len() {
            for b in a..=body.len() {
                assert_eq!(
                    events_of(body, &[a, b], max).map(|e| e.len()),
                    want,
                    "body {body:?} max {max} cuts {a} {b}"
                );
            }
        }
    }
}

/// The standard's own examples and rules a client can tell apart, at every cut.
#[test]
fn the_standards_rules_at_every_cut() {
    let cases: Vec<(&[u8], Vec<Event>)> = vec![
        (
            b"data: YHOO\ndata: +2\ndata: 10\n\n",
            vec![event("message", "YHOO\n+2\n10", "")],
        ),
        (
            b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n",
            vec![
                event("message", "first event", "1"),
                event("message", "second event", ""),
            ],
        ),
        (
            b"data\n\ndata\ndata\n\ndata:",
            vec![event("message", "", ""), event("message", "\n", "")],
        ),
        (
            b"data:test\n\ndata: test\n\n",
            vec![event("message", "test", ""), event("message", "test", "")],
        ),
        // The name is reset by a blank line even when nothing was dispatched.
        (b"event: a\n\ndata: x\n\n", vec![event("message", "x", "")]),
        (
            b"event: a\ndata: x\n\ndata: y\n\n",
            vec![event("a", "x", ""), event("message", "y", "")],
        ),
        // The last id carries over, an empty id clears it, an id with NUL leaves it.
        (
            b"id: 5\ndata: x\n\ndata: y\n\nid\ndata: z\n\nid: 6\n\nid: 7\0\ndata: w\n\n",
            vec![
                event("message", "x", "5"),
                event("message", "y", "5"),
                event("message", "z", ""),
                event("message", "w", "6"),
            ],
        ),
        // A trailing empty data line is a trailing LF.
        (b"data: a\ndata\n\n", vec![event("message", "a\n", "")]),
        // Field names are exact.
        (b"Data: a\ndata : b\ndatax: c\n data: d\n\n", vec![]),
        // Only the first BOM of the stream is skipped.
        (b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", vec![]),
        (b"\n\xEF\xBB\xBFdata: x\n\n", vec![]),
        // Only one space is dropped; a tab is kept.
        (b"data:\t x\n\n", vec![event("message", "\t x", "")]),
        // retry and unknown fields are ignored; the event still dispatches.
        (b"retry: 10\nfoo\ndata\n\n", vec![event("message", "", "")]),
        // UTF-8 split across pieces is whole again; one cut short is replaced.
        (
            "event: €\nid: é\ndata: ü\n\n".as_bytes(),
            vec![event("€", "ü", "é")],
        ),
        (
            b"event: \xE2\x82\nid: \xC3\ndata: \xFC\n\n",
            vec![event("\u{FFFD}", "<bytes>", "\u{FFFD}")],
        ),
    ];
    for (body, want) in cases {
        assert_eq!(
            reference(body, 1 << 20),
            Ok(want.clone()),
            "reference {body:?}"
        );
        for a in 0..=body.len() {
            for b in a..=body.len() {
                assert_eq!(
                    events_of(body, &[a, b], 1 << 20),
                    Ok(want.clone()),
                    "body {body:?} cuts {a} {b}"
                );
            }
        }
    }
}

/// A piece whose drop is seen.
struct Tracked(Vec<u8>, std::sync::Arc<std::sync::atomic::AtomicBool>);

impl AsRef<[u8]> for Tracked {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn tracked(body: &[u8]) -> (Bytes, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    (
        Bytes::from_owner(Tracked(body.to_vec(), dropped.clone())),
        dropped,
    )
}

/// A large piece is not kept alive by the decoder once its events are gone: not while waiting
/// for the next piece (a `watch` stream idles for minutes), and not by the last event id,
/// which carries over for the rest of the stream.
#[test]
fn a_piece_is_released_once_its_events_are_dropped() {
    let padding = format!(": {}\n", "p".repeat(256 * 1024));
    // Waiting for the next piece.
    let (piece, dropped) = tracked(format!("data: a\n\n{padding}").as_bytes());
    let mut decoder = SseDecoder::new(1 << 20);
    decoder.feed(piece);
    let event = decoder.next_event().expect("ok").expect("an event");
    assert_eq!(decoder.next_event(), Ok(None));
    drop(event);
    assert!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        "the read piece is held while waiting for the next"
    );
    // The last event id.
    let (piece, dropped) = tracked(format!("id: 7\ndata: a\n\n{padding}").as_bytes());
    let mut decoder = SseDecoder::new(1 << 20);
    decoder.feed(piece);
    drop(decoder.next_event().expect("ok").expect("an event"));
    assert_eq!(decoder.next_event(), Ok(None));
    decoder.feed(Bytes::from_static(b"data: b\n\n"));
    let next = decoder.next_event().expect("ok").expect("an event");
    assert_eq!(next.id(), "7");
    assert!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        "the id keeps its whole piece alive"
    );
}

/// A long line read over many pieces leaves no buffer of its size behind once its event is
/// gone: the stream may run for hours after it.
#[test]
fn a_long_line_over_pieces_leaves_no_large_buffer_behind() {
    for (pieces, size) in [(1, 1 << 20), (2, 1 << 19), (32, 64 * 1024), (3, 100_000)] {
        let mut decoder = SseDecoder::new(8 << 20);
        decoder.feed(Bytes::from_static(b"data: "));
        assert_eq!(decoder.next_event(), Ok(None));
        let chunk = Bytes::from(vec![b'x'; size]);
        for _ in 0..pieces {
            decoder.feed(chunk.clone());
            assert_eq!(decoder.next_event(), Ok(None));
        }
        decoder.feed(Bytes::from_static(b"x\n\n"));
        let event = decoder.next_event().expect("ok").expect("an event");
        assert_eq!(event.data().len(), pieces * size + 1);
        drop(event);
        // Once the line is gone, what is left may reclaim the line's whole buffer: growing it
        // past its spare room shows how much it holds.
        let spare = decoder.partial.capacity();
        decoder.partial.reserve(spare + 1);
        assert!(
            decoder.partial.capacity() <= 2 * KEEP_LINE_BUFFER + 1,
            "{pieces} pieces of {size}: {} bytes kept for the next line",
            decoder.partial.capacity()
        );
    }
}

/// Many tiny pieces, many data lines in one event, many blank and comment lines: all read,
/// the joined data exactly as sent (the work is linear; measured at review, not asserted).
#[test]
fn many_small_things_are_all_read() {
    let body =
        "data: a\n".repeat(1 << 14) + "\n" + &"\n".repeat(1 << 16) + &":\n\n".repeat(1 << 14);
    let cuts: Vec<usize> = (1..body.len()).step_by(3).collect();
    let got = events_of(body.as_bytes(), &cuts, 1 << 20).expect("within the bound");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, vec!["a"; 1 << 14].join("\n"));
}

#[tokio::test]
async fn after_an_error_the_stream_stays_ended() {
    for pieces in [
        vec![
            Ok(Bytes::from(vec![b'x'; 64])),
            Ok(Bytes::from_static(b"\n\ndata: y\n\n")),
        ],
        vec![Err("reset"), Ok(Bytes::from_static(b"data: y\n\n"))],
    ] {
        let mut events = sse_events(futures::stream::iter(pieces), 32);
        assert!(matches!(events.next().await, Some(Err(_))));
        for _ in 0..3 {
            assert_eq!(events.next().await, None);
        }
    }
}
