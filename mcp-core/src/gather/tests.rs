use super::*;
use proptest::prelude::*;

type Parsed = Result<Vec<Result<Message, String>>, String>;

/// What a parse says, errors' wording aside.
fn shape(p: Parsed) -> Option<Vec<Option<Message>>> {
    p.ok().map(|v| v.into_iter().map(Result::ok).collect())
}

/// The reference: the line (up to its first newline) or the body, parsed whole.
fn plain(bytes: &[u8], lines: bool) -> (Parsed, Vec<u8>) {
    match memchr::memchr(b'\n', bytes).filter(|_| lines) {
        Some(i) => (
            Message::parse(bytes[..i].trim_ascii()),
            bytes[i + 1..].to_vec(),
        ),
        None => (Message::parse(bytes.trim_ascii()), Vec::new()),
    }
}

struct Run {
    parsed: Parsed,
    /// What follows the line in the buffer (untouched).
    rest: Vec<u8>,
    /// The largest the read buffer grew.
    peak: usize,
}

/// Feeds `bytes` in pieces cut at `cuts`, as reads would.
fn gathered(bytes: &[u8], cuts: &[usize], long: usize, lines: bool) -> Run {
    let mut g = Gather::with_threshold(lines, long);
    let mut buf = Vec::new();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.push(bytes.len());
    points.sort_unstable();
    let (mut from, mut peak) = (0, 0);
    for to in points {
        buf.extend_from_slice(&bytes[from..to]);
        from = to;
        peak = peak.max(buf.len());
        if let Some(end) = g.advance(&mut buf) {
            assert_eq!(buf[end], b'\n');
            let rest = buf[end + 1..].to_vec();
            assert!(g.len(end) <= bytes.len());
            let parsed = g.finish(buf[..end].trim_ascii());
            // What arrived after the line is handed back as it came.
            let mut rest_all = rest;
            rest_all.extend_from_slice(&bytes[from..]);
            return Run {
                parsed,
                rest: rest_all,
                peak,
            };
        }
        assert_eq!(g.len(buf.len()), from, "the length as sent is kept");
    }
    Run {
        parsed: g.finish(buf.trim_ascii()),
        rest: Vec::new(),
        peak,
    }
}

fn check_same(bytes: &[u8], cuts: &[usize], long: usize, lines: bool) {
    let (want, want_rest) = plain(bytes, lines);
    let got = gathered(bytes, cuts, long, lines);
    assert_eq!(
        shape(got.parsed),
        shape(want),
        "input: {:?}",
        String::from_utf8_lossy(bytes)
    );
    assert_eq!(got.rest, want_rest);
}

/// String contents as a peer may write them.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a",
        "hello world ",
        "\\n",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b\\f\\r\\t",
        "\\u00e9",
        "\\u0000",
        "\\uD83D\\uDE00",
        "é",
        "😀",
        "\u{7f}",
        "{}[],:",
        "mcp-gathered-",
    ])
}

/// What a peer may get wrong inside a string.
fn bad_piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "\\ud800",
        "\\udc00",
        "\\ud800\\u0041",
        "\\ud800\\ud800\\udc00",
        "\\x",
        "\\u12",
        "\\u12g4",
        "\u{1}",
    ])
}

fn string() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        9 => prop::collection::vec(piece(), 0..12),
        1 => (prop::collection::vec(piece(), 0..6), bad_piece(), prop::collection::vec(piece(), 0..6))
            .prop_map(|(mut a, bad, b)| { a.push(bad); a.extend(b); a }),
    ];
    (pieces, 1usize..40).prop_map(|(pieces, repeat)| {
        let body: String = pieces.concat();
        format!(
            "\"{}\"",
            body.repeat(if body.len() < 4 { repeat } else { 1 })
        )
    })
}

fn ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", "", " ", "\t", " \r "])
}

/// JSON text (mostly valid: the pieces carry the invalid parts).
fn json() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        any::<i32>().prop_map(|n| n.to_string()),
        Just("1.5e3".to_owned()),
        string(),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..6), ws())
                .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(&format!("{w},{w}")))),
            (prop::collection::vec((string(), inner), 0..6), ws()).prop_map(|(fields, w)| {
                let fields: Vec<String> = fields
                    .into_iter()
                    .map(|(k, v)| format!("{k}{w}:{w}{v}"))
                    .collect();
                format!("{{{w}{}{w}}}", fields.join(","))
            }),
        ]
    })
}

/// A message, or a batch of them: mostly well formed, fields in any order, some
/// unknown ones; or any fields at all.
fn message() -> impl Strategy<Value = String> {
    let id = prop_oneof![
        any::<u16>().prop_map(|n| n.to_string()),
        string(),
        Just("null".to_owned())
    ];
    let extra = prop::collection::vec(
        prop_oneof![
            string().prop_map(|v| format!("\"jsonrpc\":{v}")),
            (string(), json()).prop_map(|(k, v)| format!("{k}:{v}")),
        ],
        0..2,
    );
    let error = (string(), json(), prop::option::of(json()))
        .prop_map(|(m, d, other)| {
            let other = other.map(|o| format!(",\"other\":{o}")).unwrap_or_default();
            format!("\"error\":{{\"code\":-1,\"message\":{m},\"data\":{d}{other}}}")
        })
        .boxed();
    let kept = prop_oneof![
        (id.clone(), json())
            .prop_map(|(i, r)| vec![format!("\"id\":{i}"), format!("\"result\":{r}")]),
        (id.clone(), error.clone()).prop_map(|(i, e)| vec![format!("\"id\":{i}"), e]),
        (id.clone(), string(), json()).prop_map(|(i, m, p)| vec![
            format!("\"id\":{i}"),
            format!("\"method\":{m}"),
            format!("\"params\":{p}")
        ]),
        (string(), json())
            .prop_map(|(m, p)| vec![format!("\"method\":{m}"), format!("\"params\":{p}")]),
    ];
    let well_formed =
        (kept, extra, any::<prop::sample::Index>()).prop_map(|(mut f, extra, turn)| {
            f.extend(extra);
            let n = f.len();
            f.rotate_left(turn.index(n));
            format!("{{{}}}", f.join(","))
        });
    let field = prop_oneof![
        id.prop_map(|v| format!("\"id\":{v}")),
        string().prop_map(|v| format!("\"method\":{v}")),
        json().prop_map(|v| format!("\"params\":{v}")),
        json().prop_map(|v| format!("\"result\":{v}")),
        error,
        string().prop_map(|v| format!("\"jsonrpc\":{v}")),
        (string(), json()).prop_map(|(k, v)| format!("{k}:{v}")),
    ];
    let any_fields =
        prop::collection::vec(field, 1..5).prop_map(|f| format!("{{{}}}", f.join(",")));
    let one = prop_oneof![4 => well_formed, 1 => any_fields];
    prop_oneof![
        3 => one.clone(),
        1 => prop::collection::vec(one, 1..4).prop_map(|m| format!("[{}]", m.join(","))),
    ]
}

/// Bytes to splice in: structure, quotes, escapes, newlines.
fn noise() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec(
        (
            any::<usize>(),
            prop::sample::select(b"{}[]:,\"\\\nu \xff".to_vec()),
        ),
        0..3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    /// Gathered or parsed whole, a message comes out the same — or fails the same —
    /// however the bytes are cut into reads and whichever strings move out.
    #[test]
    fn same_as_parsing_whole(
        text in message(),
        noise in prop_oneof![3 => Just(Vec::new()), 1 => noise()],
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        long in 1usize..24,
        lines in any::<bool>(),
        trailer in prop::sample::select(vec!["", "\n", "\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n", " \r\n"]),
    ) {
        let mut bytes = text.into_bytes();
        for (at, b) in noise {
            let at = at % (bytes.len() + 1);
            bytes.insert(at, b);
        }
        bytes.extend_from_slice(trailer.as_bytes());
        check_same(&bytes, &cuts, long, lines);
    }
}

fn long_result(text: &str) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n"
    )
    .into_bytes()
}

#[test]
fn a_long_string_never_sits_in_the_buffer() {
    let text = "0123456789abcdef".repeat(64 * 1024); // 1 MiB
    let bytes = long_result(&text);
    let cuts: Vec<usize> = (1..bytes.len() / 4096).map(|i| i * 4096).collect();
    let run = gathered(&bytes, &cuts, LONG_STRING, true);
    assert!(
        run.peak < LONG_STRING + 2 * 4096 + 200,
        "the buffer grew to {} bytes",
        run.peak
    );
    let messages = run.parsed.unwrap();
    let Ok(Message::Response(r)) = &messages[0] else {
        panic!("{messages:?}")
    };
    assert_eq!(
        r.outcome.as_ref().unwrap()["content"][0]["text"].as_str(),
        Some(text.as_str())
    );
    // Positive control: the same bytes whole hold the string in the buffer.
    assert!(gathered(&bytes, &[], LONG_STRING, true).peak > text.len());
}

#[test]
fn escapes_across_reads_decode() {
    let text = "a\\\"b\\\\c\\u00e9\\uD83D\\uDE00\\n".repeat(4000);
    let bytes = long_result(&text);
    for step in [1usize, 2, 3, 5, 7, 4096] {
        let cuts: Vec<usize> = (1..bytes.len() / step).map(|i| i * step).collect();
        check_same(&bytes, &cuts, 64, true);
    }
    let run = gathered(&bytes, &[], 64, true);
    let messages = run.parsed.unwrap();
    let Ok(Message::Response(r)) = &messages[0] else {
        panic!("{messages:?}")
    };
    let got = r.outcome.as_ref().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(got, "a\"b\\cé😀\n".repeat(4000));
}

#[test]
fn a_peer_cannot_forge_a_placeholder() {
    let long = "x".repeat(100);
    // Learn a nonce's shape from one gather; a peer writing it gets nothing from another.
    let mut g = Gather::with_threshold(false, 10);
    let mut buf = long_result(&long);
    buf.pop();
    g.advance(&mut buf);
    let forged = format!("{}0", g.nonce);
    let bytes = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"a\":\"{forged}\",\"b\":\"{long}\"}}}}"
    );
    let run = gathered(bytes.as_bytes(), &[], 10, false);
    let messages = run.parsed.unwrap();
    let Ok(Message::Response(r)) = &messages[0] else {
        panic!("{messages:?}")
    };
    let result = r.outcome.as_ref().unwrap();
    assert_eq!(result["a"].as_str(), Some(forged.as_str()));
    assert_eq!(result["b"].as_str(), Some(long.as_str()));
}

#[test]
fn keys_stay_and_deep_nesting_is_not_followed() {
    let key = "k".repeat(100);
    let bytes = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"{key}\":\"{key}\"}}}}");
    check_same(bytes.as_bytes(), &[7, 50], 10, false);
    let deep = format!(
        "{{\"id\":1,\"result\":{}\"{}\"{}}}",
        "[".repeat(300),
        "v".repeat(100),
        "]".repeat(300)
    );
    let mut g = Gather::with_threshold(false, 10);
    let mut buf = deep.clone().into_bytes();
    g.advance(&mut buf);
    assert!(g.lost && g.strings.is_empty());
    check_same(deep.as_bytes(), &[], 10, false);
}

#[test]
fn an_unterminated_long_string_fails() {
    let bytes = format!("{{\"id\":1,\"result\":\"{}", "x".repeat(100));
    let run = gathered(bytes.as_bytes(), &[30, 60], 10, false);
    assert!(run.parsed.is_err());
    let line = format!("{}\n{{\"id\":2,\"result\":1}}\n", bytes);
    check_same(line.as_bytes(), &[30, 60], 10, true);
}

/// Found by `same_as_parsing_whole`: a string the parser decodes (here in `error.data`
/// of a message that is not a response) must be valid even though the message is
/// refused later; one in a field the parser skips need not be.
#[test]
fn a_decoded_field_is_validated_a_skipped_one_is_not() {
    let lone = "\\ud800\\u0041".repeat(10);
    for text in [
        format!("{{\"error\":{{\"code\":-1,\"message\":\"m\",\"data\":{{\"k\":\"{lone}\"}}}}}}"),
        format!("{{\"id\":1,\"result\":1,\"other\":\"{lone}\"}}"),
        format!("{{\"id\":1,\"error\":{{\"code\":-1,\"message\":\"m\",\"other\":\"{lone}\"}}}}"),
        format!("{{\"id\":1,\"error\":[-1,\"{lone}\"]}}"),
        format!("{{\"\\u0069d\":1,\"result\":\"{lone}\"}}"),
        format!("[{{\"id\":1,\"result\":1,\"other\":\"{lone}\"}}]"),
    ] {
        check_same(text.as_bytes(), &[], 4, false);
    }
    // Positive control: the first is refused whole, the second accepted.
    let (first, _) = plain(
        format!("{{\"error\":{{\"code\":-1,\"message\":\"m\",\"data\":\"{lone}\"}}}}").as_bytes(),
        false,
    );
    assert!(first.is_err());
    let (second, _) = plain(
        format!("{{\"id\":1,\"result\":1,\"other\":\"{lone}\"}}").as_bytes(),
        false,
    );
    assert!(second.is_ok());
}
