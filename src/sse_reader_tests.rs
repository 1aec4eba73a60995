use futures::StreamExt;
use proptest::prelude::*;

use super::*;

/// Every event of `body` fed in pieces cut at `cuts`, as (name, data, id).
fn events_of(
    body: &[u8],
    cuts: &[usize],
    max: usize,
) -> Result<Vec<(String, String, String)>, usize> {
    let mut decoder = SseDecoder::new(max);
    let mut out = Vec::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain([body.len()]) {
        let end = end.clamp(start, body.len());
        decoder.feed(Bytes::copy_from_slice(&body[start..end]));
        while let Some(e) = decoder.next_event()? {
            out.push((
                e.name().to_owned(),
                e.text().unwrap_or("<bytes>").to_owned(),
                e.id().to_owned(),
            ));
        }
        start = end;
    }
    Ok(out)
}

fn event(name: &str, data: &str, id: &str) -> (String, String, String) {
    (name.into(), data.into(), id.into())
}

#[test]
fn every_line_ending_and_every_cut_gives_the_same_events() {
    for eol in ["\n", "\r\n", "\r"] {
        let body = [
            "\u{FEFF}: a comment",
            "data: {\"a\":1}",
            "",
            "event: delta",
            "id: 7",
            "data:first",
            "data:  second",
            "",
            "data",
            "",
            "event: no-data",
            "",
            "data: last",
            "",
            "data: cut off",
        ]
        .join(eol);
        let want = vec![
            event("message", "{\"a\":1}", ""),
            event("delta", "first\n second", "7"),
            event("message", "", "7"),
            event("message", "last", "7"),
        ];
        assert_eq!(
            events_of(body.as_bytes(), &[], 1 << 20),
            Ok(want.clone()),
            "{eol:?}"
        );
        for cut in 0..=body.len() {
            assert_eq!(
                events_of(body.as_bytes(), &[cut], 1 << 20),
                Ok(want.clone()),
                "{eol:?} cut at {cut}"
            );
        }
        let every_byte: Vec<usize> = (1..body.len()).collect();
        assert_eq!(
            events_of(body.as_bytes(), &every_byte, 1 << 20),
            Ok(want),
            "{eol:?} byte by byte"
        );
    }
}

#[test]
fn a_crlf_split_before_its_lf_ends_one_line() {
    // The LF of a CRLF arrives alone; the next LF is the blank line that ends the event.
    let got = events_of(b"data: a\r\n\ndata: b\r\n\n", &[8, 9, 10], 1 << 20);
    assert_eq!(
        got,
        Ok(vec![event("message", "a", ""), event("message", "b", "")])
    );
}

#[test]
fn an_id_with_nul_is_ignored_and_names_are_made_text() {
    let got = events_of(
        b"id: 1\ndata: a\n\nid: 2\0\nevent: \xFFx\ndata: b\n\n",
        &[],
        1 << 20,
    );
    assert_eq!(
        got,
        Ok(vec![
            event("message", "a", "1"),
            event("\u{FFFD}x", "b", "1")
        ])
    );
}

#[test]
fn data_that_is_not_utf8_is_kept_as_bytes() {
    let mut decoder = SseDecoder::new(1 << 20);
    decoder.feed(Bytes::from_static(b"data: \xC3\x28\n\n"));
    let e = decoder
        .next_event()
        .expect("within the bound")
        .expect("an event");
    assert_eq!(e.data(), b"\xC3\x28");
    assert_eq!(e.text(), None);
}

#[test]
fn a_line_received_whole_is_not_copied() {
    let piece = Bytes::from_static(b"data: {\"x\":1}\n\ndata: {\"y\":2}\n\n");
    let mut decoder = SseDecoder::new(1 << 20);
    decoder.feed(piece.clone());
    let first = decoder.next_event().expect("ok").expect("an event");
    let second = decoder.next_event().expect("ok").expect("an event");
    assert_eq!(first.data().as_ptr(), piece[6..].as_ptr());
    assert_eq!(second.data().as_ptr(), piece[21..].as_ptr());
    assert_eq!(decoder.next_event(), Ok(None));
}

#[test]
fn the_bound_stops_a_line_without_end_and_an_event_without_a_blank_line() {
    // One line growing over pieces.
    let line = vec![b'x'; 100];
    assert_eq!(
        events_of(
            &[b"data: ".as_slice(), &line, &line].concat(),
            &[50, 150],
            150
        ),
        Err(150)
    );
    // Short lines, no blank line between them.
    let lines = "data: abcd\n".repeat(20);
    assert_eq!(events_of(lines.as_bytes(), &[], 150), Err(150));
    // The same lines as events of their own: each is small.
    let events = "data: abcd\n\n".repeat(200);
    assert_eq!(
        events_of(events.as_bytes(), &[7, 300, 301], 150).map(|e| e.len()),
        Ok(200)
    );
}

#[tokio::test]
async fn the_stream_passes_a_body_error_on_and_ends() {
    let pieces = vec![
        Ok(Bytes::from_static(b"data: one\n\nda")),
        Ok(Bytes::from_static(b"ta: two\n\n")),
        Err("reset"),
        Ok(Bytes::from_static(b"data: three\n\n")),
    ];
    let got: Vec<_> = sse_events(futures::stream::iter(pieces), 1 << 20)
        .collect()
        .await;
    let data: Vec<_> = got
        .iter()
        .map(|e| e.as_ref().map(|e| e.text().unwrap_or_default().to_owned()))
        .collect();
    assert_eq!(
        data,
        [
            Ok("one".to_owned()),
            Ok("two".to_owned()),
            Err(&SseError::Body("reset"))
        ]
    );
}

#[tokio::test]
async fn an_oversized_event_ends_the_stream() {
    let pieces = vec![
        Ok::<_, ()>(Bytes::from(vec![b'x'; 64])),
        Ok(Bytes::from_static(b"\n\n")),
    ];
    let got: Vec<_> = sse_events(futures::stream::iter(pieces), 32)
        .collect()
        .await;
    assert_eq!(got, [Err(SseError::TooLarge(32))]);
}

proptest! {
    /// The same events as the parser this replaced (kept as a dev-dependency for this check),
    /// for streams of every field kind, line ending and cut.
    #[test]
    fn agrees_with_eventsource_stream(
        lines in prop::collection::vec(
            (prop::sample::select(vec!["data", "data:", "data: ", "event: ", "id: ", ":", "retry: ", "x: ", ""]),
             "[a-z {}\"]{0,6}",
             prop::sample::select(vec!["\n", "\r\n", "\r"])),
            0..24),
        cuts in prop::collection::vec(0usize..200, 0..4),
    ) {
        let mut body: String = lines.iter().map(|(f, v, eol)| {
            if f.is_empty() { (*eol).to_owned() } else { format!("{f}{v}{eol}") }
        }).collect();
        // eventsource-stream waits for the byte after a final CR (it could start a CRLF) and
        // so never ends that line; the standard ends it there, as this reader does. An LF
        // after it means the same to both.
        if body.ends_with('\r') {
            body.push('\n');
        }
        let mut cuts = cuts;
        cuts.sort_unstable();
        let ours = events_of(body.as_bytes(), &cuts, 1 << 20).expect("within the bound");
        let theirs: Vec<_> = futures::executor::block_on(async {
            use eventsource_stream::Eventsource;
            let mut pieces = Vec::new();
            let mut start = 0;
            for end in cuts.iter().copied().chain([body.len()]) {
                let end = end.clamp(start, body.len());
                pieces.push(Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(&body.as_bytes()[start..end])));
                start = end;
            }
            futures::stream::iter(pieces).eventsource().collect::<Vec<_>>().await
        })
        .into_iter()
        .map(|e| {
            let e = e.expect("ASCII parses");
            (e.event, e.data, e.id)
        })
        .collect();
        prop_assert_eq!(ours, theirs, "body {:?}", body);
    }
}

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
