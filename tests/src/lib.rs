//! Cross-crate integration tests live in `tests/tests/`; this library is their shared support:
//! the fabric files of `testdata/`, finding the real InfiniBand tools and the `ibsm` binary,
//! scratch directories, and ibsim running in a private network namespace ([`Ibsim`]) with
//! every client (diag tools, `ibsm`) entering it.
//!
//! The tools are required: a missing one fails the test with an install hint.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use sm_core::fabric::Fabric;
use sm_core::read_topology_str;
use sm_mad::{Guid, Lid};

/// What to install when a tool is missing.
pub const INSTALL: &str = "install them with: apt-get install ibsim-utils libumad2sim0 infiniband-diags opensm prometheus curl";

/// A program on PATH or in the sbin directories a non-root PATH may lack.
pub fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin"];
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` not found; {INSTALL} (unshare and nsenter are in util-linux)")
        })
}

/// The libumad2sim shim: `$IBSM_UMAD2SIM`, or `<libdir>/umad2sim/libumad2sim.so`.
pub fn shim() -> PathBuf {
    if let Some(p) = std::env::var_os("IBSM_UMAD2SIM") {
        return PathBuf::from(p);
    }
    let mut dirs = vec![
        PathBuf::from("/usr/lib"),
        PathBuf::from("/usr/lib64"),
        PathBuf::from("/usr/local/lib"),
    ];
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        let mut multiarch: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        multiarch.sort();
        dirs.extend(multiarch);
    }
    dirs.iter()
        .map(|d| d.join("umad2sim/libumad2sim.so"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("libumad2sim.so not found; {INSTALL}"))
}

/// The `ibsm` binary the tests run: `$IBSM_BIN` when set (a release build, say), else the
/// `ibsm-under-test` binary this package builds from sm-daemon's sources with its tests (see
/// `tests/Cargo.toml`), so `cargo test -p ibsm-tests` needs no other build first. A macro:
/// cargo passes that binary's path only to integration tests, when they compile.
#[macro_export]
macro_rules! ibsm_bin {
    () => {
        $crate::ibsm_bin_or(env!("CARGO_BIN_EXE_ibsm-under-test"))
    };
}

/// `$IBSM_BIN`, or `built`; see [`ibsm_bin!`].
pub fn ibsm_bin_or(built: &str) -> PathBuf {
    std::env::var_os("IBSM_BIN").map_or_else(|| PathBuf::from(built), PathBuf::from)
}

/// The text of a fabric file of the workspace's `testdata/` (see its README: our own small
/// fabrics, shared with sm-core's and sm-sim's tests).
pub fn fabric_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The LID of every end port that has a link (CA ports, a switch's port 0), by port GUID.
pub fn end_port_lids(f: &Fabric) -> BTreeMap<Guid, Lid> {
    f.end_ports()
        .map(|p| f.port(p))
        .filter(|p| p.num == 0 || p.remote.is_some())
        .map(|p| (p.guid, p.lid))
        .collect()
}

/// A scratch directory, kept when the test fails so its logs can be read.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// `$TMPDIR/ibsm-<prefix>-<pid>-<name>`, empty.
    pub fn new(prefix: &str, name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("ibsm-{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A file's text, or "" when it does not exist.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.0.join(name)).unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Polls `f` every `step` until it returns `Some` or `limit` has passed.
pub fn poll<T>(limit: Duration, step: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(step);
    }
}

/// A program in the background (an SM), stopped with SIGTERM when dropped. Started through
/// [`Ibsim::command`], the child is the `timeout` watchdog, which passes the signal on.
pub struct Background(pub Child);

impl Background {
    /// Stops it (SIGTERM) unless it has ended, and returns how it ended.
    pub fn terminate(&mut self) -> ExitStatus {
        if let Ok(None) = self.0.try_wait() {
            Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status()
                .unwrap();
        }
        self.0.wait().unwrap()
    }

    /// Stops it now (SIGTERM) and waits for it.
    pub fn stop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let _ = self.0.wait();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits up to `secs` for the file at `path` (a log) to contain `what`; panics with the
/// file's text when it never does.
pub fn wait_for_text(path: &Path, what: &str, secs: u64) {
    poll(Duration::from_secs(secs), Duration::from_millis(50), || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|t| t.contains(what))
            .map(|_| ())
    })
    .unwrap_or_else(|| {
        panic!(
            "never saw {what:?} in {}:\n{}",
            path.display(),
            std::fs::read_to_string(path).unwrap_or_default()
        )
    });
}

/// Starts ibsim in a private network namespace: `unshare -n`, loopback up, pid written to
/// `ns.pid`, then `exec ibsim` (bounded by `timeout` in case the test process dies).
const START: &str = r#"
ip link set lo up || { echo "ip link set lo up failed" >&2; exit 90; }
echo $$ > ns.pid
exec "$@"
"#;

/// ibsim on a fabric file, in its own network namespace. Every client enters that
/// namespace with `nsenter --net` and runs from the scratch directory (the shim writes its
/// fake sysfs there). Dropping it kills ibsim.
pub struct Ibsim {
    child: Child,
    console: Option<ChildStdin>,
    ns_pid: u32,
    pub dir: PathBuf,
    shim: PathBuf,
    timeout: PathBuf,
    nsenter: PathBuf,
}

impl Ibsim {
    /// Starts ibsim on `dir/net_file` with extra flags (`-N`, `-S`, ... limits) and waits
    /// until it answers. With `console`, ibsim reads console commands from a pipe that
    /// stays open ([`Ibsim::console`]); otherwise it runs with `--no-console`.
    pub fn start(dir: &Path, net_file: &str, flags: &[String], console: bool) -> Ibsim {
        let (ibsim, unshare, timeout, nsenter) = (
            program("ibsim"),
            program("unshare"),
            program("timeout"),
            program("nsenter"),
        );
        let shim = shim();
        let log = std::fs::File::create(dir.join("ibsim.log")).unwrap();
        let mut cmd = Command::new(&timeout);
        cmd.args(["--kill-after=5", "900"])
            .arg(&unshare)
            .args(["-n", "sh", "-c", START, "sh"])
            .arg(&ibsim)
            .args(["-s", net_file])
            .args(flags)
            .current_dir(dir)
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if console {
            cmd.stdin(Stdio::piped());
        } else {
            cmd.arg("--no-console").stdin(Stdio::null());
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", unshare.display()));
        let console = child.stdin.take();
        let pid_file = dir.join("ns.pid");
        let ns_pid = poll(Duration::from_secs(10), Duration::from_millis(10), || {
            std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
        });
        let mut sim = Ibsim {
            child,
            console,
            ns_pid: ns_pid.unwrap_or(0),
            dir: dir.to_path_buf(),
            shim,
            timeout,
            nsenter,
        };
        if ns_pid.is_none() {
            sim.fail("ibsim's namespace did not start (unshare -n needs root)");
        }
        // Ready once a client can attach and get an answer (a big fabric takes a while to
        // parse; a client started earlier fails to connect).
        let ready = poll(Duration::from_secs(60), Duration::from_millis(50), || {
            if let Ok(Some(status)) = sim.child.try_wait() {
                sim.fail(&format!("ibsim exited early: {status}"));
            }
            let out = sim.tool(&["smpquery", "-D", "nodeinfo", "0"], 10);
            out.status.success().then_some(())
        });
        if ready.is_none() {
            sim.fail("ibsim never answered");
        }
        sim
    }

    /// Panics with ibsim's log.
    pub fn fail(&self, why: &str) -> ! {
        let log = std::fs::read_to_string(self.dir.join("ibsim.log")).unwrap_or_default();
        panic!("{why}\n--- ibsim.log\n{log}\n({INSTALL})");
    }

    /// A command run inside the namespace, from the scratch directory, bounded by
    /// `secs`: `timeout secs nsenter --net=... env LD_PRELOAD=<shim> program args...`.
    pub fn command(&self, program: &Path, args: &[&str], secs: u32) -> Command {
        let mut c = Command::new(&self.timeout);
        c.args(["--kill-after=5", &secs.to_string()])
            .arg(&self.nsenter)
            .arg(format!("--net=/proc/{}/ns/net", self.ns_pid))
            .arg("env")
            .arg(format!("LD_PRELOAD={}", self.shim.display()))
            .arg(program)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        c
    }

    /// `ibsm` (the binary at `bin`, see [`ibsm_bin!`]) with `args` inside the namespace,
    /// attached to `host` (ibsim's `SIM_HOST`: a node name of the fabric file; `None`: the
    /// shim's default, the file's first node), logging at info level without colours.
    pub fn ibsm(&self, bin: &Path, host: Option<&str>, args: &[&str], secs: u32) -> Command {
        let mut c = self.command(bin, args, secs);
        c.env("RUST_LOG", "info").env("NO_COLOR", "1");
        if let Some(h) = host {
            c.env("SIM_HOST", h);
        }
        c
    }

    /// What `ibnetdiscover` (from the shim's default node) finds, parsed.
    pub fn discover(&self) -> Fabric {
        let text = self.tool_ok(&["ibnetdiscover"], 60);
        read_topology_str(&text, &self.dir.join("ibnetdiscover.out"))
            .unwrap_or_else(|e| panic!("ibnetdiscover output does not parse: {e}\n{text}"))
            .fabric
    }

    /// Runs a diag tool (found on PATH) through the shim and returns its output.
    pub fn tool(&self, args: &[&str], secs: u32) -> Output {
        let (name, rest) = args.split_first().unwrap();
        self.command(&program(name), rest, secs).output().unwrap()
    }

    /// Runs a diag tool and returns its stdout, panicking with its stderr on failure.
    pub fn tool_ok(&self, args: &[&str], secs: u32) -> String {
        let out = self.tool(args, secs);
        assert!(
            out.status.success(),
            "{args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a bash script inside the namespace (no shim in bash itself); the script gets
    /// `$SHIM` and a function `t` that runs a tool through the shim with a 20 s timeout.
    pub fn script(&self, body: &str, secs: u32) -> Output {
        let prelude = r#"t() { LD_PRELOAD="$SHIM" timeout 20 "$@"; }"#;
        let mut c = Command::new(&self.timeout);
        c.args(["--kill-after=5", &secs.to_string()])
            .arg(&self.nsenter)
            .arg(format!("--net=/proc/{}/ns/net", self.ns_pid))
            .args(["bash", "-c", &format!("{prelude}\n{body}")])
            .env("SHIM", &self.shim)
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        c.output().unwrap()
    }

    /// Runs `commands` (shell lines; `t TOOL ARGS` runs a tool through the shim) one after
    /// the other in one script inside the namespace and returns each one's standard output,
    /// with `!! failed` appended to those that failed.
    pub fn each(&self, commands: &[String]) -> Vec<String> {
        const MARK: &str = "@@ibsm-each@@";
        let body: String = commands
            .iter()
            .map(|c| format!("echo '{MARK}'; {c} || echo '!! failed'\n"))
            .collect();
        let out = self.script(&body, 900);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let parts: Vec<String> = text.split(MARK).skip(1).map(String::from).collect();
        assert_eq!(
            parts.len(),
            commands.len(),
            "the script stopped early: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        parts
    }

    /// Sends one console command (`Unlink "sw"[3]`, `ReLink ...`). Nothing acknowledges it:
    /// poll the fabric afterwards.
    pub fn console(&mut self, line: &str) {
        let c = self
            .console
            .as_mut()
            .expect("ibsim was started without a console");
        writeln!(c, "{line}").unwrap();
        c.flush().unwrap();
    }
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        if self.ns_pid != 0 {
            let _ = Command::new("kill")
                .args(["-KILL", &self.ns_pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
