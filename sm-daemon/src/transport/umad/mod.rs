//! The kernel umad transport: MADs to and from `/dev/infiniband/umadN`, on real hardware and
//! against ibsim through the libumad2sim shim.
//!
//! - `sys.rs`: every `unsafe` libc call (open, close, read, write, poll, ioctl), nothing else.
//! - `header.rs`: the kernel's message header and agent registration request as bytes.
//! - [`device`]: which device and port, from sysfs.
//! - `io.rs`: reading and writing one message; the I/O threads of [`Umad`].
//!
//! [`Device::open`] opens the device, registers the agents (SMI classes 0x81 and 0x01 on QP0,
//! SA class 0x03 on QP1) and holds `issmN` so that traps reach us. The SM drives a
//! [`Device`] from one thread: write what the core transmits, wait in poll() until a MAD
//! arrives or the core's next deadline, read everything queued. [`Umad::open`] puts a
//! device behind I/O threads for async callers (`ibsm events`): they [`Umad::send`]
//! [`Outgoing`] MADs and [`Umad::recv`] [`Incoming`] ones over channels. Dropping either
//! unregisters the agents and closes both files.
//!
//! The threaded I/O works the same on both back ends, on two threads sharing the file: the reader
//! waits in poll() on the umad fd and drains every readable MAD (the shim's read never
//! blocks and returns -11 when empty; a real kernel's non-blocking read returns EAGAIN); the
//! writer waits on the outgoing channel and writes each MAD as it comes. Neither polls: a
//! MAD is handed on the moment it arrives or is queued. (The shim's poll watches only its
//! first umad fd, so one thread could not wait on the device and on a wake-up fd at once.)
//! Both look at the stop flag every 20 ms.

pub mod device;
mod header;
mod io;
mod sys;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use sm_mad::{Guid, Lid, MgmtClass};

pub use device::PortDesc;

/// What can go wrong opening or using the device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UmadError {
    #[error(
        "no InfiniBand umad device (/sys/class/infiniband_mad is missing or empty; is ib_umad loaded?)"
    )]
    NoDevice,
    #[error("umad ABI version {0} is not supported (need 5)")]
    AbiVersion(u32),
    #[error("{0:?}: expected DEVICE or DEVICE:PORT")]
    BadSpec(String),
    #[error("no umad port matches {spec:?} (available: {available})")]
    NoSuchPort { spec: String, available: String },
    #[error("no umad port has port GUID {guid} (available: {available})")]
    NoPortWithGuid { guid: Guid, available: String },
    #[error("opening /dev/infiniband/umad{umad}: {source}")]
    Open { umad: u32, source: std::io::Error },
    #[error("registering the umad agent for class {class:#04x}: {source}")]
    Register { class: u8, source: std::io::Error },
    #[error("opening /dev/infiniband/issm{umad} (another SM may hold this port): {source}")]
    IsSm { umad: u32, source: std::io::Error },
    #[error("starting the umad I/O thread: {0}")]
    Thread(std::io::Error),
    #[error("the umad I/O thread has stopped")]
    Closed,
    #[error("umad device: {0}")]
    Io(std::io::Error),
}

/// A MAD received from the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// LRH source LID (0xFFFF for directed-route SMPs that came back on the permissive path).
    pub slid: Lid,
    /// Source QP (0 for SMPs, 1 or a client's QP for GSI MADs).
    pub qpn: u32,
    pub sl: u8,
    pub pkey_index: u16,
    /// The MAD, at least its 24-byte common header (256 bytes for one SMP).
    pub mad: Vec<u8>,
}

/// A MAD to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// LRH destination LID: permissive (0xFFFF) for directed-route SMPs.
    pub dlid: Lid,
    /// Destination QP: 0 for SMPs, 1 (or the requester's QP) for GSI MADs.
    pub qpn: u32,
    pub sl: u8,
    /// P_Key index to send with (GSI answers: the one the request came in on; used with
    /// the 64-byte header only).
    pub pkey_index: u16,
    /// Non-zero for requests (the kernel matches responses only then); 0 for responses
    /// and unsolicited MADs.
    pub timeout_ms: u32,
    /// The MAD; its management class (byte 1) picks the agent.
    pub mad: Vec<u8>,
}

impl Outgoing {
    /// An SMP on QP0.
    pub fn smp(dlid: Lid, mad: Vec<u8>, timeout_ms: u32) -> Outgoing {
        Outgoing {
            dlid,
            qpn: 0,
            sl: 0,
            pkey_index: 0,
            timeout_ms,
            mad,
        }
    }

    /// A GSI answer (SA) to a requester's QP: the MAD may be longer than 256 bytes when the
    /// kernel's RMPP agent is to segment it.
    pub fn gsi(dlid: Lid, qpn: u32, sl: u8, pkey_index: u16, mad: Vec<u8>) -> Outgoing {
        Outgoing {
            dlid,
            qpn,
            sl,
            pkey_index,
            timeout_ms: 0,
            mad,
        }
    }
}

/// How to open the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Hold `issmN` open (the SM capability bit; traps reach only such a port).
    pub issm: bool,
    /// Register the SMI agents (classes 0x81 and 0x01 on QP0).
    pub smi: bool,
    /// Register the SA class agent of a server (QP1).
    pub sa: bool,
    /// Register an SA client agent instead (QP1): it sends requests and receives the SA's
    /// Reports.
    pub sa_client: bool,
    /// Register a performance management client agent (class 0x04, QP1): it reads port
    /// counters.
    pub perf: bool,
}

impl Default for Options {
    /// What an SM opens.
    fn default() -> Self {
        Options {
            issm: true,
            smi: true,
            sa: true,
            sa_client: false,
            perf: false,
        }
    }
}

impl Options {
    /// What an SA client (an event listener) opens: no SMI, no IsSM.
    pub fn sa_client() -> Options {
        Options {
            issm: false,
            smi: false,
            sa: false,
            sa_client: true,
            perf: false,
        }
    }
}

/// Methods whose unsolicited SMPs reach the SM: SMInfo Get/Set from other SMs, and traps.
const SMI_METHODS: &[u8] = &[0x01, 0x02, 0x05];
/// Methods an SA server answers: Get, Set, GetTable, GetTraceTable, GetMulti, Delete.
const SA_METHODS: &[u8] = &[0x01, 0x02, 0x12, 0x13, 0x14, 0x15];
/// Requests an SA client receives: Report.
const SA_CLIENT_METHODS: &[u8] = &[0x06];

/// The agents to register. SMPs never use RMPP. The SA agent asks the kernel for RMPP
/// (rmpp_version 1), as OpenSM does: an SA *server*'s multi-MAD answers are acknowledged by
/// the requester with RMPP ACKs whose method is a response (GetTableResp) carrying the
/// requester's TID, which a non-RMPP agent would never receive (the kernel routes responses
/// by the TID's upper half); a kernel RMPP agent consumes those ACKs and segments our one
/// large write itself. (libumad2sim carries no RMPP at all.)
fn agents(opts: &Options) -> Vec<header::AgentReq> {
    let mut v = Vec::new();
    if opts.smi {
        for class in [MgmtClass::SubnDirected, MgmtClass::SubnLid] {
            v.push(header::AgentReq {
                qpn: 0,
                mgmt_class: u8::from(class),
                class_version: 1,
                rmpp_version: 0,
                methods: SMI_METHODS,
            });
        }
    }
    if opts.sa_client {
        v.push(header::AgentReq {
            qpn: 1,
            mgmt_class: u8::from(MgmtClass::SubnAdm),
            class_version: 2,
            rmpp_version: 0,
            methods: SA_CLIENT_METHODS,
        });
    }
    if opts.perf {
        // A client: its answers come back by TID, no method to receive.
        v.push(header::AgentReq {
            qpn: 1,
            mgmt_class: u8::from(MgmtClass::Perf),
            class_version: sm_mad::perf::CLASS_VERSION,
            rmpp_version: 0,
            methods: &[],
        });
    }
    if opts.sa {
        v.push(header::AgentReq {
            qpn: 1,
            mgmt_class: u8::from(MgmtClass::SubnAdm),
            class_version: 2,
            rmpp_version: 1,
            methods: SA_METHODS,
        });
    }
    v
}

/// An open device: the file, its agents, IsSM. Blocking and single-threaded: the SM's
/// driver owns one and does all its I/O on one thread ([`Device::send`],
/// [`Device::wait_readable`], [`Device::try_recv`]), so no MAD crosses a thread on its way
/// (handing each MAD between threads cost more than the I/O itself). [`Umad`] wraps one in
/// I/O threads for async callers.
#[derive(Debug)]
pub struct Device {
    port: PortDesc,
    /// Dropped first: an SM that stops is no SM.
    _issm: Option<sys::IsSm>,
    file: sys::UmadFile,
    hdr_len: usize,
    /// Agent id per management class.
    classes: Vec<(u8, u32)>,
    /// Send and receive scratch.
    out: Vec<u8>,
    buf: Vec<u8>,
}

/// How long a closing device waits for the fabric to fall quiet, and at most.
const CLOSE_QUIET_MS: i32 = 10;
const CLOSE_DRAIN_MS: u128 = 100;

impl Drop for Device {
    fn drop(&mut self) {
        // IsSM goes first; what is still on its way (answers, the trap that reports the
        // capability change) is read and dropped while the agents are registered: under
        // the libumad2sim shim a MAD that arrives for a closed device crashes the process.
        drop(self._issm.take());
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < CLOSE_DRAIN_MS {
            match self.file.wait_readable(CLOSE_QUIET_MS) {
                Ok(true) => {
                    while let Ok(io::Got::Message(_) | io::Got::Skipped) =
                        io::read_one(&self.file, self.hdr_len, &mut self.buf)
                    {}
                }
                Ok(false) | Err(_) => break,
            }
        }
    }
}

impl Device {
    /// Opens `port`'s umad device, registers the agents and takes IsSM.
    pub fn open(port: PortDesc, opts: Options) -> Result<Device, UmadError> {
        let umad = port.umad;
        let mut file =
            sys::UmadFile::open(umad).map_err(|source| UmadError::Open { umad, source })?;
        // The 64-byte header with a P_Key index on a real kernel; libumad2sim accepts the
        // ioctl but only understands the 56-byte form.
        let hdr_len = if port.is_simulator() {
            header::HDR_LEN_OLD
        } else {
            match file.enable_pkey() {
                Ok(()) => header::HDR_LEN_PKEY,
                Err(e) => {
                    tracing::warn!("ENABLE_PKEY refused ({e}); using the 56-byte umad header");
                    header::HDR_LEN_OLD
                }
            }
        };
        let mut classes = Vec::new();
        for a in agents(&opts) {
            match file.register(&a.to_bytes()) {
                Ok(id) => {
                    tracing::debug!(class = a.mgmt_class, agent = id, "umad agent registered");
                    classes.push((a.mgmt_class, id));
                }
                Err(source) if a.mgmt_class == u8::from(MgmtClass::SubnAdm) => {
                    // The SM works without its SA; say so and go on.
                    tracing::warn!("no SA agent: {source}");
                }
                Err(source) => {
                    return Err(UmadError::Register {
                        class: a.mgmt_class,
                        source,
                    });
                }
            }
        }
        let issm = if opts.issm {
            Some(sys::IsSm::open(umad).map_err(|source| UmadError::IsSm { umad, source })?)
        } else {
            None
        };
        tracing::info!(port = %port, header = hdr_len, "umad device open");
        Ok(Device {
            port,
            _issm: issm,
            file,
            hdr_len,
            classes,
            out: Vec::with_capacity(hdr_len + 256),
            buf: vec![0u8; hdr_len + 256],
        })
    }

    /// The port this runs on.
    pub fn port(&self) -> &PortDesc {
        &self.port
    }

    /// The umad header size in use (56 or 64).
    pub fn header_len(&self) -> usize {
        self.hdr_len
    }

    /// Writes one MAD. A MAD of a class no agent was registered for is dropped.
    pub fn send(&mut self, o: &Outgoing) -> std::io::Result<()> {
        io::transmit(&self.file, self.hdr_len, &self.classes, o, &mut self.out)
    }

    /// Waits until a MAD can be read or `timeout_ms` passed; true when readable.
    pub fn wait_readable(&self, timeout_ms: i32) -> Result<bool, UmadError> {
        self.file.wait_readable(timeout_ms).map_err(UmadError::Io)
    }

    /// The next received MAD, without blocking; `None` when none is queued. Messages to
    /// drop (timed-out requests, short ones) are skipped.
    pub fn try_recv(&mut self) -> Result<Option<Incoming>, UmadError> {
        loop {
            match io::read_one(&self.file, self.hdr_len, &mut self.buf)? {
                io::Got::Message(m) => return Ok(Some(m)),
                io::Got::Skipped => continue,
                io::Got::Empty => return Ok(None),
            }
        }
    }
}

/// The open device and its I/O thread (for async callers).
#[derive(Debug)]
pub struct Umad {
    port: PortDesc,
    hdr_len: usize,
    tx: std::sync::mpsc::Sender<Outgoing>,
    rx: tokio::sync::mpsc::Receiver<Incoming>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Received MADs buffered toward the async side; beyond this the I/O thread drops them
/// (the core retries its own requests), so a flood cannot grow memory.
const INCOMING_QUEUE: usize = 8192;

impl Umad {
    /// Opens `port`'s umad device, registers the agents, takes IsSM and starts the thread.
    pub fn open(port: PortDesc, opts: Options) -> Result<Umad, UmadError> {
        let dev = Device::open(port.clone(), opts)?;
        let hdr_len = dev.hdr_len;
        let (tx, out_rx) = std::sync::mpsc::channel();
        let (in_tx, rx) = tokio::sync::mpsc::channel(INCOMING_QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let worker = io::Worker {
            dev: Some(dev),
            out_rx: Some(out_rx),
            in_tx,
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("umad{}", port.umad))
            .spawn(move || worker.run())
            .map_err(UmadError::Thread)?;
        Ok(Umad {
            port,
            hdr_len,
            tx,
            rx,
            stop,
            thread: Some(thread),
        })
    }

    /// The port this runs on.
    pub fn port(&self) -> &PortDesc {
        &self.port
    }

    /// The umad header size in use (56 or 64).
    pub fn header_len(&self) -> usize {
        self.hdr_len
    }

    /// Queues a MAD for the I/O thread.
    pub fn send(&self, m: Outgoing) -> Result<(), UmadError> {
        self.tx.send(m).map_err(|_| UmadError::Closed)
    }

    /// The next received MAD; `None` once the I/O thread has stopped.
    pub async fn recv(&mut self) -> Option<Incoming> {
        self.rx.recv().await
    }

    /// A received MAD if one is waiting.
    pub fn try_recv(&mut self) -> Option<Incoming> {
        self.rx.try_recv().ok()
    }

    /// The next received MAD, blocking (for callers without a runtime).
    pub fn recv_blocking(&mut self) -> Option<Incoming> {
        self.rx.blocking_recv()
    }
}

impl Drop for Umad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the umad I/O thread panicked");
            }
        }
    }
}

/// Keeps the calling thread, and the threads it starts from now on, on CPU `cpu`.
pub fn pin_thread(cpu: usize) -> Result<(), UmadError> {
    sys::pin_thread(cpu).map_err(UmadError::Io)
}
