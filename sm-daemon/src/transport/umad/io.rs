//! The umad I/O thread: owns the device, moves MADs between it and the async side.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use sm_mad::Lid;
use tokio::sync::mpsc::error::TrySendError;

use super::header::{self, QP1_QKEY, SendHdr};
use super::sys::{self, Read};
use super::{Incoming, Outgoing};

/// Reads per round before queued writes get their turn.
const READS_PER_ROUND: usize = 256;
/// The largest message accepted (a kernel-reassembled RMPP transfer); a longer one could be
/// neither read nor skipped, so the thread stops.
const MAX_MESSAGE: usize = 4 << 20;
/// While MADs flow, the thread waits on the outgoing channel this long between looks at
/// the device: an outgoing MAD wakes it at once, an incoming one waits at most this.
const BUSY_STEP: Duration = Duration::from_micros(50);
/// How long after the last MAD the thread stays in that mode.
const BUSY_FOR: Duration = Duration::from_millis(20);
/// Idle, it waits in poll() on the device this long (the bound on how late the first MAD
/// of a quiet period goes out).
const IDLE_WAIT_MS: i32 = 5;

pub(super) struct Worker {
    pub(super) file: sys::UmadFile,
    /// Held for the thread's life: IsSM stays set until it is dropped.
    pub(super) issm: Option<sys::IsSm>,
    pub(super) hdr_len: usize,
    /// Agent id per management class.
    pub(super) classes: Vec<(u8, u32)>,
    pub(super) out_rx: std::sync::mpsc::Receiver<Outgoing>,
    pub(super) in_tx: tokio::sync::mpsc::Sender<Incoming>,
    pub(super) stop: Arc<AtomicBool>,
}

/// Why the loop ended.
enum Exit {
    Stopped,
    Failed(String),
}

impl Worker {
    pub(super) fn run(mut self) {
        match self.serve() {
            Exit::Stopped => tracing::debug!("umad I/O thread stopping"),
            Exit::Failed(e) => tracing::error!("umad I/O thread stopped: {e}"),
        }
        // Drop order: IsSM first (an SM that stops is no SM), then the agents and the file.
        drop(self.issm.take());
        tracing::debug!("umad agents unregistered, device closed");
    }

    fn serve(&mut self) -> Exit {
        let mut buf = vec![0u8; self.hdr_len + 256];
        let mut msg = Vec::with_capacity(self.hdr_len + 256);
        let mut last_busy = Instant::now();
        loop {
            let mut busy = false;
            for _ in 0..READS_PER_ROUND {
                match self.file.read(&mut buf) {
                    Ok(Read::Data(n)) => {
                        busy = true;
                        if !self.deliver(&buf[..n]) {
                            return Exit::Stopped;
                        }
                    }
                    Ok(Read::Empty) => break,
                    Ok(Read::TooSmall) => match header::wanted_len(&buf, self.hdr_len) {
                        Some(n) if n <= MAX_MESSAGE && n > buf.len() => buf.resize(n, 0),
                        other => {
                            return Exit::Failed(format!(
                                "a queued message of {other:?} bytes cannot be read"
                            ));
                        }
                    },
                    Err(e) => return Exit::Failed(format!("reading the umad device: {e}")),
                }
            }
            loop {
                match self.out_rx.try_recv() {
                    Ok(o) => {
                        busy = true;
                        self.transmit(&o, &mut msg);
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Exit::Stopped,
                }
            }
            if self.stop.load(Ordering::Relaxed) {
                return Exit::Stopped;
            }
            if busy {
                last_busy = Instant::now();
                continue;
            }
            if last_busy.elapsed() < BUSY_FOR {
                // Answers are due and the core will answer them with more requests: wait
                // for those, and look at the device again soon.
                match self.out_rx.recv_timeout(BUSY_STEP) {
                    Ok(o) => {
                        last_busy = Instant::now();
                        self.transmit(&o, &mut msg);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return Exit::Stopped,
                }
            } else if let Err(e) = self.file.wait_readable(IDLE_WAIT_MS) {
                return Exit::Failed(format!("poll on the umad device: {e}"));
            }
        }
    }

    /// Validates one received message and hands it on; false when the receiver is gone.
    fn deliver(&self, buf: &[u8]) -> bool {
        let Some(m) = parse_message(buf, self.hdr_len) else {
            return true;
        };
        match self.in_tx.try_send(m) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                tracing::warn!("receive queue full; dropping a MAD");
                true
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }

    fn transmit(&self, o: &Outgoing, msg: &mut Vec<u8>) {
        let Some(&class) = o.mad.get(1) else {
            tracing::debug!("refusing to send an empty MAD");
            return;
        };
        let Some(&(_, agent)) = self.classes.iter().find(|(c, _)| *c == class) else {
            tracing::debug!(class, "no agent registered for this class; MAD not sent");
            return;
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
        msg.resize(self.hdr_len, 0);
        header::emit_send(&h, self.hdr_len, o.mad.len(), msg);
        msg.extend_from_slice(&o.mad);
        if let Err(e) = self.file.write(msg) {
            // The core's deadline covers a request that never left.
            tracing::debug!(dlid = o.dlid.0, "umad write failed: {e}");
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
        sm.start(0);
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
                    sm.handle_mad(1, Lid(x as u16), &buf);
                    while sm.poll_transmit().is_some() {}
                }
            }
        }
    }
}
