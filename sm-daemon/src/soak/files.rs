//! A case as files, so that a failure becomes a regression test and replays with the
//! ordinary command line too:
//!
//! ```text
//! DIR/case.toml      seed, what was drawn, the SM's port, how long to run
//! DIR/fabric.net     the fabric (ibnetdiscover format; ibsim reads it too)
//! DIR/ibsm.toml      the SM's configuration
//! DIR/schedule.scn   the schedule (the scenario format of `ibsm run --scenario`)
//! DIR/reload-N.toml  configurations the schedule's `reload` lines name
//! ```
//!
//! docs/TESTING.md describes each file in full.

use std::path::{Path, PathBuf};

use sm_mad::Guid;
use sm_sim::scenario::Scenario;

use super::{Case, Nanos};

/// Why a case could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaseError {
    #[error("{file}: {message}")]
    Io { file: PathBuf, message: String },
    #[error("{file}: {message}")]
    Bad { file: PathBuf, message: String },
}

/// `case.toml`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    /// The seed the case was drawn from (0: written by hand).
    #[serde(default)]
    seed: u64,
    /// What was drawn, in words.
    #[serde(default)]
    summary: String,
    /// The SM under test's port: `NODE_GUID[PORT]`.
    sm_port: String,
    /// Virtual time to run (`95s`, `500ms`).
    run_for: String,
    /// Seed of the simulated fabric's loss and reordering (default: `seed`).
    #[serde(default)]
    sim_seed: Option<u64>,
    /// The schedule shrank from this many events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shrunk_from: Option<usize>,
    /// The invariants it broke when saved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    broke: Vec<String>,
}

fn io(file: &Path, e: impl std::fmt::Display) -> CaseError {
    CaseError::Io {
        file: file.to_path_buf(),
        message: e.to_string(),
    }
}

fn bad(file: &Path, e: impl std::fmt::Display) -> CaseError {
    CaseError::Bad {
        file: file.to_path_buf(),
        message: e.to_string(),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), CaseError> {
    let p = dir.join(name);
    std::fs::write(&p, text).map_err(|e| io(&p, e))
}

fn read(dir: &Path, name: &str) -> Result<String, CaseError> {
    let p = dir.join(name);
    std::fs::read_to_string(&p).map_err(|e| io(&p, e))
}

/// `NODE_GUID[PORT]`.
fn parse_port(s: &str) -> Option<(Guid, u8)> {
    let (g, rest) = s.split_once('[')?;
    let num = rest.strip_suffix(']')?.parse().ok()?;
    Some((g.trim().parse().ok()?, num))
}

impl Case {
    /// Writes the case into `dir` (created if needed); `broke` names what it broke and
    /// `shrunk_from` how many events it had before shrinking.
    pub fn save(
        &self,
        dir: &Path,
        broke: &[&str],
        shrunk_from: Option<usize>,
    ) -> Result<(), CaseError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let head = CaseFile {
            seed: self.seed,
            summary: self.summary.clone(),
            sm_port: format!("{:#018x}[{}]", self.sm_port.0.0, self.sm_port.1),
            run_for: sm_sim::scenario::format_time(self.run_for),
            sim_seed: Some(self.sim_seed),
            shrunk_from,
            broke: broke.iter().map(|s| s.to_string()).collect(),
        };
        let mut text = format!(
            "# An ibsm simulation test case; replay it with `ibsm soak --replay {}`.\n",
            dir.display()
        );
        text.push_str(&toml::to_string(&head).map_err(|e| bad(&dir.join("case.toml"), e))?);
        write(dir, "case.toml", &text)?;
        write(dir, "fabric.net", &self.net)?;
        write(dir, "ibsm.toml", &self.config)?;
        write(dir, "schedule.scn", &self.schedule.to_text())?;
        for (name, text) in &self.reloads {
            // Only files the schedule still names.
            let named = self
                .schedule
                .events
                .iter()
                .any(|e| matches!(&e.action, sm_sim::scenario::Action::Reload(f) if f == name));
            if named {
                write(dir, name, text)?;
            }
        }
        Ok(())
    }

    /// Reads a case written by [`Case::save`] (or by hand).
    pub fn load(dir: &Path) -> Result<Case, CaseError> {
        let head_path = dir.join("case.toml");
        let head: CaseFile =
            toml::from_str(&read(dir, "case.toml")?).map_err(|e| bad(&head_path, e))?;
        let sm_port = parse_port(&head.sm_port).ok_or_else(|| {
            bad(
                &head_path,
                format!("sm_port = {:?}: expected NODE_GUID[PORT]", head.sm_port),
            )
        })?;
        let run_for: Nanos = sm_sim::scenario::parse_time(&head.run_for)
            .map_err(|e| bad(&head_path, format!("run_for = {:?}: {e}", head.run_for)))?;
        let net = read(dir, "fabric.net")?;
        let fabric = sm_core::read_topology_str(&net, &dir.join("fabric.net"))
            .map_err(|e| bad(&dir.join("fabric.net"), e))?
            .fabric;
        let config = read(dir, "ibsm.toml")?;
        let scn_path = dir.join("schedule.scn");
        let schedule =
            Scenario::parse(&scn_path.display().to_string(), &read(dir, "schedule.scn")?)
                .map_err(|e| bad(&scn_path, e))?;
        let mut reloads = Vec::new();
        for e in &schedule.events {
            if let sm_sim::scenario::Action::Reload(name) = &e.action {
                if !reloads.iter().any(|(n, _): &(String, String)| n == name) {
                    reloads.push((name.clone(), read(dir, name)?));
                }
            }
        }
        Ok(Case {
            seed: head.seed,
            summary: head.summary,
            net,
            fabric,
            config,
            reloads,
            sm_port,
            schedule,
            run_for,
            sim_seed: head.sim_seed.unwrap_or(head.seed),
        })
    }
}
