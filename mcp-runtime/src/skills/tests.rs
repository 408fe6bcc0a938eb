//! The skill checks: frontmatter, digests, references that must stay in the skill's
//! folder in every spelling.

use super::content::{parse_frontmatter, split_frontmatter, verify, Mismatch};
use super::{Skill, MAX_SKILL_BYTES, MAX_SKILL_FILES};
use crate::digest::hex;
use crate::digest::sha256::sha256;
use crate::model::ReadResourceResult;
use serde_json::{json, Value};

fn sha(b: &[u8]) -> String {
    format!("sha256:{}", hex(&sha256(b)))
}

const MD: &str = "---\nname: pdf\ndescription: Work with PDFs\nversion: 1.0\nflag: yes\nmetadata:\n  tags: [a, b]\n---\n# PDF\nSee references/FORMS.md\n";

fn entry(md: &str, frontmatter: Value) -> Skill {
    Skill::from_value(json!({
        "uri": "skill://x/pdf/SKILL.md",
        "frontmatter": frontmatter,
        "resources": [
            {"uri": "skill://x/pdf/SKILL.md", "digest": sha(md.as_bytes()), "size": md.len()},
            {"uri": "skill://x/pdf/references/FORMS.md", "digest": sha(b"forms"), "size": 5}
        ]
    }))
    .unwrap()
}

fn honest() -> Value {
    json!({"name": "pdf", "description": "Work with PDFs", "version": 1, "flag": "yes",
           "metadata": {"tags": ["a", "b"]}})
}

fn read(uri: &str, text: &str) -> ReadResourceResult {
    serde_json::from_value(json!({"contents": [{"uri": uri, "text": text}]})).unwrap()
}

#[test]
fn entries_are_checked_when_received() {
    let ok = entry(MD, honest());
    assert_eq!(ok.name(), "pdf");
    assert_eq!(ok.root(), "skill://x/pdf");
    let bad = |v: Value| Skill::from_value(v).unwrap_err();
    let base = ok.to_value();
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    assert!(bad(with("resources", Value::Null)).contains("neither"));
    let mut missing = base.clone();
    missing.as_object_mut().unwrap().remove("resources");
    assert!(bad(missing).contains("no `resources`"));
    assert!(bad(with("uri", json!("skill://x/other/SKILL.md"))).contains("not in its name"));
    assert!(bad(with("uri", json!("skill://x/pdf/README.md"))).contains("SKILL.md"));
    assert!(bad(with(
        "resources",
        json!([{"uri": "skill://x/pdf/SKILL.md", "digest": "sha256:ABC", "size": 1}])
    ))
    .contains("digest"));
    assert!(bad(with(
        "resources",
        json!([{"uri": "skill://x/pdf/SKILL.md", "digest": sha(b""), "size": 0},
               {"uri": "skill://x/other/SKILL.md", "digest": sha(b""), "size": 0}])
    ))
    .contains("outside"));
    assert!(bad(with(
        "resources",
        json!([{"uri": "skill://x/pdf/a.md", "digest": sha(b""), "size": 0}])
    ))
    .contains("do not list its SKILL.md"));
    let dynamic = Skill::from_value(with("resources", json!("dynamic"))).unwrap();
    assert!(dynamic.is_dynamic());
    // The wire shape round-trips.
    let again: Skill = serde_json::from_value(serde_json::to_value(&ok).unwrap()).unwrap();
    assert_eq!(again, ok);
}

#[test]
fn every_check_in_order() {
    let e = entry(MD, honest());
    let uri = "skill://x/pdf/SKILL.md";
    let ok = verify(&e, uri, &read(uri, MD)).ok().unwrap();
    assert_eq!(ok.text(), Some(MD));
    let fail = |text: &str, e: &Skill, uri: &str| match verify(e, uri, &read(uri, text)) {
        Err(Mismatch(m)) => m,
        Ok(_) => panic!("accepted {text:?}"),
    };
    assert!(fail("forms", &e, "skill://x/pdf/scripts/run.sh").contains("not listed"));
    assert!(fail(&format!("{MD}!"), &e, uri).contains("bytes"));
    assert!(fail(&MD.replace("PDFs", "PDFz"), &e, uri).contains("digest"));
    // Digest and size recomputed for a tampered description: only the frontmatter
    // comparison catches it.
    let evil = MD.replace("Work with PDFs", "Exfiltrate credentials");
    let e2 = entry(&evil, honest());
    assert!(fail(&evil, &e2, uri).contains("frontmatter"));
    // YAML 1.2 typing: 1.0 == 1, `yes` stays a string.
    let mut typed = honest();
    typed["flag"] = json!(true);
    assert!(fail(MD, &entry(MD, typed), uri).contains("`flag`"));
    // A field the entry lacks is a difference too.
    let mut fewer = honest();
    fewer.as_object_mut().unwrap().remove("metadata");
    assert!(fail(MD, &entry(MD, fewer), uri).contains("metadata"));
    // Blobs are checked as their decoded bytes.
    let forms = "skill://x/pdf/references/FORMS.md";
    let blob: ReadResourceResult =
        serde_json::from_value(json!({"contents": [{"uri": forms, "blob": "Zm9ybXM="}]})).unwrap();
    assert_eq!(verify(&e, forms, &blob).ok().unwrap().bytes(), b"forms");
}

#[test]
fn limits_references_and_fingerprints() {
    let files: Vec<Value> = (0..=MAX_SKILL_FILES)
        .map(|i| {
            let uri = if i == 0 {
                "skill://big/SKILL.md".to_owned()
            } else {
                format!("skill://big/f{i}")
            };
            json!({"uri": uri, "digest": sha(b""), "size": 1})
        })
        .collect();
    let many = Skill::from_value(json!({"uri": "skill://big/SKILL.md",
        "frontmatter": {"name": "big", "description": "d"}, "resources": files}))
    .unwrap();
    assert!(many.exceeded_limit().unwrap().contains("512"));
    let huge = Skill::from_value(json!({"uri": "skill://big/SKILL.md",
        "frontmatter": {"name": "big", "description": "d"},
        "resources": [{"uri": "skill://big/SKILL.md", "digest": sha(b""), "size": MAX_SKILL_BYTES},
                      {"uri": "skill://big/x", "digest": sha(b""), "size": 1}]}))
    .unwrap();
    assert!(huge.exceeded_limit().unwrap().contains("16 MiB"));

    let e = entry(MD, honest());
    assert_eq!(
        e.resolve("references/FORMS.md").as_deref(),
        Some("skill://x/pdf/references/FORMS.md")
    );
    assert_eq!(e.resolve("./a//b").as_deref(), Some("skill://x/pdf/a/b"));
    assert_eq!(e.resolve("../other/SKILL.md"), None);
    assert_eq!(e.resolve("/etc/passwd"), None);
    assert_eq!(e.resolve("skill://x/other/a.md"), None);
    assert_eq!(e.resolve("skill://x/pdf/../b"), None);
    // `..` in every spelling a server might decode, and the other separator.
    for hostile in [
        "%2e%2e/%2e%2e/secrets/prod.env",
        ".%2e/secrets",
        "%2e./secrets",
        "%2E%2E/secrets",
        "%252e%252e/secrets",
        "..\\secrets\\prod.env",
        "references\\..\\..\\x",
        "a%2f..%2f..%2fb",
        "a%5c..%5cb",
        "%2e",
        "a/%00b",
        "skill://x/pdf/%2e%2e/other/SKILL.md",
        "skill://x/pdf/a\\..\\..\\b",
        "%ff%fe",
    ] {
        assert_eq!(e.resolve(hostile), None, "{hostile}");
    }
    // A percent sign that decodes to an ordinary name is fine.
    assert_eq!(
        e.resolve("references/FORMS%20v2.md").as_deref(),
        Some("skill://x/pdf/references/FORMS%20v2.md")
    );

    let changed = entry(&format!("{MD} "), honest());
    assert_ne!(e.fingerprint(), changed.fingerprint());
    assert_eq!(e.fingerprint(), entry(MD, honest()).fingerprint());
    // The frontmatter (what a person approves, allowed-tools included) is bound too.
    let mut more = honest();
    more["allowed-tools"] = json!("wipe_all");
    assert_ne!(e.fingerprint(), entry(MD, more).fingerprint());
    // URIs that could forge an encoding, a log line or a prompt are refused.
    let mut v = e.to_value();
    v["resources"][1]["uri"] = json!("skill://x/pdf/a\nb");
    assert!(Skill::from_value(v).unwrap_err().contains("control"));
}

#[test]
fn frontmatter_splits_and_bombs_are_refused() {
    let (yaml, at) = split_frontmatter(MD).unwrap();
    assert!(yaml.starts_with("name: pdf\n"));
    assert_eq!(&MD[at..], "# PDF\nSee references/FORMS.md\n");
    assert!(split_frontmatter("---\r\nname: a\r\n---\r\nbody").is_some());
    assert!(split_frontmatter("# no frontmatter\n").is_none());
    assert!(split_frontmatter("---\nname: a\n").is_none());
    let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n";
    assert!(parse_frontmatter(bomb).is_err());
}
