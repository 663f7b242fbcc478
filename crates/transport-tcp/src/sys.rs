//! The few socket syscalls std does not offer: non-blocking send and receive on a socket that
//! other threads use too, and waiting for readiness without holding any lock.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// An owned file descriptor that can be closed through a shared reference, so that a failed
/// link frees its socket and epoll instance while the link itself stays in place (the link
/// chain is append-only and read without a lock). Closing sets the number to -1, which later
/// syscalls refuse (`EBADF`) instead of reaching whatever file reuses the number; the callers
/// make sure no syscall is *in flight* on it meanwhile (a link closes its descriptors holding
/// both of its locks, and every other use of them is under one of the two).
pub(crate) struct Fd(AtomicI32);

impl Fd {
    /// Takes ownership of `fd` (closed on drop or by [`Fd::close`]).
    pub(crate) fn new(fd: RawFd) -> Fd {
        Fd(AtomicI32::new(fd))
    }

    /// The descriptor, or -1 once closed.
    #[inline]
    pub(crate) fn get(&self) -> RawFd {
        self.0.load(Ordering::Relaxed)
    }

    /// Closes the descriptor (once; later calls do nothing).
    pub(crate) fn close(&self) {
        let fd = self.0.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: we owned `fd`, and the swap gave it to this call alone.
            unsafe { libc::close(fd) };
        }
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        self.close();
    }
}

/// Shuts a socket down both ways (errors ignored: a closed socket has nothing to shut).
pub(crate) fn shutdown(fd: RawFd) {
    // SAFETY: plain syscall on a descriptor number; a stale one fails with EBADF.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

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

/// An eventfd that wakes a driver blocked in `Transport::wait`; closed on drop.
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

/// An epoll instance, closed on drop.
///
/// The read hand-off between a link's reader thread and the driver rests on `EPOLLEXCLUSIVE`:
/// every link socket is registered exclusively, first in the driver's instance and then in its
/// reader thread's. The kernel hands each readiness wake-up of an exclusive registration to the
/// first instance that has a thread blocked in it, in registration order: to the driver while it
/// is blocked in `Transport::wait`, otherwise to the reader thread. So exactly one thread wakes
/// per arrival, and a driver waiting for an answer reads it itself (one wake-up, not two).
pub(crate) struct Epoll {
    fd: Fd,
}

/// Readiness for input.
pub(crate) const IN: u32 = libc::EPOLLIN as u32;
/// Edge-triggered: reported once per arrival, not while unread bytes remain.
pub(crate) const EDGE: u32 = libc::EPOLLET as u32;
/// Wake only the first waiting instance (see [`Epoll`]).
pub(crate) const EXCLUSIVE: u32 = libc::EPOLLEXCLUSIVE as u32;

impl Epoll {
    /// A fresh epoll instance.
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the returned fd is owned by the new value.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll { fd: Fd::new(fd) })
    }

    /// Registers `fd` for `events`, reported with `token`.
    pub(crate) fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event; a stale fd fails with EBADF.
        if unsafe { libc::epoll_ctl(self.fd.get(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Closes the instance now (see [`Fd::close`]); waits on it return at once from then on.
    pub(crate) fn close(&self) {
        self.fd.close();
    }

    /// Blocks until a registered fd is ready or `timeout` passes (`None`: no limit); fills
    /// `out` and returns how many entries are valid (0 on timeout or interruption).
    pub(crate) fn wait(&self, out: &mut [libc::epoll_event], timeout: Option<Duration>) -> usize {
        let max = i32::try_from(out.len()).unwrap_or(i32::MAX).max(1);
        let n = match timeout {
            None => {
                // SAFETY: `out` is a valid array of at least `max` epoll_events.
                unsafe { libc::epoll_wait(self.fd.get(), out.as_mut_ptr(), max, -1) }
            }
            Some(t) => {
                let ts = libc::timespec {
                    tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
                    tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
                };
                // epoll_pwait2 (Linux 5.11) takes a nanosecond timeout; called by number so
                // that an older C library does not matter.
                // SAFETY: `out` is a valid array of at least `max` epoll_events, `ts` lives
                // across the call, and a null sigmask means "unchanged".
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        self.fd.get(),
                        out.as_mut_ptr(),
                        max,
                        &ts as *const libc::timespec,
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    )
                };
                if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                    // An old kernel: millisecond resolution, rounded up so as never to be early.
                    let ms = i32::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
                    // SAFETY: as above.
                    unsafe { libc::epoll_wait(self.fd.get(), out.as_mut_ptr(), max, ms) }
                } else {
                    r as i32
                }
            }
        };
        usize::try_from(n).unwrap_or(0)
    }
}
