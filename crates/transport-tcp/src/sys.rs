//! The few socket syscalls std does not offer: non-blocking send and receive on a socket that
//! other threads use too, and waiting for readiness without holding any lock.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Sends without blocking (and without SIGPIPE); `WouldBlock` when the socket buffer is full.
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is a valid readable slice for its length; `fd` is an open socket owned by
        // the link that outlives this call.
        let n = unsafe {
            libc::send(
                fd,
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives without blocking; `Ok(0)` at end of stream, `WouldBlock` when nothing is waiting.
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is a valid writable slice for its length; `fd` is an open socket owned by
        // the link that outlives this call.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Blocks until `fd` is readable, closed or in error.
pub(crate) fn wait_readable(fd: RawFd) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd. An error (EINTR) just returns; the caller loops.
    unsafe { libc::poll(&mut p, 1, -1) };
}

/// Blocks until one of `fds` is writable (or in error), or `timeout` passes.
pub(crate) fn wait_writable(fds: &[RawFd], timeout: Duration) {
    let mut ps: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_millis())
        .unwrap_or(i32::MAX)
        .max(1);
    // SAFETY: `ps` is a valid array of pollfds for its length.
    unsafe { libc::poll(ps.as_mut_ptr(), ps.len() as libc::nfds_t, ms) };
}

/// An eventfd that wakes a driver blocked in [`wait_any`]; closed on drop.
pub(crate) struct Wakeup {
    fd: RawFd,
}

impl Wakeup {
    /// A fresh, non-blocking eventfd.
    pub(crate) fn new() -> io::Result<Wakeup> {
        // SAFETY: plain syscall; the returned fd is owned by the new value.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Wakeup { fd })
    }

    /// Makes the eventfd readable (wakes a waiter).
    pub(crate) fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a valid buffer to our eventfd. A full counter (EAGAIN)
        // already means "readable", so errors are ignored.
        unsafe { libc::write(self.fd, one.as_ptr().cast(), 8) };
    }

    /// Resets the eventfd.
    pub(crate) fn drain(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a valid buffer from our eventfd (non-blocking).
        unsafe { libc::read(self.fd, b.as_mut_ptr().cast(), 8) };
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for Wakeup {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

/// Blocks until one of `fds` is readable, or `timeout` passes. Returns the fds' readiness.
pub(crate) fn wait_any(fds: &mut [libc::pollfd], timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `fds` is a valid array of pollfds for its length; `ts` lives across the call.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}
