//! Simulation testing in the test suite: every case a soak run found and saved
//! (`tests/data/soak/`, each named after what it broke) replays with no invariant broken,
//! and a fixed set of seeds passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sm_daemon::soak::{self, Case, DrawOptions, Limits};

fn failures(out: &soak::Outcome) -> String {
    out.violations
        .iter()
        .map(|v| format!("\n  {v}"))
        .collect::<String>()
}

#[test]
fn saved_cases_replay_with_no_invariant_broken() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/soak");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.toml").exists())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no saved case in {}", dir.display());
    let mut bad = Vec::new();
    for path in &cases {
        let case = Case::load(path).unwrap_or_else(|e| panic!("{e}"));
        let out = soak::run(&case, &Limits::default());
        assert!(out.checked > 0, "{}: nothing was checked", path.display());
        if !out.passed() {
            bad.push(format!("{}:{}", path.display(), failures(&out)));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_case_saved_reads_back_the_same() {
    let case = soak::draw(7, &DrawOptions::default());
    let dir = std::env::temp_dir().join(format!("ibsm-soak-case-{}", std::process::id()));
    case.save(&dir, &["churn"], Some(9)).unwrap();
    let back = Case::load(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(back.seed, case.seed);
    assert_eq!(back.sm_port, case.sm_port);
    assert_eq!(back.run_for, case.run_for);
    assert_eq!(back.config, case.config);
    assert_eq!(back.fabric, case.fabric);
    assert_eq!(
        back.schedule.to_text(),
        case.schedule.to_text(),
        "the schedule"
    );
    let named = |c: &Case| {
        let mut v: Vec<String> = c.reloads.iter().map(|(n, _)| n.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(named(&back), named(&case));
}

#[test]
fn one_seed_draws_one_case_and_one_run() {
    let o = DrawOptions {
        max_hosts: 200,
        ..DrawOptions::default()
    };
    let a = soak::draw(11, &o);
    let b = soak::draw(11, &o);
    assert_eq!(a.net, b.net);
    assert_eq!(a.config, b.config);
    assert_eq!(a.schedule.to_text(), b.schedule.to_text());
    assert_ne!(
        soak::draw(12, &o).net,
        a.net,
        "seeds draw different fabrics"
    );
    let (x, y) = (
        soak::run(&a, &Limits::default()),
        soak::run(&b, &Limits::default()),
    );
    assert_eq!(
        (
            x.sweeps,
            x.light_sweeps,
            x.checked,
            x.lft_moved,
            x.violations.len()
        ),
        (
            y.sweeps,
            y.light_sweeps,
            y.checked,
            y.lft_moved,
            y.violations.len()
        )
    );
}
