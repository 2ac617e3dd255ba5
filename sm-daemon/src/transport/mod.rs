//! The shells that carry the core's MADs: the in-process simulated fabric (virtual time) and,
//! later, the kernel umad device.

pub mod sim;
