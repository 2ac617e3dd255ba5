//! The in-process simulated fabric of `ibsm`. Not built yet; see issue 5.
