//! Every `unsafe` call of the umad transport, in one small module (like quinn-udp): libc
//! `open` / `close` / `read` / `write` / `poll` / `ioctl` on `/dev/infiniband/umadN` and
//! `issmN`, and sysfs reads and listings.
//!
//! Why libc and not `std::fs`: the libumad2sim shim that routes this interface to ibsim
//! intercepts only the libc symbols `open`, `close`, `read`, `write`, `poll`, `ioctl` and
//! `opendir` (std opens through `open64`, which it never sees), and its file descriptors
//! are fake numbers that `fcntl`, epoll and tokio cannot use. So the device is driven with plain
//! blocking-style libc calls from one thread, and the same code runs on a real kernel.
//!
//! Nothing here interprets MADs; `header.rs` encodes the kernel's message header.

#![allow(unsafe_code)] // The platform calls of the umad transport; see the module doc.

use std::ffi::CString;
use std::io;
use std::os::raw::{c_int, c_ulong};

/// `IB_USER_MAD_REGISTER_AGENT`: `_IOWR(0x1b, 1, struct ib_user_mad_reg_req)`.
const REGISTER_AGENT: c_ulong = 0xC01C_1B01;
/// `IB_USER_MAD_UNREGISTER_AGENT`: `_IOW(0x1b, 2, __u32)`.
const UNREGISTER_AGENT: c_ulong = 0x4004_1B02;
/// `IB_USER_MAD_ENABLE_PKEY`: `_IO(0x1b, 3)`.
const ENABLE_PKEY: c_ulong = 0x1B03;

/// The shim's read() returns this (as the value, errno untouched) when its queue is empty.
const SHIM_EMPTY: isize = -11;

/// An owned file descriptor closed with libc `close` (the shim must see the close).
#[derive(Debug)]
struct Fd(c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor was returned by `open` and is closed exactly once.
        unsafe {
            libc::close(self.0);
        }
    }
}

fn open(path: &str, flags: c_int) -> io::Result<Fd> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(Fd(fd))
    }
}

/// The entry names of a directory, through libc `opendir` so the shim can redirect it.
pub(crate) fn list_dir(path: &str) -> io::Result<Vec<String>> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let dir = unsafe { libc::opendir(c.as_ptr()) };
    if dir.is_null() {
        return Err(io::Error::last_os_error());
    }
    let mut names = Vec::new();
    loop {
        // SAFETY: `dir` stays open until `closedir` below.
        let entry = unsafe { libc::readdir(dir) };
        if entry.is_null() {
            break;
        }
        // SAFETY: `entry` points at a dirent whose name is NUL-terminated and stays valid
        // until the next `readdir` on `dir`; it is copied out before that.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: `dir` came from `opendir` and is closed exactly once.
    unsafe { libc::closedir(dir) };
    Ok(names)
}

/// The contents of a (small) sysfs file, read through libc so the shim can redirect it.
pub(crate) fn read_text(path: &str) -> io::Result<String> {
    let fd = open(path, libc::O_RDONLY)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::read(fd.0, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n.min(buf.len())]);
        if out.len() > 64 * 1024 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "sysfs file too large",
            ));
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// What one read from the umad device gave.
#[derive(Debug)]
pub(crate) enum Read {
    /// This many bytes (header + MAD) were read.
    Data(usize),
    /// Nothing queued.
    Empty,
    /// The next message does not fit: the kernel copied only the header (and keeps the
    /// message queued); retry with a buffer of header + the header's length field.
    TooSmall,
}

/// An open `/dev/infiniband/umadN` with the agents registered on it. Dropping it
/// unregisters the agents and closes the file.
#[derive(Debug)]
pub(crate) struct UmadFile {
    fd: Fd,
    agents: Vec<u32>,
}

impl UmadFile {
    /// Opens `umad<index>` non-blocking, read-write.
    pub(crate) fn open(index: u32) -> io::Result<UmadFile> {
        let fd = open(
            &format!("/dev/infiniband/umad{index}"),
            libc::O_RDWR | libc::O_NONBLOCK,
        )?;
        Ok(UmadFile {
            fd,
            agents: Vec::new(),
        })
    }

    /// Switches the file to the 64-byte header with a P_Key index (must come before any
    /// agent registration).
    pub(crate) fn enable_pkey(&self) -> io::Result<()> {
        // SAFETY: this ioctl takes no argument.
        let r = unsafe { libc::ioctl(self.fd.0, ENABLE_PKEY as _) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Registers an agent from a 28-byte `ib_user_mad_reg_req`; returns the agent id the
    /// kernel filled in.
    pub(crate) fn register(&mut self, req: &[u8; 28]) -> io::Result<u32> {
        let mut buf = *req;
        // SAFETY: REGISTER_AGENT reads and writes exactly 28 bytes at the pointer.
        let r = unsafe { libc::ioctl(self.fd.0, REGISTER_AGENT as _, buf.as_mut_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let id = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        self.agents.push(id);
        Ok(id)
    }

    fn unregister(&self, id: u32) -> io::Result<()> {
        let mut id = id;
        // SAFETY: UNREGISTER_AGENT reads one u32 at the pointer.
        let r = unsafe { libc::ioctl(self.fd.0, UNREGISTER_AGENT as _, &mut id as *mut u32) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Waits up to `timeout_ms` for something to read. Under the shim only this fd is
    /// watched, which is all we ask for.
    pub(crate) fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd.0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(r > 0)
    }

    /// Reads one message into `buf`.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<Read> {
        loop {
            // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
            let n = unsafe { libc::read(self.fd.0, buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(Read::Data((n as usize).min(buf.len())));
            }
            if n == SHIM_EMPTY {
                return Ok(Read::Empty);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(Read::Empty),
                Some(libc::ENOSPC) => return Ok(Read::TooSmall),
                _ => return Err(e),
            }
        }
    }

    /// Writes one message (header + MAD).
    pub(crate) fn write(&self, msg: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: `msg` is valid for reads of `msg.len()` bytes.
            let n = unsafe { libc::write(self.fd.0, msg.as_ptr().cast(), msg.len()) };
            if n >= 0 {
                return if n as usize == msg.len() {
                    Ok(())
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "partial umad write",
                    ))
                };
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for UmadFile {
    fn drop(&mut self) {
        for &id in &self.agents {
            if let Err(e) = self.unregister(id) {
                tracing::debug!(agent = id, "unregistering a umad agent: {e}");
            }
        }
        // `fd` closes itself.
    }
}

/// `/dev/infiniband/issmN` held open: the port's IsSM capability bit is set while it lives.
#[derive(Debug)]
pub(crate) struct IsSm {
    _fd: Fd,
}

impl IsSm {
    /// Opens `issm<index>`; fails with `WouldBlock` when another SM holds it.
    pub(crate) fn open(index: u32) -> io::Result<IsSm> {
        let fd = open(
            &format!("/dev/infiniband/issm{index}"),
            libc::O_RDONLY | libc::O_NONBLOCK,
        )?;
        Ok(IsSm { _fd: fd })
    }
}

/// Keeps the calling thread (and the threads it starts from now on) on one CPU.
pub(crate) fn pin_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET checks the index against the
    // set's size; sched_setaffinity reads the set for the calling thread (pid 0).
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
