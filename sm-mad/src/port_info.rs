//! TEMPORARY stand-in until the PortInfo module lands.
use crate::bits::wire_enum;
wire_enum! {
    /// Port state.
    pub enum PortState: u8 { NoChange = 0, Down = 1, Init = 2, Armed = 3, Active = 4, ActiveDefer = 5, }
}
wire_enum! {
    /// Physical port state.
    pub enum PhysPortState: u8 { NoChange = 0, Sleep = 1, Polling = 2, Disabled = 3, PortConfigurationTraining = 4, LinkUp = 5, LinkErrorRecovery = 6, PhyTest = 7, }
}
