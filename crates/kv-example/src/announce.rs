//! Ports for a local cluster without a bind-then-release race.
//!
//! A parent that binds port 0, reads the port, closes the listener and hands the number to a
//! child to bind later races every other process on the machine: the kernel may give that
//! port to anyone in between (an outgoing connection's local port, another test's listener).
//! Here each replica process binds port 0 itself and keeps the listeners
//! ([`bind_and_announce`]), writes the two addresses to its announcement file, and waits for
//! the cluster file; the parent collects every announcement ([`collect`]) and only then writes
//! the cluster file naming them ([`write_atomically`]). A port is never free between the
//! moment it is chosen and the moment its replica serves on it.
//!
//! ```no_run
//! use std::net::{IpAddr, Ipv4Addr};
//! use std::path::Path;
//! use std::time::Duration;
//! # fn demo() -> Result<(), squall_kv::announce::AnnounceError> {
//! // In replica 0's process:
//! let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
//! let (transport, client) =
//!     squall_kv::announce::bind_and_announce(ip, Path::new("/tmp/c/replica-0.addr"))?;
//! // In the parent: every replica's (transport, client) addresses, in order.
//! let files = [Path::new("/tmp/c/replica-0.addr").to_path_buf()];
//! let addrs = squall_kv::announce::collect(&files, Duration::from_secs(30), || Ok(()))?;
//! # drop((transport, client, addrs)); Ok(()) }
//! ```

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why an announcement could not be made or collected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnnounceError {
    /// A bind, a read or a write failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file (or address) concerned.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An announcement file does not hold two addresses.
    #[error("announcement {path} is not \"<transport> <client>\": {text:?}")]
    Malformed {
        /// The file.
        path: String,
        /// What it holds.
        text: String,
    },
    /// The wait ran past its limit.
    #[error("waited {waited:?} for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
    },
    /// The caller's liveness check failed (a replica process exited).
    #[error("{0}")]
    Gone(String),
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AnnounceError {
    let path = path.display().to_string();
    move |source| AnnounceError::Io { what, path, source }
}

/// Binds a transport and a client listener on port 0 of `ip` and writes their addresses
/// (`"<transport> <client>\n"`) to `file`, atomically ([`write_atomically`]). The listeners
/// are returned bound: the ports stay this process's from the bind on.
pub fn bind_and_announce(
    ip: IpAddr,
    file: &Path,
) -> Result<(TcpListener, TcpListener), AnnounceError> {
    let bind = |_| {
        TcpListener::bind((ip, 0)).map_err(|source| AnnounceError::Io {
            what: "cannot bind",
            path: SocketAddr::new(ip, 0).to_string(),
            source,
        })
    };
    let (transport, client) = (bind(0)?, bind(1)?);
    let local = |l: &TcpListener| {
        l.local_addr()
            .map_err(io("cannot read the address of", file))
    };
    let text = format!("{} {}\n", local(&transport)?, local(&client)?);
    write_atomically(file, &text)?;
    Ok((transport, client))
}

/// Writes `text` to `path` so that a reader sees either no file or all of it: a temporary file
/// beside it, renamed into place.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), AnnounceError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(io("cannot write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io("cannot rename into place", path))
}

/// Waits until `path` exists (written with [`write_atomically`]) and returns its contents;
/// fails after `timeout`.
pub fn wait_for_file(path: &Path, timeout: Duration) -> Result<String, AnnounceError> {
    let start = Instant::now();
    loop {
        match std::fs::read_to_string(path) {
            Ok(text) => return Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot read", path)(e)),
        }
        if start.elapsed() > timeout {
            return Err(AnnounceError::Timeout {
                what: path.display().to_string(),
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until every file of `files` holds an announcement and returns each one's
/// `(transport, client)` addresses, in the order of `files`. `alive` is called between polls
/// (e.g. to check that no replica process exited); its error ends the wait. Fails after
/// `timeout`.
pub fn collect(
    files: &[PathBuf],
    timeout: Duration,
    mut alive: impl FnMut() -> Result<(), String>,
) -> Result<Vec<(SocketAddr, SocketAddr)>, AnnounceError> {
    let start = Instant::now();
    let mut found: Vec<Option<(SocketAddr, SocketAddr)>> = vec![None; files.len()];
    loop {
        for (slot, file) in found.iter_mut().zip(files) {
            if slot.is_some() {
                continue;
            }
            match std::fs::read_to_string(file) {
                Ok(text) => *slot = Some(parse(file, &text)?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("cannot read", file)(e)),
            }
        }
        if found.iter().all(Option::is_some) {
            return Ok(found.into_iter().flatten().collect());
        }
        alive().map_err(AnnounceError::Gone)?;
        if start.elapsed() > timeout {
            let missing = (files.iter().zip(&found))
                .filter(|(_, f)| f.is_none())
                .map(|(p, _)| p.display().to_string())
                .collect::<Vec<_>>();
            return Err(AnnounceError::Timeout {
                what: format!("the announcements {}", missing.join(", ")),
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn parse(file: &Path, text: &str) -> Result<(SocketAddr, SocketAddr), AnnounceError> {
    let malformed = || AnnounceError::Malformed {
        path: file.display().to_string(),
        text: text.to_string(),
    };
    let mut words = text.split_whitespace().map(str::parse::<SocketAddr>);
    match (words.next(), words.next(), words.next()) {
        (Some(Ok(t)), Some(Ok(c)), None) => Ok((t, c)),
        _ => Err(malformed()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn announcements_are_collected_in_order_and_malformed_ones_refused() {
        let dir = std::env::temp_dir().join(format!("squall-kv-announce-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files: Vec<PathBuf> = (0..3).map(|k| dir.join(format!("r{k}.addr"))).collect();
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let held: Vec<_> = files
            .iter()
            .map(|f| bind_and_announce(ip, f).unwrap())
            .collect();
        let addrs = collect(&files, Duration::from_secs(5), || Ok(())).unwrap();
        for ((t, c), (lt, lc)) in addrs.iter().zip(&held) {
            assert_eq!(*t, lt.local_addr().unwrap());
            assert_eq!(*c, lc.local_addr().unwrap());
        }
        write_atomically(&files[1], "127.0.0.1:1\n").unwrap();
        assert!(matches!(
            collect(&files, Duration::from_secs(5), || Ok(())),
            Err(AnnounceError::Malformed { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
