//! The shells that carry the core's MADs: the in-process simulated fabric (virtual time) and
//! the kernel umad device (real hardware, or ibsim through libumad2sim).

pub mod sa_client;
pub mod sim;
pub mod umad;
