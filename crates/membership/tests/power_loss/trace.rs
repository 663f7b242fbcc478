//! Parsing `strace -f -y -xx -s N -o FILE` output into the file-system operations of one
//! directory tree (and the workload's stdout markers).
//!
//! With `-xx` every string strace prints (paths, buffers, `-y` fd decorations) is a run of
//! `\xNN` escapes, so parsing needs no unquoting rules beyond that. With `-f`, a system call of
//! one thread interrupted by another's is printed as `name(args <unfinished ...>` and later
//! `<... name resumed>rest`; the two halves are joined and the call counts at its completion
//! (where its effect, e.g. an `fsync`'s durability, is certain), noting where it started
//! ([`Call::start`]: an `fsync` promises only what was written before it started, s26). A
//! `close` interrupted so counts at its start instead (s26): the kernel frees the number
//! inside the call, so another thread's `openat` may return it before the close completes,
//! and applied at its completion the close would drop that newer descriptor.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::HashMap;

/// One system call as strace printed it.
#[derive(Clone, Debug)]
pub struct Call {
    pub name: String,
    pub args: Vec<String>,
    /// The text after ` = `.
    pub ret: String,
    /// How many calls had completed when this one started (its own index when no other
    /// thread's call completed meanwhile).
    pub start: usize,
}

/// Splits the trace's text into calls (completed ones, in completion order).
pub fn calls(text: &str) -> Result<Vec<Call>, String> {
    let mut pending: HashMap<String, (String, usize, bool)> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        let (pid, rest) = match line.split_once(' ') {
            Some((p, r)) if p.chars().all(|c| c.is_ascii_digit()) => (p.to_string(), r.trim()),
            _ => (String::new(), line.trim()),
        };
        if rest.starts_with("+++") || rest.starts_with("---") || rest.is_empty() {
            continue;
        }
        let mut start = out.len();
        let full = if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            let head = head.trim_end().to_string();
            let close = head.starts_with("close(");
            if close {
                // Counted here, at its start, as succeeding (it fails only for a bad number).
                let mut call =
                    parse_call(&format!("{head}) = 0")).map_err(|e| format!("{e}: {line}"))?;
                call.start = out.len();
                out.push(call);
            }
            pending.insert(pid, (head, out.len(), close));
            continue;
        } else if let Some(r) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = r.split_once(" resumed>") else {
                return Err(format!("bad resumed line: {line}"));
            };
            let Some((head, started, counted)) = pending.remove(&pid) else {
                return Err(format!("resumed without a start: {line}"));
            };
            if counted {
                continue;
            }
            start = started;
            let tail = tail.trim_start();
            if tail.starts_with(')') || head.ends_with('(') {
                format!("{head}{tail}")
            } else {
                format!("{head}, {tail}")
            }
        } else {
            rest.to_string()
        };
        let mut call = parse_call(&full).map_err(|e| format!("{e}: {line}"))?;
        call.start = start;
        out.push(call);
    }
    Ok(out)
}

/// `name(a, b, …) = ret`.
fn parse_call(s: &str) -> Result<Call, String> {
    let open = s.find('(').ok_or("no '('")?;
    let name = s[..open].to_string();
    let body = &s[open + 1..];
    // The closing parenthesis at depth 0, outside strings.
    let (mut depth, mut in_str, mut close) = (0i32, false, None);
    let mut args = Vec::new();
    let mut cur = String::new();
    for (i, c) in body.char_indices() {
        if in_str {
            cur.push(c);
            if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                cur.push(c);
            }
            '(' | '[' | '{' | '<' => {
                depth += 1;
                cur.push(c);
            }
            ']' | '}' | '>' => {
                depth -= 1;
                cur.push(c);
            }
            ')' if depth == 0 => {
                close = Some(i);
                break;
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => {
                args.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    let close = close.ok_or("no ')'")?;
    if !cur.trim().is_empty() {
        args.push(cur.trim().to_string());
    }
    let ret = body[close + 1..]
        .trim()
        .strip_prefix('=')
        .map(|r| r.trim().to_string())
        .unwrap_or_default();
    Ok(Call {
        name,
        args,
        ret,
        start: 0,
    })
}

/// Decodes a run of `\xNN` escapes (what `-xx` prints), stopping at the first other character.
fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len() / 4);
    let b = s.as_bytes();
    let mut i = 0;
    while i + 4 <= b.len() && b[i] == b'\\' && b[i + 1] == b'x' {
        let h = std::str::from_utf8(&b[i + 2..i + 4]).map_err(|e| e.to_string())?;
        out.push(u8::from_str_radix(h, 16).map_err(|e| format!("{e} in {s}"))?);
        i += 4;
    }
    if i != b.len() {
        return Err(format!("not a hex string: {s}"));
    }
    Ok(out)
}

/// A quoted `-xx` string argument's bytes (`"\x41\x42"`); an argument strace cut short
/// (`"…"...`) is an error: raise `-s`.
pub fn string(arg: &str) -> Result<Vec<u8>, String> {
    let inner = arg
        .strip_prefix('"')
        .and_then(|a| a.strip_suffix('"'))
        .ok_or_else(|| format!("not a complete string argument: {arg:.80}"))?;
    unhex(inner)
}

/// An fd argument or return value with its `-y` decoration: `3<\x2f…>` → (3, "/…").
pub fn fd(arg: &str) -> Result<(i64, String), String> {
    let (n, rest) = arg
        .split_once('<')
        .ok_or_else(|| format!("no fd path: {arg}"))?;
    let n = n.trim().parse().map_err(|_| format!("bad fd: {arg}"))?;
    // A file replaced by a rename while still open (the compacted epoch log's old file,
    // closed later) is printed with a `(deleted)` suffix.
    let rest = rest.strip_suffix("(deleted)").unwrap_or(rest);
    let p = rest
        .strip_suffix('>')
        .ok_or_else(|| format!("bad fd: {arg}"))?;
    // Pipes and sockets are decorated as text (`pipe:[…]`), files as hex.
    let path = match unhex(p) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => p.to_string(),
    };
    Ok((n, path))
}

/// The numeric part of a return value (`5`, `3<…>`, `-1 ENOENT (…)`).
pub fn ret_num(ret: &str) -> Option<i64> {
    let end = ret
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(ret.len());
    ret[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_calls_strings_fds_and_joins_unfinished_halves() {
        let text = "12  openat(AT_FDCWD<\\x2f>, \"\\x2f\\x61\", O_RDWR|O_CREAT|O_CLOEXEC, 0666) = 3<\\x2f\\x61>\n\
                    12  write(3<\\x2f\\x61>, \"\\x68\\x69\", 2 <unfinished ...>\n\
                    13  fsync(4<\\x2f\\x62>) = 0\n\
                    12  <... write resumed>) = 2\n\
                    12  +++ exited with 0 +++\n";
        let c = calls(text).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].name, "openat");
        assert_eq!(string(&c[0].args[1]).unwrap(), b"/a");
        assert_eq!(fd(&c[0].ret).unwrap(), (3, "/a".to_string()));
        assert_eq!(c[1].name, "fsync");
        assert_eq!(c[2].name, "write");
        // The write started before the fsync completed.
        assert_eq!((c[0].start, c[1].start, c[2].start), (0, 1, 1));
        assert_eq!(string(&c[2].args[1]).unwrap(), b"hi");
        assert_eq!(ret_num(&c[2].ret), Some(2));
        assert_eq!(ret_num("-1 ENOENT (No such file)"), Some(-1));
        assert!(string("\"\\x41\"...").is_err());
    }

    /// s26: an interrupted `close` counts at its start: another thread's `openat` may get the
    /// number back before the close completes. Fails with the close at its completion (the
    /// `openat` first).
    #[test]
    fn an_interrupted_close_counts_at_its_start() {
        let text = "12  close(3<\\x2f\\x61> <unfinished ...>\n\
                    13  openat(AT_FDCWD<\\x2f>, \"\\x2f\\x62\", O_RDONLY) = 3<\\x2f\\x62>\n\
                    12  <... close resumed>) = 0\n";
        let c = calls(text).unwrap();
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["close", "openat"]);
        assert_eq!(fd(&c[0].args[0]).unwrap(), (3, "/a".to_string()));
    }
}
