//! Routing engines of `ibsm`. Not built yet; see issue 4.
