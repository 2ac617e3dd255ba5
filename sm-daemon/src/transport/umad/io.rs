//! The umad I/O thread: owns the device, moves MADs between it and the async side.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use sm_mad::Lid;
use tokio::sync::mpsc::error::TrySendError;

use super::header::{self, QP1_QKEY, SendHdr};
use super::sys::{self, Read};
use super::{Device, Incoming, Outgoing, UmadError};

/// The largest message accepted (a kernel-reassembled RMPP transfer); a longer one could be
/// neither read nor skipped, so the thread stops.
const MAX_MESSAGE: usize = 4 << 20;
/// How long each thread blocks before it looks at the stop flag (the bound on how long
/// dropping the transport takes).
const STOP_CHECK_MS: i32 = 20;

pub(super) struct Worker {
    /// Taken by the thread; dropped when it ends (IsSM first, then the agents and file).
    pub(super) dev: Option<Device>,
    /// Taken by the writer thread.
    pub(super) out_rx: Option<std::sync::mpsc::Receiver<Outgoing>>,
    pub(super) in_tx: tokio::sync::mpsc::Sender<Incoming>,
    pub(super) stop: Arc<AtomicBool>,
}

/// Why the loop ended.
enum Exit {
    Stopped,
    Failed(String),
}

/// What one read gave.
pub(super) enum Got {
    Message(Incoming),
    /// A message to drop (a timed-out request, a short one).
    Skipped,
    Empty,
}

/// Reads one message, growing `buf` for a long one (a kernel-reassembled RMPP transfer).
pub(super) fn read_one(
    file: &sys::UmadFile,
    hdr_len: usize,
    buf: &mut Vec<u8>,
) -> Result<Got, UmadError> {
    loop {
        match file.read(buf).map_err(UmadError::Io)? {
            Read::Data(n) => {
                return Ok(match parse_message(&buf[..n], hdr_len) {
                    Some(m) => Got::Message(m),
                    None => Got::Skipped,
                });
            }
            Read::Empty => return Ok(Got::Empty),
            Read::TooSmall => match header::wanted_len(buf, hdr_len) {
                Some(n) if n <= MAX_MESSAGE && n > buf.len() => buf.resize(n, 0),
                other => {
                    return Err(UmadError::Io(std::io::Error::other(format!(
                        "a queued message of {other:?} bytes cannot be read"
                    ))));
                }
            },
        }
    }
}

/// Writes one MAD with the header its agent needs; `msg` is scratch.
pub(super) fn transmit(
    file: &sys::UmadFile,
    hdr_len: usize,
    classes: &[(u8, u32)],
    o: &Outgoing,
    msg: &mut Vec<u8>,
) -> std::io::Result<()> {
    let Some(class) = sm_mad::mad::peek_class(&o.mad) else {
        tracing::debug!("refusing to send a MAD without a header");
        return Ok(());
    };
    let class = u8::from(class);
    let Some(&(_, agent)) = classes.iter().find(|(c, _)| *c == class) else {
        tracing::debug!(class, "no agent registered for this class; MAD not sent");
        return Ok(());
    };
    let smi = o.qpn == 0;
    let h = SendHdr {
        agent,
        timeout_ms: o.timeout_ms,
        retries: 0,
        qpn: o.qpn,
        qkey: if smi { 0 } else { QP1_QKEY },
        dlid: o.dlid.0,
        sl: o.sl,
        pkey_index: o.pkey_index,
    };
    msg.clear();
    msg.resize(hdr_len, 0);
    header::emit_send(&h, hdr_len, o.mad.len(), msg);
    msg.extend_from_slice(&o.mad);
    file.write(msg)
}

impl Worker {
    pub(super) fn run(mut self) {
        let Some(dev) = self.dev.take() else { return };
        match self.serve(&dev) {
            Exit::Stopped => tracing::debug!("umad I/O thread stopping"),
            Exit::Failed(e) => tracing::error!("umad I/O thread stopped: {e}"),
        }
        drop(dev);
        tracing::debug!("umad agents unregistered, device closed");
    }

    /// Runs the reader here and the writer on a second thread; both share the file (reads
    /// and writes on one umad fd may run at once, on a kernel and under the shim) and each
    /// blocks in its own wait, so a MAD is handed on the moment it arrives or is queued,
    /// without polling.
    fn serve(&mut self, dev: &Device) -> Exit {
        let Some(out_rx) = self.out_rx.take() else {
            return Exit::Failed("no outgoing channel".into());
        };
        let stop = &self.stop;
        let reader = &*self;
        std::thread::scope(|s| {
            let writer = s.spawn(move || write_loop(dev, out_rx, stop));
            let read = reader.read_loop(dev);
            stop.store(true, Ordering::Relaxed);
            let write = writer
                .join()
                .unwrap_or_else(|_| Exit::Failed("the umad writer thread panicked".into()));
            match (read, write) {
                (Exit::Failed(e), _) | (_, Exit::Failed(e)) => Exit::Failed(e),
                _ => Exit::Stopped,
            }
        })
    }

    /// Waits on the device and hands every message on.
    fn read_loop(&self, dev: &Device) -> Exit {
        let mut buf = vec![0u8; dev.hdr_len + 256];
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Exit::Stopped;
            }
            loop {
                match read_one(&dev.file, dev.hdr_len, &mut buf) {
                    Ok(Got::Message(m)) => {
                        if !self.deliver(m) {
                            return Exit::Stopped;
                        }
                    }
                    Ok(Got::Skipped) => {}
                    Ok(Got::Empty) => break,
                    Err(e) => return Exit::Failed(e.to_string()),
                }
            }
            if let Err(e) = dev.file.wait_readable(STOP_CHECK_MS) {
                return Exit::Failed(format!("poll on the umad device: {e}"));
            }
        }
    }

    /// Hands one received message on; false when the receiver is gone.
    fn deliver(&self, m: Incoming) -> bool {
        match self.in_tx.try_send(m) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                tracing::warn!("receive queue full; dropping a MAD");
                true
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }
}

/// The writer thread: waits on the outgoing channel and writes every MAD.
fn write_loop(
    dev: &Device,
    out_rx: std::sync::mpsc::Receiver<Outgoing>,
    stop: &AtomicBool,
) -> Exit {
    let mut msg = Vec::with_capacity(dev.hdr_len + 256);
    let step = Duration::from_millis(STOP_CHECK_MS as u64);
    loop {
        match out_rx.recv_timeout(step) {
            Ok(o) => {
                if let Err(e) = transmit(&dev.file, dev.hdr_len, &dev.classes, &o, &mut msg) {
                    // The core's deadline covers a request that never left.
                    tracing::debug!(dlid = o.dlid.0, "umad write failed: {e}");
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                stop.store(true, Ordering::Relaxed);
                return Exit::Stopped;
            }
        }
        if stop.load(Ordering::Relaxed) {
            return Exit::Stopped;
        }
    }
}

/// One received message (header + MAD), validated; `None` for anything to drop.
fn parse_message(buf: &[u8], hdr_len: usize) -> Option<Incoming> {
    let h = match header::parse_recv(buf, hdr_len) {
        Ok(h) => h,
        Err(e) => {
            tracing::debug!(?e, "dropping a umad message with a short header");
            return None;
        }
    };
    if h.status != 0 {
        // 110 (ETIMEDOUT): a request the kernel (or ibsim) gave up on. The core keeps its
        // own deadline and retries, so there is nothing to do.
        tracing::trace!(status = h.status, "umad send failed; dropped");
        return None;
    }
    let mad = buf.get(hdr_len..)?;
    if mad.len() < header::MAD_HDR_LEN {
        tracing::debug!(
            len = mad.len(),
            "dropping a umad message too short for a MAD"
        );
        return None;
    }
    Some(Incoming {
        slid: Lid(h.slid),
        qpn: h.qpn,
        sl: h.sl,
        pkey_index: h.pkey_index,
        mad: mad.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(hdr_len: usize, status: u32, mad_len: usize) -> Vec<u8> {
        let mut b = vec![0u8; hdr_len + mad_len];
        let h = SendHdr {
            agent: 1,
            timeout_ms: 0,
            retries: 0,
            qpn: 0,
            qkey: 0,
            dlid: 42,
            sl: 0,
            pkey_index: 0,
        };
        header::emit_send(&h, hdr_len, mad_len, &mut b);
        b[4..8].copy_from_slice(&status.to_ne_bytes());
        b
    }

    #[test]
    fn good_messages_pass_with_their_source() {
        for hdr in [header::HDR_LEN_OLD, header::HDR_LEN_PKEY] {
            let m = parse_message(&message(hdr, 0, 256), hdr).unwrap();
            assert_eq!(m.slid, Lid(42));
            assert_eq!(m.mad.len(), 256);
        }
    }

    #[test]
    fn timeouts_short_and_garbage_buffers_are_dropped() {
        let hdr = header::HDR_LEN_OLD;
        // A request the kernel gave up on: status 110, header + 24 bytes.
        assert!(parse_message(&message(hdr, 110, 24), hdr).is_none());
        assert!(parse_message(&message(hdr, 0, 23), hdr).is_none());
        assert!(parse_message(&message(hdr, 0, 0)[..40], hdr).is_none());
        assert!(parse_message(&[], hdr).is_none());
        // Whatever the bytes, nothing panics.
        let mut x = 0x9e37_79b9_u32;
        for len in 0..400 {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            for hdr in [header::HDR_LEN_OLD, header::HDR_LEN_PKEY] {
                let _ = parse_message(&buf, hdr);
                let _ = header::wanted_len(&buf, hdr);
            }
        }
    }

    #[test]
    fn the_core_survives_whatever_the_device_delivers() {
        use crate::core::{Params, Sm};
        let mut sm = Sm::new(Params::default(), sm_core::lid::LidStore::new());
        sm.start(crate::core::Instant::ZERO);
        let mut x = 0x2545_f491_u32;
        for len in [0, 1, 23, 24, 63, 64, 200, 255, 256, 257, 2048] {
            for class in [0x01u8, 0x81, 0x03, 0x04] {
                for method in [0x01u8, 0x02, 0x05, 0x07, 0x81, 0x92] {
                    let mut buf: Vec<u8> = (0..len)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 17;
                            x ^= x << 5;
                            x as u8
                        })
                        .collect();
                    if len >= 24 {
                        buf[0] = 1;
                        buf[1] = class;
                        buf[2] = 1;
                        buf[3] = method;
                    }
                    sm.handle_mad(crate::core::Instant::from_nanos(1), Lid(x as u16), &buf);
                    while sm.poll_transmit().is_some() {}
                }
            }
        }
    }
}
