//! Every kept input — the seed corpus and the regressions (crashes found and fixed) —
//! replayed through its target's checks, without libFuzzer: what `.ci/run` runs.

use std::path::Path;

#[test]
fn every_kept_input_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut replayed = 0;
    for (name, check) in mcp_fuzz::TARGETS {
        let mut seen = 0;
        for dir in ["corpus", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(name)) else {
                continue;
            };
            for e in entries {
                let path = e.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                eprintln!("{}", path.display());
                check(&data);
                seen += 1;
            }
        }
        assert!(seen > 0, "no inputs kept for target `{name}`");
        replayed += seen;
    }
    eprintln!("{replayed} inputs replayed");
}
