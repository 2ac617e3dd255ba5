//! The fabric model of `ibsm`: nodes, ports, links and LIDs, and the text formats that
//! describe them. Not built yet beyond this placeholder; see issue 3.
